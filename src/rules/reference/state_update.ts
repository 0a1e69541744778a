/**
 * The state update shared by every rule and the readout, forward and backward (SPEC sections 3
 * and 6). With `S` the pre-update state `[Dk, Dv]` (column `s_j`), per-column coefficients
 * `gamma, a, b` (see `coefficients.ts`) and the step's write pairs `(x_p, y_p)` (`[Dk]`, `[Dv]`):
 *
 *     s'_j = gamma_j s_j + sum_p x_p (b_j y_{p,j} - a_j z_{p,j}),   z_p = S^T x_p
 *
 * Every window residual uses the same pre-update state. The readout is `o = S'^T q`.
 *
 * @module
 */

import type { StepCoefficients } from "./coefficients.ts";

/** Gradients of one state update. */
export interface StateUpdateGrads {
  /** With respect to the pre-update state `[Dk, Dv]`. */
  dPrev: Float64Array;
  /** With respect to `gamma` `[Dv]`. */
  dgamma: Float64Array;
  /** With respect to `a` `[Dv]`. */
  da: Float64Array;
  /** With respect to `b` `[Dv]`. */
  db: Float64Array;
  /** With respect to each write feature `x_p` `[Dk]`. */
  dxs: Float64Array[];
  /** With respect to each target `y_p` `[Dv]`. */
  dys: Float64Array[];
}

/** `S^T x`: `[Dv]`. */
export function predict(s: Float64Array, x: Float64Array, dk: number, dv: number): Float64Array {
  const z = new Float64Array(dv);
  for (let i = 0; i < dk; i++) {
    const xi = x[i];
    for (let j = 0; j < dv; j++) z[j] += xi * s[i * dv + j];
  }
  return z;
}

/** The post-update state (a new `[Dk, Dv]` array). */
export function stateUpdate(
  s: Float64Array,
  dk: number,
  dv: number,
  c: StepCoefficients,
  xs: readonly Float64Array[],
  ys: readonly Float64Array[],
): Float64Array {
  const next = new Float64Array(dk * dv);
  for (let i = 0; i < dk; i++) {
    for (let j = 0; j < dv; j++) next[i * dv + j] = c.gamma[j] * s[i * dv + j];
  }
  for (let p = 0; p < xs.length; p++) {
    const x = xs[p];
    const z = predict(s, x, dk, dv);
    const w = new Float64Array(dv); // b_j y_j - a_j z_j
    for (let j = 0; j < dv; j++) w[j] = c.b[j] * ys[p][j] - c.a[j] * z[j];
    for (let i = 0; i < dk; i++) {
      for (let j = 0; j < dv; j++) next[i * dv + j] += x[i] * w[j];
    }
  }
  return next;
}

/** Backward of {@linkcode stateUpdate} given `dNext`, the gradient of the post-update state. */
export function stateUpdateBackward(
  s: Float64Array,
  dk: number,
  dv: number,
  c: StepCoefficients,
  xs: readonly Float64Array[],
  ys: readonly Float64Array[],
  dNext: Float64Array,
): StateUpdateGrads {
  const g: StateUpdateGrads = {
    dPrev: new Float64Array(dk * dv),
    dgamma: new Float64Array(dv),
    da: new Float64Array(dv),
    db: new Float64Array(dv),
    dxs: [],
    dys: [],
  };
  for (let i = 0; i < dk; i++) {
    for (let j = 0; j < dv; j++) {
      g.dPrev[i * dv + j] = c.gamma[j] * dNext[i * dv + j];
      g.dgamma[j] += dNext[i * dv + j] * s[i * dv + j];
    }
  }
  for (let p = 0; p < xs.length; p++) {
    const x = xs[p];
    const y = ys[p];
    const z = predict(s, x, dk, dv); // S^T x
    const h = predict(dNext, x, dk, dv); // dNext^T x
    const dx = new Float64Array(dk);
    const dy = new Float64Array(dv);
    for (let j = 0; j < dv; j++) {
      g.da[j] -= h[j] * z[j];
      g.db[j] += h[j] * y[j];
      dy[j] = c.b[j] * h[j];
    }
    for (let i = 0; i < dk; i++) {
      let acc = 0;
      for (let j = 0; j < dv; j++) {
        const gij = dNext[i * dv + j];
        acc += gij * (c.b[j] * y[j] - c.a[j] * z[j]) - c.a[j] * h[j] * s[i * dv + j];
        g.dPrev[i * dv + j] -= c.a[j] * x[i] * h[j];
      }
      dx[i] = acc;
    }
    g.dxs.push(dx);
    g.dys.push(dy);
  }
  return g;
}

/** Readout `o = S^T q` (`[Dv]`). */
export function readout(s: Float64Array, q: Float64Array, dk: number, dv: number): Float64Array {
  return predict(s, q, dk, dv);
}

/**
 * Backward of {@linkcode readout}: adds `q dO^T` into `dS` and returns `dq = S dO` (`[Dk]`).
 */
export function readoutBackward(
  s: Float64Array,
  q: Float64Array,
  dO: Float64Array,
  dS: Float64Array,
  dk: number,
  dv: number,
): Float64Array {
  const dq = new Float64Array(dk);
  for (let i = 0; i < dk; i++) {
    let acc = 0;
    for (let j = 0; j < dv; j++) {
      dS[i * dv + j] += q[i] * dO[j];
      acc += s[i * dv + j] * dO[j];
    }
    dq[i] = acc;
  }
  return dq;
}
