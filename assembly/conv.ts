/**
 * Causal depthwise short convolution then SiLU: x, out `[B, T, C]`, weight `[C, W]`,
 * `pre[b, t, c] = sum_k weight[c, k] * x[b, t - (W - 1) + k, c]` over taps inside the current sequence
 * (a start flag at position s cuts every tap before s), `out = silu(pre)`. Backward accumulates.
 */

function sigmoid(x: f64): f64 {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

function f(p: usize, i: usize): f64 {
  return <f64> load<f32>(p + (i << 2));
}

/** Forward. `starts` is a u8 `[B, T]` pointer or 0. */
export function shortconv_forward_f32(
  out: usize,
  x: usize,
  w: usize,
  starts: usize,
  B: i32,
  T: i32,
  C: i32,
  W: i32,
): void {
  for (let b = 0; b < B; b++) {
    let s0 = 0;
    for (let t = 0; t < T; t++) {
      if (starts != 0 && load<u8>(starts + <usize> (b * T + t)) != 0) s0 = t;
      const lo = max(s0, t - W + 1);
      for (let c = 0; c < C; c++) {
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

/** Backward: accumulates into dx `[B, T, C]` and dWeight `[C, W]`. */
export function shortconv_backward_f32(
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
): void {
  for (let b = 0; b < B; b++) {
    let s0 = 0;
    for (let t = 0; t < T; t++) {
      if (starts != 0 && load<u8>(starts + <usize> (b * T + t)) != 0) s0 = t;
      const lo = max(s0, t - W + 1);
      for (let c = 0; c < C; c++) {
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
