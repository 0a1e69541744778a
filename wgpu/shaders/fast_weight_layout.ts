/**
 * WGSL of the layout kernels around the recurrent fast-weight kernels: q/k normalisation into the
 * head-major workspace (forward), the carry gather, and the way back (norm backward, head-major to
 * `[B, T, H, D]`). The row kernels give each row `L` lanes of a 64-wide workgroup (`L` = `D` rounded up to
 * a power of two, at most 16; `64 / L` rows per group), so neighbouring lanes touch neighbouring floats
 * (coalesced) and the row's sums reduce through workgroup memory; the gather is one invocation per element.
 * The two whole-tensor row kernels (workspace rows, gradient rows) move `width` floats per load and store:
 * 4 (vec4, `L` from `D / 4`) where every row length is a multiple of 4 ({@linkcode rowWidth}), else 1.
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

/**
 * Lanes given to each row of `D` floats by the row kernels: `D` rounded up to a power of two, at most
 * {@linkcode MAX_ROW_LANES} (a lane then takes every `L`-th float of its row).
 */
export function rowLanes(D: number): number {
  let l = 1;
  while (l < D && l < MAX_ROW_LANES) l <<= 1;
  return l;
}

/**
 * Most lanes per row: 16 lanes read 64 contiguous bytes per step, and a 64-wide workgroup holds 4 rows
 * whose sums reduce in 4 steps (64 lanes, one row per workgroup, took 0.49 ms for the 3 x 262k rows of a
 * forward at B = 8, T = 4096, H = 8, D = 64 on the H200: ~0.4 TB/s).
 */
export const MAX_ROW_LANES = 16;

/** Floats per load and store of the workspace and gradient row kernels: 4 where `dk` and `dv` are multiples of 4. */
export function rowWidth(dk: number, dv: number): 1 | 4 {
  return dk % 4 === 0 && dv % 4 === 0 ? 4 : 1;
}

/** WGSL type of `width` floats, and of the square sum of such a value `x`. */
function widthType(width: 1 | 4): { type: string; square: (x: string) => string; zero: string } {
  return width === 4
    ? { type: "vec4<f32>", square: (x) => `dot(${x}, ${x})`, zero: "vec4<f32>(0.0)" }
    : { type: "f32", square: (x) => `${x} * ${x}`, zero: "0.0" };
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
  return `${rowSumFunction(L)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = (gid.y * nwg.x + gid.x) * ${64 / L}u + li / ${L}u;
  let lane = li % ${L}u;
  let live = row < u.n;`;
}

/** `rowSum(v, li)`: the sum of `v` over the `L` lanes of a row (every invocation must call it). */
function rowSumFunction(L: number): string {
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
}`;
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
 * The whole head-major workspace in one dispatch, one row of `L` lanes per workspace row: the `BH*T`
 * rows of `Q` (normalised q), the `BH*XR` rows of `X` (normalised k at rows `kOff..kOff+T-1` of each
 * head, zeros elsewhere) and the `BH*YR` rows of `Y` (v at rows `PAD..PAD+T-1`, zeros elsewhere), so
 * the workspace needs no clear first. With `width` 1 each row is what {@linkcode normRowsShader} writes
 * for it (the same sums in the same order); carry rows, when there is a carry, are written after it by
 * `normRowsShader`. `width` floats per access ({@linkcode rowWidth}); `L` = {@linkcode rowLanes}`(dk / width)`;
 * dispatch {@linkcode rowGroups}`(rows, dk / width)` groups. Sizes and offsets in the uniform block are in floats.
 */
export function workspaceRowsShader(norm: QkNorm, epsRms: number, L: number, width: 1 | 4 = 1): string {
  const { type: F, square, zero } = widthType(width);
  return `
