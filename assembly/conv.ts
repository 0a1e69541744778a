/**
 * Causal depthwise short convolution then SiLU: x, out `[B, T, C]`, weight `[C, W]`,
 * `pre[b, t, c] = sum_k weight[c, k] * x[b, t - (W - 1) + k, c]` over taps inside the current sequence
 * (a start flag at position s cuts every tap before s), `out = silu(pre)`. Backward accumulates.
 *
 * Both passes run over a band of channels `c0 <= c < c1` (the thread pool's unit: channels share
 * nothing, and within a channel every sum runs in the same order whatever the band, so results do not
 * depend on how the channels are split). Channels go two at a time in float64 lanes (the sigmoid of
 * exp_f64x2.ts), each lane computed exactly as the scalar path computes a lone last channel.
 */

import { sigmoid } from "./elementwise";
import { sigmoidF64x2 } from "./exp_f64x2";

function f(p: usize, i: usize): f64 {
  return <f64> load<f32>(p + (i << 2));
}

/** Two float32 values at `p` as float64 lanes. */
// @ts-ignore: decorator

function load2(p: usize): v128 {
  return f64x2.promote_low_f32x4(v128.load64_zero(p));
}

/** Tap `k` of channels `c` and `c + 1` (weight `[C, W]`) as float64 lanes. */
// @ts-ignore: decorator

function taps2(w: usize, c: i32, W: i32, k: i32): v128 {
  const p = w + (<usize> (c * W + k) << 2);
  return f64x2.replace_lane(f64x2.splat(<f64> load<f32>(p)), 1, <f64> load<f32>(p + (<usize> W << 2)));
}

/** `pre` of channels `c`, `c + 1` at row `b * T + t` over the taps from position `lo` (float64 lanes). */
// @ts-ignore: decorator

function pre2(x: usize, w: usize, bt: i32, t: i32, lo: i32, C: i32, W: i32, c: i32): v128 {
  let pre = f64x2.splat(0);
  for (let tt = lo; tt <= t; tt++) {
    const xv = load2(x + (<usize> ((bt - t + tt) * C + c) << 2));
    pre = f64x2.add(pre, f64x2.mul(taps2(w, c, W, tt - t + W - 1), xv));
  }
  return pre;
}

/** Forward over channels `c0 .. c1 - 1`. `starts` is a u8 `[B, T]` pointer or 0. */
export function shortconvForwardChannels(
  out: usize,
  x: usize,
  w: usize,
  starts: usize,
  B: i32,
  T: i32,
  C: i32,
  W: i32,
  c0: i32,
  c1: i32,
): void {
  for (let b = 0; b < B; b++) {
    let s0 = 0;
    for (let t = 0; t < T; t++) {
      if (starts != 0 && load<u8>(starts + <usize> (b * T + t)) != 0) s0 = t;
      const lo = max(s0, t - W + 1);
      const bt = b * T + t;
      let c = c0;
      for (; c + 2 <= c1; c += 2) {
        const pre = pre2(x, w, bt, t, lo, C, W, c);
        const y = f32x4.demote_f64x2_zero(f64x2.mul(pre, sigmoidF64x2(pre)));
        v128.store64_lane(out + (<usize> (bt * C + c) << 2), y, 0);
      }
      for (; c < c1; c++) {
        let pre: f64 = 0;
        for (let tt = lo; tt <= t; tt++) {
          const k = tt - t + W - 1;
          pre += f(w, <usize> (c * W + k)) * f(x, <usize> ((b * T + tt) * C + c));
        }
        store<f32>(out + (<usize> ((b * T + t) * C + c) << 2), <f32> (pre * sigmoid(pre)));
      }
    }
  }
}

/** Backward over channels `c0 .. c1 - 1`: accumulates into dx `[B, T, C]` and dWeight `[C, W]`. */
export function shortconvBackwardChannels(
  dx: usize,
  dw: usize,
  dOut: usize,
  x: usize,
  w: usize,
  starts: usize,
  B: i32,
  T: i32,
  C: i32,
  W: i32,
  c0: i32,
  c1: i32,
): void {
  const one = f64x2.splat(1);
  for (let b = 0; b < B; b++) {
    let s0 = 0;
    for (let t = 0; t < T; t++) {
      if (starts != 0 && load<u8>(starts + <usize> (b * T + t)) != 0) s0 = t;
      const lo = max(s0, t - W + 1);
      const bt = b * T + t;
      let c = c0;
      for (; c + 2 <= c1; c += 2) {
        const pre = pre2(x, w, bt, t, lo, C, W, c);
        const sg = sigmoidF64x2(pre);
        const slope = f64x2.add(one, f64x2.mul(pre, f64x2.sub(one, sg)));
        const g = f64x2.mul(f64x2.mul(load2(dOut + (<usize> (bt * C + c) << 2)), sg), slope);
        for (let tt = lo; tt <= t; tt++) {
          const k = tt - t + W - 1;
          const xi = <usize> ((bt - t + tt) * C + c) << 2;
          const wi = <usize> (c * W + k) << 2;
          const dxv = f32x4.demote_f64x2_zero(f64x2.mul(g, taps2(w, c, W, k)));
          v128.store64_lane(dx + xi, f32x4.add(v128.load64_zero(dx + xi), dxv), 0);
          const dwv = f32x4.demote_f64x2_zero(f64x2.mul(g, load2(x + xi)));
          const wi1 = wi + (<usize> W << 2);
          store<f32>(dw + wi, load<f32>(dw + wi) + f32x4.extract_lane(dwv, 0));
          store<f32>(dw + wi1, load<f32>(dw + wi1) + f32x4.extract_lane(dwv, 1));
        }
      }
      for (; c < c1; c++) {
        let pre: f64 = 0;
        for (let tt = lo; tt <= t; tt++) {
          pre += f(w, <usize> (c * W + tt - t + W - 1)) * f(x, <usize> ((b * T + tt) * C + c));
        }
        const sg = sigmoid(pre);
        const g = f(dOut, <usize> ((b * T + t) * C + c)) * sg * (1 + pre * (1 - sg));
        for (let tt = lo; tt <= t; tt++) {
          const k = tt - t + W - 1;
          const xi = <usize> ((b * T + tt) * C + c) << 2;
          const wi = <usize> (c * W + k) << 2;
          store<f32>(dx + xi, load<f32>(dx + xi) + <f32> (g * <f64> load<f32>(w + wi)));
          store<f32>(dw + wi, load<f32>(dw + wi) + <f32> (g * <f64> load<f32>(x + xi)));
        }
      }
    }
  }
}
