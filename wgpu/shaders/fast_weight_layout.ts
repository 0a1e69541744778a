/**
 * WGSL of the layout kernels around the recurrent fast-weight kernels: q/k normalisation into the
 * head-major workspace (forward), the carry gather, and the way back (norm backward, head-major to
 * `[B, T, H, D]`). The row kernels give each row `L` lanes of a 64-wide workgroup (`L` = `D` rounded up to
 * a power of two, at most 64; `64 / L` rows per group), so neighbouring lanes touch neighbouring floats
 * (coalesced) and the row's sums reduce through workgroup memory; the gather is one invocation per element.
 * Sizes come from the uniform block.
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

/** Lanes given to each row of `D` floats by the row kernels: `D` rounded up to a power of two, at most 64. */
export function rowLanes(D: number): number {
  let l = 1;
  while (l < D && l < 64) l <<= 1;
  return l;
}

/** Workgroups of a row kernel over `rows` rows of `D` floats (before {@linkcode grid}). */
export function rowGroups(rows: number, D: number): number {
  return Math.ceil(rows / (64 / rowLanes(D)));
}

/**
 * Entry of a row kernel with `L` lanes per row: `row` (may be >= u.n: such lanes must still reach the
 * barriers, so they only guard their memory accesses), `lane` in `0..L-1`, `li` in `0..63`, and
 * `rowSum(v, li)`, the sum of `v` over the row's lanes (`vec2` so two sums share the barriers).
 */
function rowEntry(L: number): string {
  return `
var<workgroup> red: array<vec2<f32>, 64>;
fn rowSum(v: vec2<f32>, li: u32) -> vec2<f32> {
  red[li] = v;
  workgroupBarrier();
  let lane = li % ${L}u;
  for (var s = ${Math.floor(L / 2)}u; s > 0u; s = s >> 1u) {
    if (lane < s) { red[li] = red[li] + red[li + s]; }
    workgroupBarrier();
  }
  let r = red[li - lane];
  workgroupBarrier();
  return r;
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = (gid.y * nwg.x + gid.x) * ${64 / L}u + li / ${L}u;
  let lane = li % ${L}u;
  let live = row < u.n;`;
}

/**
 * Normalise rows of `[B, T, H, D]` into head-major rows: `dst[base + (bh*R + off + t)*D + i]`.
 * Also used with `src` = carry tensors (`mode` copy: no normalisation, rows `[BH, S, D]`).
 * `L` = {@linkcode rowLanes}`(D)`; dispatch {@linkcode rowGroups} groups.
 */
export function normRowsShader(norm: QkNorm, epsRms: number, L: number): string {
  return `
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
struct P { n: u32, T: u32, H: u32, D: u32, R: u32, off: u32, base: u32, normalise: u32 }
@group(0) @binding(2) var<uniform> u: P;
${rowEntry(L)}
  // row of src: (b, t, h) when normalise = 1 or 2, (bh, t) with H folded in otherwise
  let h = row % u.H;
  let bt = row / u.H;
  let t = bt % u.T;
  let b = bt / u.T;
  let srcBase = row * u.D;
  let dstBase = u.base + ((b * u.H + h) * u.R + u.off + t) * u.D;
  var sc = 1.0;
  if (u.normalise != 0u) {
    var ss = 0.0;
    if (live) {
      for (var i = lane; i < u.D; i += ${L}u) { let v = src[srcBase + i]; ss += v * v; }
    }
    ss = rowSum(vec2<f32>(ss, 0.0), li).x;
    sc = ${normScale(norm, epsRms, "u.D", "ss")};
  }
  if (live) {
    for (var i = lane; i < u.D; i += ${L}u) { dst[dstBase + i] = src[srcBase + i] * sc; }
  }
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
 * (then `raw` holds the raw rows `[B, T, H, D]`). `L` = {@linkcode rowLanes}`(D)`; dispatch
 * {@linkcode rowGroups} groups.
 */
export function scatterRowsShader(norm: QkNorm, epsRms: number, L: number): string {
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
${rowEntry(L)}
  let h = row % u.H;
  let bt = row / u.H;
  let t = bt % u.T;
  let b = bt / u.T;
  let dstBase = row * u.D;
  let srcBase = u.base + ((b * u.H + h) * u.R + u.off + t) * u.D;
  if (u.normBack == 0u) {
    if (live) {
      for (var i = lane; i < u.D; i += ${L}u) { dst[dstBase + i] = src[srcBase + i]; }
    }
    return;
  }
  var part = vec2<f32>(0.0, 0.0);
  if (live) {
    for (var i = lane; i < u.D; i += ${L}u) {
      let v = raw[dstBase + i];
      part += vec2<f32>(v * v, v * src[srcBase + i]);
    }
  }
  let sums = rowSum(part, li);
  let ss = sums.x;
  let ug = sums.y;
  let sc = ${normScale(norm, epsRms, "u.D", "ss")};
  let c = ${c};
  if (live) {
    for (var i = lane; i < u.D; i += ${L}u) { dst[dstBase + i] = sc * src[srcBase + i] + c * ug * raw[dstBase + i]; }
  }
}`;
}
