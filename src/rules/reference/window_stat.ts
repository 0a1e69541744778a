/**
 * The write statistic `E*_t` of the Falcon rules (SPEC section 3), forward and backward, over the
 * write features `x_j` of the step's window `I_t` (one feature for the non-window rules):
 *
 * - `energy`: `(1/B_t) sum_j ||x_j||^2` (`E_t` for rules 1/2/1A/2A, `Ebar_t` for Falcon-3A);
 * - `spectral`: `mu_t = lambda_max(X^T X) / B_t` for Falcon-3, from the `B_t x B_t` Gram matrix,
 *   with gradient `d mu / d X = 2 X u u^T / B_t` (`u` the top eigenvector).
 *
 * @module
 */

import type { RuleName } from "../config.ts";
import { topEigenpair } from "./top_eigen.ts";

/** Which statistic a rule uses. */
export type WindowStatKind = "energy" | "spectral";

/** The statistic of one step. */
export interface WindowStat {
  /** `E*_t`. */
  value: number;
  /** `spectral` only: the unit top eigenvector of the Gram matrix, `[B_t]`. */
  vector?: Float64Array;
}

/** The statistic kind of a Falcon rule (`spectral` for Falcon-3, `energy` otherwise). */
export function windowStatKind(rule: RuleName): WindowStatKind {
  return rule === "falcon3" ? "spectral" : "energy";
}

/** The statistic of the write features `xs` (at least one). */
export function windowStatistic(kind: WindowStatKind, xs: readonly Float64Array[]): WindowStat {
  const n = xs.length;
  if (n === 0) throw new RangeError("window statistic needs at least one write feature, got none");
  if (kind === "energy") {
    let sum = 0;
    for (const x of xs) sum += dot(x, x);
    return { value: sum / n };
  }
  const gram = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = i; j < n; j++) gram[i * n + j] = gram[j * n + i] = dot(xs[i], xs[j]);
  }
  const top = topEigenpair(gram, n);
  return { value: top.value / n, vector: top.vector };
}

/** Gradients with respect to each `xs[j]` given `dValue = dL/dE*`; returns one array per feature. */
export function windowStatisticBackward(
  kind: WindowStatKind,
  xs: readonly Float64Array[],
  stat: WindowStat,
  dValue: number,
): Float64Array[] {
  const n = xs.length;
  const dxs = xs.map((x) => new Float64Array(x.length));
  if (dValue === 0) return dxs;
  if (kind === "energy") {
    for (let j = 0; j < n; j++) {
      for (let i = 0; i < xs[j].length; i++) dxs[j][i] = (2 * dValue / n) * xs[j][i];
    }
    return dxs;
  }
  const u = stat.vector;
  if (!u) throw new TypeError("spectral statistic backward needs the top eigenvector");
  // X u: the feature-space image of the top eigenvector.
  const xu = new Float64Array(xs[0].length);
  for (let j = 0; j < n; j++) for (let i = 0; i < xu.length; i++) xu[i] += xs[j][i] * u[j];
  for (let j = 0; j < n; j++) {
    for (let i = 0; i < xu.length; i++) dxs[j][i] = (2 * dValue / n) * u[j] * xu[i];
  }
  return dxs;
}

function dot(a: Float64Array, b: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}