@group(0) @binding(0) var<storage, read_write> dst: array<${F}>;
@group(0) @binding(1) var<storage, read> q: array<${F}>;
@group(0) @binding(2) var<storage, read> k: array<${F}>;
@group(0) @binding(3) var<storage, read> v: array<${F}>;
struct P { n: u32, T: u32, H: u32, dk: u32, dv: u32, XR: u32, YR: u32, kOff: u32, PAD: u32, BH: u32 }
@group(0) @binding(4) var<uniform> u: P;
${rowEntry(L)}
  // row lengths in ${F} units
  let DK = u.dk / ${width}u;
  let DV = u.dv / ${width}u;
  // kind 0: a row of Q, 1: a k row of X, 2: a v row of Y, 3: a row of zeros
  let qRows = u.BH * u.T;
  let xRows = u.BH * u.XR;
  var kind = 3u;
  var D = DK;
  var dstBase = 0u;
  var bh = 0u;
  var t = 0u;
  if (row < qRows) {
    kind = 0u;
    bh = row / u.T;
    t = row % u.T;
    dstBase = row * DK;
  } else if (row < qRows + xRows) {
    let r = row - qRows;
    bh = r / u.XR;
    let p = r % u.XR;
    dstBase = (qRows + r) * DK;
    if (p >= u.kOff && p - u.kOff < u.T) { kind = 1u; t = p - u.kOff; }
  } else {
    let r = row - qRows - xRows;
    bh = r / u.YR;
    let p = r % u.YR;
    D = DV;
    dstBase = (qRows + xRows) * DK + r * DV;
    if (p >= u.PAD && p - u.PAD < u.T) { kind = 2u; t = p - u.PAD; }
  }
  // the source row (b, t, h) of [B, T, H, D]
  let srcRow = ((bh / u.H) * u.T + t) * u.H + bh % u.H;
  var ss = 0.0;
  if (live && kind < 2u) {
    for (var i = lane; i < DK; i += ${L}u) {
      var x = ${zero};
      if (kind == 0u) { x = q[srcRow * DK + i]; } else { x = k[srcRow * DK + i]; }
      ss += ${square("x")};
    }
  }
  ss = rowSum(vec2<f32>(ss, 0.0), li).x;
  let sc = ${normScale(norm, epsRms, "u.dk", "ss")};
  if (live) {
    for (var i = lane; i < D; i += ${L}u) {
      var value = ${zero};
      if (kind == 0u) {
        value = q[srcRow * DK + i] * sc;
      } else if (kind == 1u) {
        value = k[srcRow * DK + i] * sc;
      } else if (kind == 2u) {
        value = v[srcRow * DV + i];
      }
      dst[dstBase + i] = value;
    }
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
 * Head-major gradients back to `[B, T, H, D]` in one dispatch: `dq`, `dk` through the q/k
 * normalisation backward (`raw*` hold the raw rows `[B, T, H, Dk]`), `dv`, `dbeta` (`bw` values per
 * `(b, t, h)`: 1, or `Dv` for the per-column rules) and `dlambdabar` copied. Row `(b, t, h)` of a
 * gradient comes from `src[base + (bh*R + off + t)*D + i]` (`dq`: base 0, `R = T`, off 0; `dk`: `gDX`,
 * `XR`, `kOff`; `dv`: `gDY`, `YR`, `PAD`; `dbeta`: `gDB`, `T`, 0; `dlambdabar`: `gDLB`, `T`, 0). The
 * first `u.rowGroups` workgroups take the `3n` rows of `dq`, `dk`, `dv` with `L` lanes each
 * (`L` = {@linkcode rowLanes}`(dk / width)`, `width` floats per access: {@linkcode rowWidth}), the rest one element
 * of `dbeta` or `dlambdabar` per invocation. Sizes and offsets in the uniform block are in floats.
 */
export function gradientRowsShader(norm: QkNorm, epsRms: number, L: number, width: 1 | 4 = 1): string {
  const { type: F, square, zero } = widthType(width);
  // one float of src at float index e
  const srcFloat = (e: string) => width === 4 ? `src[(${e}) / 4u][(${e}) % 4u]` : `src[${e}]`;
  const dotOf = (a: string, b: string) => width === 4 ? `dot(${a}, ${b})` : `${a} * ${b}`;
  const c = norm === "rms"
    ? "-sc * sc * sc / f32(u.dk)"
    : norm === "l2"
    ? "select(-sc * sc * sc, 0.0, sqrt(ss) <= 1e-6)"
    : "0.0";
  return `
@group(0) @binding(0) var<storage, read_write> dq: array<${F}>;
@group(0) @binding(1) var<storage, read_write> dk: array<${F}>;
@group(0) @binding(2) var<storage, read_write> dv: array<${F}>;
@group(0) @binding(3) var<storage, read_write> dbeta: array<f32>;
@group(0) @binding(4) var<storage, read_write> dlb: array<f32>;
@group(0) @binding(5) var<storage, read> src: array<${F}>;
@group(0) @binding(6) var<storage, read> rawq: array<${F}>;
@group(0) @binding(7) var<storage, read> rawk: array<${F}>;
struct P {
  n: u32, T: u32, H: u32, dk: u32, dv: u32, bw: u32, XR: u32, YR: u32,
  kOff: u32, PAD: u32, gDX: u32, gDY: u32, gDB: u32, gDLB: u32, rowGroups: u32,
}
@group(0) @binding(8) var<uniform> u: P;
${rowSumFunction(L)}
/** Head-major row index \`bh*R + off + t\` of row \`(b, t, h)\` = \`r\` of \`[B, T, H]\`. */
fn headRow(r: u32, R: u32, off: u32) -> u32 {
  let h = r % u.H;
  let bt = r / u.H;
  return ((bt / u.T) * u.H + h) * R + off + bt % u.T;
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let w = gid.y * nwg.x + gid.x;
  if (w >= u.rowGroups) {
    // dbeta, then dlambdabar: one element each
    let e = (w - u.rowGroups) * 64u + li;
    let nb = u.n * u.bw;
    if (e < nb) {
      dbeta[e] = ${srcFloat("u.gDB + headRow(e / u.bw, u.T, 0u) * u.bw + e % u.bw")};
    } else if (e - nb < u.n) {
      dlb[e - nb] = ${srcFloat("u.gDLB + headRow(e - nb, u.T, 0u)")};
    }
    return;
  }
  // row lengths and the gradient sections' offsets in ${F} units
  let DK = u.dk / ${width}u;
  let DV = u.dv / ${width}u;
  let row = w * ${64 / L}u + li / ${L}u;
  let lane = li % ${L}u;
  // part 0: dq, 1: dk, 2: dv (3: past the end)
  let part = min(row / u.n, 3u);
  let r = row - min(part, 2u) * u.n;
  let live = part < 3u;
  var srcBase = 0u;
  if (part == 0u) {
    srcBase = headRow(r, u.T, 0u) * DK;
  } else if (part == 1u) {
    srcBase = u.gDX / ${width}u + headRow(r, u.XR, u.kOff) * DK;
  } else if (part == 2u) {
    srcBase = u.gDY / ${width}u + headRow(r, u.YR, u.PAD) * DV;
  }
  let dstBase = r * DK;
  var sums = vec2<f32>(0.0, 0.0);
  if (part < 2u) {
    for (var i = lane; i < DK; i += ${L}u) {
      var v = ${zero};
      if (part == 0u) { v = rawq[dstBase + i]; } else { v = rawk[dstBase + i]; }
      sums += vec2<f32>(${square("v")}, ${dotOf("v", "src[srcBase + i]")});
    }
  }
  sums = rowSum(sums, li);
  let ss = sums.x;
  let ug = sums.y;
  let sc = ${normScale(norm, epsRms, "u.dk", "ss")};
  let c = ${c};
  if (part == 0u) {
    for (var i = lane; i < DK; i += ${L}u) {
      dq[dstBase + i] = sc * src[srcBase + i] + c * ug * rawq[dstBase + i];
    }
  } else if (part == 1u) {
    for (var i = lane; i < DK; i += ${L}u) {
      dk[dstBase + i] = sc * src[srcBase + i] + c * ug * rawk[dstBase + i];
    }
  } else if (live) {
    for (var i = lane; i < DV; i += ${L}u) { dv[r * DV + i] = src[srcBase + i]; }
  }
}`;
}
