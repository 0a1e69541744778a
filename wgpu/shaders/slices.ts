/**
 * WGSL of the second pass of a two-pass reduction over rows: kernels whose outputs sum over many
 * rows (the weight gradients of RMSNorm and of the short convolution, the split-K GEMM) write one
 * partial sum per slice of rows, `partial[S, n]`, from `S` times as many workgroups as outputs alone
 * would give; this pass adds the slices in order, so results do not depend on scheduling:
 *
 *     out[i] (+)= sum_{s = 0..S-1} partial[s * n + i]        for i < n
 *
 * @module
 */

import { FLAT_PARAMS, flatIndex } from "../runtime.ts";

/** Rows per slice of the row reductions (RMSNorm and short-convolution weight gradients). */
export const ROWS_PER_SLICE = 64;

/** Workgroup width of the slice sum. */
export const SLICE_SUM_WG = 256;

/** `out[i] (+)= sum_s partial[s * n + i]`; bindings: out, partial, uniform `{n, S, accumulate}`. */
export function sliceSumShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
struct P { n: u32, S: u32, accumulate: u32 }
@group(0) @binding(2) var<uniform> u: P;
@compute @workgroup_size(${SLICE_SUM_WG})
fn main(${FLAT_PARAMS}) {
  ${flatIndex(SLICE_SUM_WG)}
  if (idx >= u.n) { return; }
  var s = 0.0;
  for (var k = 0u; k < u.S; k++) { s += partial[k * u.n + idx]; }
  if (u.accumulate != 0u) { out_[idx] = out_[idx] + s; } else { out_[idx] = s; }
}`;
}

/**
 * {@linkcode sliceSumShader} for several sums in one dispatch (`wgpu/deferred_sums.ts`): workgroup `w`
 * reads `table[2w] = (outOffset, partialOffset, n, S)` and `table[2w + 1] = (accumulate, base, 0, 0)`
 * and does what workgroup `base / 256` of a slice sum over `out` at `outOffset` and `partial` at
 * `partialOffset` does (the same additions in the same order). Dispatched as a `grid()` of at least
 * `u.workgroups` workgroups.
 */
export function multiSliceSumShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<vec4<u32>>;
struct P { workgroups: u32 }
@group(0) @binding(3) var<uniform> u: P;
@compute @workgroup_size(${SLICE_SUM_WG})
fn main(${FLAT_PARAMS}) {
  let w = gid.y * nwg.x + gid.x;
  if (w >= u.workgroups) { return; }
  let e = table[2u * w];
  let f = table[2u * w + 1u];
  let idx = f.y + lid.x;
  if (idx >= e.z) { return; }
  var s = 0.0;
  for (var k = 0u; k < e.w; k++) { s += partial[e.y + k * e.z + idx]; }
  let o = e.x + idx;
  if (f.x != 0u) { out_[o] = out_[o] + s; } else { out_[o] = s; }
}`;
}
