/**
 * Row-wise RMSNorm over the last dimension `D` of `N` rows: `out = x * rstd * weight` with
 * `rstd = 1 / sqrt(mean(x^2) + eps)`; backward accumulates into dx and dWeight. `weight == 0` means none.
 * The thread pool runs the forward and the dx pass over bands of rows and the dWeight pass over bands
 * of columns; each sum runs in the same order whatever the bands. The sums over a row stay scalar (in
 * order); the element-wise loops go two float64 lanes at a time, each lane the scalar tail's arithmetic.
 */

import { accumulate2, load2, store2 } from "./simd";

/** Weight lanes `i, i + 1` (both 1 when there is no weight). */
function weight2(w: usize, i: i32): v128 {
  return w != 0 ? load2(w + (<usize> i << 2)) : f64x2.splat(1);
}

/** Forward over `N` rows; stores rstd `[N]`. */
export function rmsnormForwardRows(
  out: usize,
  rstd: usize,
  x: usize,
  w: usize,
  N: i32,
  D: i32,
  eps: f64,
): void {
  for (let n = 0; n < N; n++) {
    const xr = x + ((<usize> n * <usize> D) << 2);
    const orow = out + ((<usize> n * <usize> D) << 2);
    let ss: f64 = 0;
    for (let i = 0; i < D; i++) {
      const v = <f64> load<f32>(xr + (<usize> i << 2));
      ss += v * v;
    }
    const r = 1 / Math.sqrt(ss / <f64> D + eps);
    store<f32>(rstd + (<usize> n << 2), <f32> r);
    const rv = f64x2.splat(r);
    let i = 0;
    for (; i + 2 <= D; i += 2) {
      const o = <usize> i << 2;
      store2(orow + o, f64x2.mul(f64x2.mul(load2(xr + o), rv), weight2(w, i)));
    }
    for (; i < D; i++) {
      const wi: f64 = w != 0 ? <f64> load<f32>(w + (<usize> i << 2)) : 1;
      store<f32>(orow + (<usize> i << 2), <f32> (<f64> load<f32>(xr + (<usize> i << 2)) * r * wi));
    }
  }
}

/**
 * Backward into dx over rows `n0 .. n1 - 1`: `dx += rstd (g - xhat mean(g xhat))` with `g = dOut * weight`.
 */
export function rmsnormBackwardRows(
  dx: usize,
  dOut: usize,
  x: usize,
  w: usize,
  rstd: usize,
  n0: i32,
  n1: i32,
  D: i32,
): void {
  for (let n = n0; n < n1; n++) {
    const off = (<usize> n * <usize> D) << 2;
    const r = <f64> load<f32>(rstd + (<usize> n << 2));
    let dot: f64 = 0;
    for (let i = 0; i < D; i++) {
      const io = off + (<usize> i << 2);
      const xh = <f64> load<f32>(x + io) * r;
      const d = <f64> load<f32>(dOut + io);
      const wi: f64 = w != 0 ? <f64> load<f32>(w + (<usize> i << 2)) : 1;
      dot += d * wi * xh;
    }
    const mean = dot / <f64> D;
    const rv = f64x2.splat(r);
    const meanv = f64x2.splat(mean);
    let i = 0;
    for (; i + 2 <= D; i += 2) {
      const io = off + (<usize> i << 2);
      const xh = f64x2.mul(load2(x + io), rv);
      const g = f64x2.mul(load2(dOut + io), weight2(w, i));
      accumulate2(dx + io, f64x2.mul(rv, f64x2.sub(g, f64x2.mul(xh, meanv))));
    }
    for (; i < D; i++) {
      const io = off + (<usize> i << 2);
      const xh = <f64> load<f32>(x + io) * r;
      const wi: f64 = w != 0 ? <f64> load<f32>(w + (<usize> i << 2)) : 1;
      const g = <f64> load<f32>(dOut + io) * wi;
      store<f32>(dx + io, load<f32>(dx + io) + <f32> (r * (g - xh * mean)));
    }
  }
}

/**
 * Backward into dWeight over columns `i0 .. i1 - 1`: `dWeight[i] += dOut[n, i] xhat[n, i]`, row by row
 * in order (so a column's sum does not depend on how the columns are split).
 */
export function rmsnormBackwardWeightColumns(
  dw: usize,
  dOut: usize,
  x: usize,
  rstd: usize,
  N: i32,
  D: i32,
  i0: i32,
  i1: i32,
): void {
  for (let n = 0; n < N; n++) {
    const off = (<usize> n * <usize> D) << 2;
    const r = <f64> load<f32>(rstd + (<usize> n << 2));
    const rv = f64x2.splat(r);
    let i = i0;
    for (; i + 2 <= i1; i += 2) {
      const io = off + (<usize> i << 2);
      accumulate2(dw + (<usize> i << 2), f64x2.mul(load2(dOut + io), f64x2.mul(load2(x + io), rv)));
    }
    for (; i < i1; i++) {
      const io = off + (<usize> i << 2);
      const xh = <f64> load<f32>(x + io) * r;
      const d = <f64> load<f32>(dOut + io);
      store<f32>(dw + (<usize> i << 2), load<f32>(dw + (<usize> i << 2)) + <f32> (d * xh));
    }
  }
}
