/**
 * WGSL of the row-wise dense kernels: RMSNorm, softmax cross-entropy and the sum of squares.
 * One 64-wide workgroup per row `[N, D]` (rows beyond 65535 spread over a 2-D grid), reducing
 * through workgroup memory. Sizes come from the uniform block `u`.
 *
 * @module
 */

import { accumulateInto } from "./elementwise.ts";

/** Invocations per row. */
export const ROW_WG = 64;

const ROW_PRELUDE = `
var<workgroup> red: array<f32, ${ROW_WG}>;
fn wg_sum(v: f32, li: u32) -> f32 {
  red[li] = v;
  workgroupBarrier();
  for (var s = ${ROW_WG / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) { red[li] = red[li] + red[li + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn wg_max(v: f32, li: u32) -> f32 {
  red[li] = v;
  workgroupBarrier();
  for (var s = ${ROW_WG / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) { red[li] = max(red[li], red[li + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}`;

const ROW_MAIN = `@compute @workgroup_size(${ROW_WG})
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = gid.y * nwg.x + gid.x;
  if (row >= u.N) { return; }`;

/**
 * The end of an RMSNorm row, after the row's sum of squares `ss`: `rstd` and `out_ = input * rstd *
 * (weight or 1)`, `input` the array the row was read from.
 */
function rmsNormRowTail(input: string): string {
  return `  let total = wg_sum(ss, li);
  let r = 1.0 / sqrt(total / f32(u.D) + u.eps);
  if (li == 0u) { rstd[row] = r; }
  for (var i = li; i < u.D; i += ${ROW_WG}u) {
    var wi = 1.0;
    if (u.hasWeight != 0u) { wi = w[i]; }
    out_[base + i] = ${input}[base + i] * r * wi;
  }
}`;
}

/** RMSNorm forward: `rstd = 1/sqrt(mean(x^2) + eps)`, `out = x * rstd * (weight or 1)`. */
export function rmsNormForwardShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
struct P { N: u32, D: u32, hasWeight: u32, eps: f32 }
@group(0) @binding(4) var<uniform> u: P;
${ROW_PRELUDE}
${ROW_MAIN}
  let base = row * u.D;
  var ss = 0.0;
  for (var i = li; i < u.D; i += ${ROW_WG}u) { let v = x[base + i]; ss += v * v; }
${rmsNormRowTail("x")}`;
}

/**
 * Residual add and RMSNorm in one pass: `sum = a + b`, then {@linkcode rmsNormForwardShader} of `sum`
 * (the same additions and the same row sums as `add` followed by `rmsNormForward`).
 */
export function addRmsNormForwardShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> sum: array<f32>;
@group(0) @binding(1) var<storage, read_write> out_: array<f32>;
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(3) var<storage, read> a: array<f32>;
@group(0) @binding(4) var<storage, read> b: array<f32>;
@group(0) @binding(5) var<storage, read> w: array<f32>;
struct P { N: u32, D: u32, hasWeight: u32, eps: f32 }
@group(0) @binding(6) var<uniform> u: P;
${ROW_PRELUDE}
${ROW_MAIN}
  let base = row * u.D;
  var ss = 0.0;
  for (var i = li; i < u.D; i += ${ROW_WG}u) {
    let v = a[base + i] + b[base + i];
    sum[base + i] = v;
    ss += v * v;
  }
${rmsNormRowTail("sum")}`;
}

/** RMSNorm backward for `dx`: `dx += r g w - x r^3 (sum g w x) / D` (uniform flag `fresh`: `accumulateInto`). */
export function rmsNormBackwardShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> dx: array<f32>;
@group(0) @binding(1) var<storage, read> dout: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> rstd: array<f32>;
struct P { N: u32, D: u32, hasWeight: u32, fresh: u32 }
@group(0) @binding(5) var<uniform> u: P;
${ROW_PRELUDE}
fn wgt(i: u32) -> f32 { if (u.hasWeight != 0u) { return w[i]; } return 1.0; }
${ROW_MAIN}
  let base = row * u.D;
  let r = rstd[row];
  var dot = 0.0;
  for (var i = li; i < u.D; i += ${ROW_WG}u) { dot += dout[base + i] * wgt(i) * x[base + i]; }
  let total = wg_sum(dot, li);
  let c = r * r * r * total / f32(u.D);
  for (var i = li; i < u.D; i += ${ROW_WG}u) {
    ${accumulateInto("dx", "base + i", "(r * dout[base + i] * wgt(i) - x[base + i] * c)", "u.fresh")}
  }
}`;
}

/**
 * RMSNorm backward for the weight, first pass: `partial[s, i] = sum over rows n of slice s of
 * dOut[n,i] x[n,i] rstd[n]` (slices of `R` rows, workgroups over `(column block, slice)`); the slice
 * sum (`slices.ts`) adds the slices into `dW`.
 */
export function rmsNormWeightGradShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> partial: array<f32>;
@group(0) @binding(1) var<storage, read> dout: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> rstd: array<f32>;
struct P { D: u32, N: u32, R: u32 }
@group(0) @binding(4) var<uniform> u: P;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = wid.x * 64u + lid.x;
  if (i >= u.D) { return; }
  let r0 = wid.y * u.R;
  let r1 = min(u.N, r0 + u.R);
  var s = 0.0;
  for (var r = r0; r < r1; r++) { s += dout[r * u.D + i] * x[r * u.D + i] * rstd[r]; }
  partial[wid.y * u.D + i] = s;
}`;
}

