/**
 * WGSL of the embedding lookup and the causal depthwise short convolution (with SiLU).
 *
 * Shapes: embedding `table [V, D]`, `out [N, D]`; short convolution `x, out [B, T, C]`,
 * `weight [C, W]` with tap `w` reading position `t - (W-1) + w` (so `weight[c, W-1]` multiplies
 * the current position). `seg[b*T + t]` is the latest sequence start `<= t` (host computed): taps
 * before it read zero.
 *
 * @module
 */

import { accumulateInto, ACTIVATION_HELPERS, elementwiseShader } from "./elementwise.ts";

/** `out[n, d] = table[ids[n], d]` (one invocation per element). */
export function embeddingForwardShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> table: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<i32>;
struct P { n: u32, D: u32 }
@group(0) @binding(3) var<uniform> u: P;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (gid.y * nwg.x + gid.x) * 256u + lid.x;
  if (idx >= u.n) { return; }
  let r = idx / u.D;
  out_[idx] = table[u32(ids[r]) * u.D + idx % u.D];
}`;
}

/**
 * `dTable[row, d] += sum over n with ids[n] = row of dOut[n, d]`, race-free: the host groups the
 * positions by table row (`rows[g]`, positions `list[offsets[g] .. offsets[g+1])`).
 */
export function embeddingBackwardShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> dtable: array<f32>;
@group(0) @binding(1) var<storage, read> dout: array<f32>;
@group(0) @binding(2) var<storage, read> groups: array<i32>; // rows[G], offsets[G+1], list[N]
struct P { n: u32, D: u32, G: u32 }
@group(0) @binding(3) var<uniform> u: P;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (gid.y * nwg.x + gid.x) * 256u + lid.x;
  if (idx >= u.n) { return; }
  let g = idx / u.D;
  let d = idx % u.D;
  let row = u32(groups[g]);
  let a = u32(groups[u.G + g]);
  let b = u32(groups[u.G + g + 1u]);
  var s = 0.0;
  for (var k = a; k < b; k++) { s += dout[u32(groups[2u * u.G + 1u + k]) * u.D + d]; }
  dtable[row * u.D + d] += s;
}`;
}

const CONV_BINDINGS = `
struct P { n: u32, T: u32, C: u32, W: u32 }
fn pre_act(bt: u32, t: u32, c: u32) -> f32 {
  // bt = b * T; the sum of taps inside the current sequence
  var s = 0.0;
  let lo = seg[bt + t];
  for (var w = 0u; w < u.W; w++) {
    let tt = i32(t) - i32(u.W - 1u) + i32(w);
    if (tt >= lo) { s += weight[c * u.W + w] * x[(bt + u32(tt)) * u.C + c]; }
  }
  return s;
}`;

/** Forward: `out[b,t,c] = silu(sum_w weight[c,w] x[b, t-(W-1)+w, c])` inside the sequence. */
export function shortConvForwardShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> seg: array<i32>;
@group(0) @binding(4) var<uniform> u: P;
${CONV_BINDINGS}
${ACTIVATION_HELPERS}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (gid.y * nwg.x + gid.x) * 256u + lid.x;
  if (idx >= u.n) { return; }
  let c = idx % u.C;
  let bt_t = idx / u.C;
  let t = bt_t % u.T;
  out_[idx] = silu_f(pre_act(bt_t - t, t, c));
}`;
}

/** Backward step 1: `dpre[b,t,c] = dOut * silu'(pre)` into a scratch tensor. */
export function shortConvPreGradShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> dpre: array<f32>;
@group(0) @binding(1) var<storage, read> dout: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read> seg: array<i32>;
@group(0) @binding(5) var<uniform> u: P;
${CONV_BINDINGS}
${ACTIVATION_HELPERS}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (gid.y * nwg.x + gid.x) * 256u + lid.x;
  if (idx >= u.n) { return; }
  let c = idx % u.C;
  let bt_t = idx / u.C;
  let t = bt_t % u.T;
  dpre[idx] = dout[idx] * dsilu_f(pre_act(bt_t - t, t, c));
}`;
}

/**
 * Backward step 2: `dx[b,t',c] += sum_w dpre[b, t'+(W-1)-w, c] weight[c,w]` over taps inside the sequence
 * (uniform flag `fresh`: {@linkcode accumulateInto}).
 */
export function shortConvInputGradShader(): string {
  return elementwiseShader(
    [{ name: "dx", access: "read_write" }, { name: "dpre", access: "read" }, {
      name: "weight",
      access: "read",
    }],
    ["T: u32", "C: u32", "W: u32", "fresh: u32"],
    `let c = idx % u.C;
  let bt_t = idx / u.C;
  let t0 = bt_t % u.T;
  let bt = bt_t - t0;
  var s = 0.0;
  for (var w = 0u; w < u.W; w++) {
    let t = t0 + u.W - 1u - w;
    if (t < u.T && seg[bt + t] <= i32(t0)) { s += dpre[(bt + t) * u.C + c] * weight[c * u.W + w]; }
  }
  ${accumulateInto("dx", "idx", "s", "u.fresh")}`,
    "@group(0) @binding(4) var<storage, read> seg: array<i32>;",
  );
}

/**
 * Short-convolution weight gradient, first pass: `partial[s, c*W + w] = sum over rows r = b*T + t of
 * slice s of dPre[r, c] x[r - (W-1) + w, c]` (taps before the sequence start read zero; slices of
 * `R` rows, workgroups over `(output block, slice)`); the slice sum (`slices.ts`) adds them into `dW`.
 */
export function shortConvWeightGradShader(): string {
  return `
@group(0) @binding(0) var<storage, read_write> partial: array<f32>;
@group(0) @binding(1) var<storage, read> dpre: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
struct P { n: u32, T: u32, C: u32, W: u32, BT: u32, R: u32 }
@group(0) @binding(3) var<uniform> u: P;
@group(0) @binding(4) var<storage, read> seg: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = wid.x * 64u + lid.x;
  if (idx >= u.n) { return; }
  let c = idx / u.W;
  let w = idx % u.W;
  let r0 = wid.y * u.R;
  let r1 = min(u.BT, r0 + u.R);
  var s = 0.0;
  for (var r = r0; r < r1; r++) {
    let t = r % u.T;
    let tt = i32(t) - i32(u.W - 1u) + i32(w);
    if (tt >= seg[r]) { s += dpre[r * u.C + c] * x[(r - t + u32(tt)) * u.C + c]; }
  }
  partial[wid.y * u.n + idx] = s;
}`;
}
