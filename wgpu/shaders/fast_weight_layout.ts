/**
 * WGSL of the layout kernels around the recurrent fast-weight kernels: q/k normalisation into the
 * head-major workspace (forward), the carry gather, and the way back (norm backward, head-major to
 * `[B, T, H, D]`). One invocation per row or element; sizes from the uniform block.
 *
 * Workspace rows (see `fast_weight_recurrent.ts`): pair `p` of head `bh` is row `PAD + p` of `X`/`Y`
 * (`PAD = W-1` window slots before position 0, filled from the carry). Under prefix alignment
 * `X[p] = phi(k_{p-1})` (`X[0]` = carry last key); under same-step `X[p] = phi(k_p)`.
 *
 * @module
 */

import type { QkNorm } from "../../src/rules/config.ts";
import { f32Literal } from "./fast_weight_coef.ts";

const IDX = `@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (gid.y * nwg.x + gid.x) * 64u + lid.x;
  if (idx >= u.n) { return; }`;

function normScale(norm: QkNorm, epsRms: number, D: string, ss: string): string {
  if (norm === "none") return "1.0";
  if (norm === "rms") return `1.0 / sqrt(${ss} / f32(${D}) + ${f32Literal(epsRms)})`;
  return `1.0 / max(sqrt(${ss}), 1e-6)`;
}

/**
 * Normalise rows of `[B, T, H, D]` into head-major rows: `dst[base + (bh*R + off + t)*D + i]`.
 * Also used with `src` = carry tensors (`mode` copy: no normalisation, rows `[BH, S, D]`).
 */
export function normRowsShader(norm: QkNorm, epsRms: number): string {
  return `
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
struct P { n: u32, T: u32, H: u32, D: u32, R: u32, off: u32, base: u32, normalise: u32 }
@group(0) @binding(2) var<uniform> u: P;
${IDX}
  // idx = row of src: (b, t, h) when normalise = 1 or 2, (bh, t) with H folded in otherwise
  let h = idx % u.H;
  let bt = idx / u.H;
  let t = bt % u.T;
  let b = bt / u.T;
  let srcBase = idx * u.D;
  let dstBase = u.base + ((b * u.H + h) * u.R + u.off + t) * u.D;
  var sc = 1.0;
  if (u.normalise != 0u) {
    var ss = 0.0;
    for (var i = 0u; i < u.D; i++) { let v = src[srcBase + i]; ss += v * v; }
    sc = ${normScale(norm, epsRms, "u.D", "ss")};
  }
  for (var i = 0u; i < u.D; i++) { dst[dstBase + i] = src[srcBase + i] * sc; }
}`;
}

/**
 * Copy head-major rows back out (carry gather): `dst[(bh*S + s)*D + i] = src[base + (bh*R + off + s)*D + i]`
 * for the newest `count[b]` of the `S` slots, zero elsewhere.
 */
export function gatherRowsShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> count: array<i32>;
struct P { n: u32, H: u32, S: u32, D: u32, R: u32, off: u32, base: u32, pad: u32 }
@group(0) @binding(3) var<uniform> u: P;
${IDX}
  let i = idx % u.D;
  let row = idx / u.D;
  let s = row % u.S;
  let bh = row / u.S;
  let b = bh / u.H;
  if (i32(s) < i32(u.S) - count[b]) { dst[idx] = 0.0; return; }
  dst[idx] = src[u.base + (bh * u.R + u.off + s) * u.D + i];
}`;
}

/**
 * Head-major gradients back to `[B, T, H, D]`: `dst[((b*T + t)*H + h)*D + i]` from
 * `src[base + (bh*R + off + t)*D + i]`, through the q/k normalisation backward when `normBack`
 * (then `raw` holds the raw rows `[B, T, H, D]`).
 */
export function scatterRowsShader(norm: QkNorm, epsRms: number): string {
  const c = norm === "rms"
    ? "-sc * sc * sc / f32(u.D)"
    : norm === "l2"
    ? "select(-sc * sc * sc, 0.0, sqrt(ss) <= 1e-6)"
    : "0.0";
  return `
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> raw: array<f32>;
struct P { n: u32, T: u32, H: u32, D: u32, R: u32, off: u32, base: u32, normBack: u32 }
@group(0) @binding(3) var<uniform> u: P;
${IDX}
  let h = idx % u.H;
  let bt = idx / u.H;
  let t = bt % u.T;
  let b = bt / u.T;
  let dstBase = idx * u.D;
  let srcBase = u.base + ((b * u.H + h) * u.R + u.off + t) * u.D;
  if (u.normBack == 0u) {
    for (var i = 0u; i < u.D; i++) { dst[dstBase + i] = src[srcBase + i]; }
    return;
  }
  var ss = 0.0;
  var ug = 0.0;
  for (var i = 0u; i < u.D; i++) {
    let v = raw[dstBase + i];
    ss += v * v;
    ug += v * src[srcBase + i];
  }
  let sc = ${normScale(norm, epsRms, "u.D", "ss")};
  let c = ${c};
  for (var i = 0u; i < u.D; i++) { dst[dstBase + i] = sc * src[srcBase + i] + c * ug * raw[dstBase + i]; }
}`;
}