/**
 * Cross-entropy forward (`losses[n] = w_n (lse_n - logit[n, target_n])`, 0 where `w_n = 0`), backward
 * (`dLogits[n, v] += w_n (softmax_v - [v = target_n])`; uniform flag `fresh`: `accumulateInto`, and
 * rows with `w_n = 0` are then written with zeros), or both from one log-sum-exp per row (`both`:
 * the losses at binding 5).
 */
export function crossEntropyShader(pass: "forward" | "backward" | "both"): string {
  const forward = `if (li == 0u) { ${
    pass === "both" ? "lossOut" : "losses"
  }[row] = wt * (lse - logits[base + u32(targets[row])]); }`;
  const backward = `for (var i = li; i < u.V; i += ${ROW_WG}u) {
    var g = exp(logits[base + i] - lse);
    if (i == u32(targets[row])) { g -= 1.0; }
    ${accumulateInto("losses", "base + i", "(wt * g)", "u.fresh")}
  }`;
  const tail = pass === "forward" ? forward : pass === "backward" ? backward : `${forward}\n  ${backward}`;
  const zeroForward = `if (li == 0u) { ${pass === "both" ? "lossOut" : "losses"}[row] = 0.0; }`;
  const zeroBackward =
    `if (u.fresh != 0u) { for (var i = li; i < u.V; i += ${ROW_WG}u) { losses[row * u.V + i] = 0.0; } }`;
  const zero = pass === "forward"
    ? zeroForward
    : pass === "backward"
    ? zeroBackward
    : `${zeroForward}\n    ${zeroBackward}`;
  return `
// losses: [N] (forward) or dLogits [N, V] (backward, both); lossOut: [N] (both)
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
struct P { N: u32, V: u32, fresh: u32 }
@group(0) @binding(4) var<uniform> u: P;
${pass === "both" ? "@group(0) @binding(5) var<storage, read_write> lossOut: array<f32>;" : ""}
${ROW_PRELUDE}
${ROW_MAIN}
  let wt = weights[row];
  if (wt == 0.0) {
    ${zero}
    return;
  }
  let base = row * u.V;
  var mx = -3.4e38;
  for (var i = li; i < u.V; i += ${ROW_WG}u) { mx = max(mx, logits[base + i]); }
  let m = wg_max(mx, li);
  var se = 0.0;
  for (var i = li; i < u.V; i += ${ROW_WG}u) { se += exp(logits[base + i] - m); }
  let lse = m + log(wg_sum(se, li));
  ${tail}
}`;
}

/** Partial sums of squares (or of the values): workgroup `g` reduces a grid-stride range into `partial[base + g]`. */
export function sumSquaresShader(squares = true): string {
  return `
@group(0) @binding(0) var<storage, read_write> partial: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
struct P { n: u32, groups: u32, base: u32 }
@group(0) @binding(2) var<uniform> u: P;
var<workgroup> red: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  var s = 0.0;
  for (var i = gid.x * 256u + li; i < u.n; i += u.groups * 256u) { let v = x[i]; s += ${
    squares ? "v * v" : "v"
  }; }
  red[li] = s;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { red[li] = red[li] + red[li + k]; }
    workgroupBarrier();
  }
  if (li == 0u) { partial[u.base + gid.x] = red[0]; }
}`;
}

/**
 * {@linkcode sumSquaresShader} for several tensors of one block in one dispatch: workgroup `w` reads
 * `table[w] = (offset, n, groups, g)` and computes the partial sum that workgroup `g` of a dispatch over
 * the tensor of `n` elements at element `offset` with `groups` workgroups computes, into `partial[w]`
 * (the same elements in the same order, so the same value). Dispatched as a `grid()` of at
 * least `u.workgroups` workgroups.
 */
export function blockSumSquaresShader(squares = true): string {
  return `
@group(0) @binding(0) var<storage, read_write> partial: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<vec4<u32>>;
struct P { workgroups: u32 }
@group(0) @binding(3) var<uniform> u: P;
var<workgroup> red: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let w = gid.y * nwg.x + gid.x;
  if (w >= u.workgroups) { return; }
  let e = table[w];
  var s = 0.0;
  for (var i = e.w * 256u + li; i < e.y; i += e.z * 256u) { let v = x[e.x + i]; s += ${
    squares ? "v * v" : "v"
  }; }
  red[li] = s;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { red[li] = red[li] + red[li + k]; }
    workgroupBarrier();
  }
  if (li == 0u) { partial[w] = red[0]; }
}`;
}

/**
 * The second stage of a device-side sum (`accumulateSum`): one workgroup adds the `G` partial sums
 * in a fixed tree order and `out[index] += total`.
 */
export function finishSumShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
struct P { groups: u32, index: u32 }
@group(0) @binding(2) var<uniform> u: P;
var<workgroup> red: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  var s = 0.0;
  for (var i = li; i < u.groups; i += 256u) { s += partial[i]; }
  red[li] = s;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { red[li] = red[li] + red[li + k]; }
    workgroupBarrier();
  }
  if (li == 0u) { out_[u.index] = out_[u.index] + red[0]; }
}`;
}
