/**
 * Causal depthwise short convolution then SiLU: x, out `[B, T, C]`, weight `[C, W]`,
 * `pre[b, t, c] = sum_k weight[c, k] * x[b, t - (W - 1) + k, c]` over taps inside the current sequence
 * (a start flag at position s cuts every tap before s), `out = silu(pre)`. Backward accumulates.
 *
 * Both passes run over a band of channels `c0 <= c < c1` (the thread pool's unit: channels share
 * nothing, and within a channel every sum runs in the same order whatever the band, so results do not
 * depend on how the channels are split). Channels go two at a time in float64 lanes (the sigmoid of
 * exp_f64x2.ts), each lane computed exactly as the scalar path computes a lone last channel. The pairs
 * read the weights from a tap-major float64 copy `[W, C]` in the thread's scratch and the backward
 * accumulates dWeight in a tap-major float32 copy there, written back at the end: the same float32
 * additions in the same order, so the same bits ({@link shortconvScratchBytes} bytes per thread).
 */

import { sigmoid } from "./elementwise";
import { sigmoidF64x2 } from "./exp_f64x2";
import { accumulate2, load2 } from "./simd";

function f(p: usize, i: usize): f64 {
  return <f64> load<f32>(p + (i << 2));
}

/** Scratch bytes one thread needs: the tap-major weights (float64) and dWeight (float32), `[W, C]` each. */
export function shortconvScratchBytes(C: i32, W: i32): i32 {
  return C * W * 12 + 64;
}

/** The tap-major float64 weights `[W, C]` in the scratch. */
function tapsAt(scratch: usize): usize {
  return (scratch + 63) & ~(<usize> 63);
}

/** The tap-major float32 dWeight `[W, C]` in the scratch, after the weights. */
function dTapsAt(scratch: usize, C: i32, W: i32): usize {
  return tapsAt(scratch) + (<usize> (C * W) << 3);
}

/** Copy the weights of channels `c0 .. c1 - 1` into the tap-major float64 layout at `taps`. */
function copyTaps(taps: usize, w: usize, C: i32, W: i32, c0: i32, c1: i32): void {
  for (let k = 0; k < W; k++) {
    for (let c = c0; c < c1; c++) {
      store<f64>(taps + (<usize> (k * C + c) << 3), f(w, <usize> (c * W + k)));
    }
  }
}

/** `pre` of channels `c`, `c + 1` at row `bt` (position `t`) over the taps from position `lo`. */
function pre2(x: usize, taps: usize, bt: i32, t: i32, lo: i32, C: i32, W: i32, c: i32): v128 {
  let pre = f64x2.splat(0);
  for (let tt = lo; tt <= t; tt++) {
    const k = tt - t + W - 1;
    const xv = load2(x + (<usize> ((bt - t + tt) * C + c) << 2));
    pre = f64x2.add(pre, f64x2.mul(v128.load(taps + (<usize> (k * C + c) << 3)), xv));
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
  scratch: usize,
): void {
  const pairsEnd = c0 + ((c1 - c0) & ~1);
  const taps = tapsAt(scratch);
  copyTaps(taps, w, C, W, c0, pairsEnd);
  for (let b = 0; b < B; b++) {
    let s0 = 0;
    for (let t = 0; t < T; t++) {
      if (starts != 0 && load<u8>(starts + <usize> (b * T + t)) != 0) s0 = t;
      const lo = max(s0, t - W + 1);
      const bt = b * T + t;
      for (let c = c0; c < pairsEnd; c += 2) {
        const pre = pre2(x, taps, bt, t, lo, C, W, c);
        const y = f32x4.demote_f64x2_zero(f64x2.mul(pre, sigmoidF64x2(pre)));
        v128.store64_lane(out + (<usize> (bt * C + c) << 2), y, 0);
      }
      for (let c = pairsEnd; c < c1; c++) {
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
  scratch: usize,
): void {
  const pairsEnd = c0 + ((c1 - c0) & ~1);
  const taps = tapsAt(scratch);
  const dTaps = dTapsAt(scratch, C, W);
  copyTaps(taps, w, C, W, c0, pairsEnd);
  for (let k = 0; k < W; k++) {
    for (let c = c0; c < pairsEnd; c++) {
      store<f32>(dTaps + (<usize> (k * C + c) << 2), load<f32>(dw + (<usize> (c * W + k) << 2)));
    }
  }
  const one = f64x2.splat(1);
  for (let b = 0; b < B; b++) {
    let s0 = 0;
    for (let t = 0; t < T; t++) {
      if (starts != 0 && load<u8>(starts + <usize> (b * T + t)) != 0) s0 = t;
      const lo = max(s0, t - W + 1);
      const bt = b * T + t;
      for (let c = c0; c < pairsEnd; c += 2) {
        const pre = pre2(x, taps, bt, t, lo, C, W, c);
        const sg = sigmoidF64x2(pre);
        const slope = f64x2.add(one, f64x2.mul(pre, f64x2.sub(one, sg)));
        const g = f64x2.mul(f64x2.mul(load2(dOut + (<usize> (bt * C + c) << 2)), sg), slope);
        for (let tt = lo; tt <= t; tt++) {
          const k = tt - t + W - 1;
          const xi = <usize> ((bt - t + tt) * C + c) << 2;
          const ki = <usize> (k * C + c);
          accumulate2(dx + xi, f64x2.mul(g, v128.load(taps + (ki << 3))));
          accumulate2(dTaps + (ki << 2), f64x2.mul(g, load2(x + xi)));
        }
      }
      for (let c = pairsEnd; c < c1; c++) {
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
  for (let k = 0; k < W; k++) {
    for (let c = c0; c < pairsEnd; c++) {
      store<f32>(dw + (<usize> (c * W + k) << 2), load<f32>(dTaps + (<usize> (k * C + c) << 2)));
    }
  }
}
