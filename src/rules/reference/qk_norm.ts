/**
 * Query/key normalisation applied inside every fast-weight rule (SPEC section 1), forward and
 * backward, on `[rows, dim]` row-major arrays:
 *
 * - `rms`: `u / sqrt(||u||^2 / dim + epsRms)` (no learned weight);
 * - `l2`: `u / max(||u||, 1e-6)`;
 * - `none`: the identity.
 *
 * The feature map is the identity after normalisation, so `phi(u)` is the normalised row.
 *
 * @module
 */

import type { QkNorm } from "../config.ts";

/** Floor of the `l2` norm's denominator (SPEC section 1). */
export const L2_NORM_FLOOR = 1e-6;

/** Normalise each row of `u` (`[rows, dim]`); returns a new array. */
export function normalizeRows(
  u: Float64Array,
  rows: number,
  dim: number,
  norm: QkNorm,
  epsRms: number,
): Float64Array {
  const out = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const row = u.subarray(r * dim, (r + 1) * dim);
    const scale = rowScale(row, norm, epsRms);
    for (let i = 0; i < dim; i++) out[r * dim + i] = row[i] * scale;
  }
  return out;
}

/**
 * Gradient with respect to the raw rows `u` given the gradient `dn` of the normalised rows.
 * Returns a new `[rows, dim]` array.
 */
export function normalizeRowsBackward(
  u: Float64Array,
  dn: Float64Array,
  rows: number,
  dim: number,
  norm: QkNorm,
  epsRms: number,
): Float64Array {
  const du = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const row = u.subarray(r * dim, (r + 1) * dim);
    const g = dn.subarray(r * dim, (r + 1) * dim);
    const out = du.subarray(r * dim, (r + 1) * dim);
    if (norm === "none") {
      out.set(g);
      continue;
    }
    const scale = rowScale(row, norm, epsRms);
    // n = s(u) u, so du = s g + (u . g) grad(s), with grad(s) = c u:
    // rms: s = (|u|^2/dim + eps)^(-1/2), c = -s^3/dim; l2: s = 1/|u|, c = -s^3 (0 where floored).
    let c = 0;
    if (norm === "rms") c = -scale * scale * scale / dim;
    else if (!l2Floored(row)) c = -scale * scale * scale;
    let ug = 0;
    for (let i = 0; i < dim; i++) ug += row[i] * g[i];
    for (let i = 0; i < dim; i++) out[i] = scale * g[i] + c * ug * row[i];
  }
  return du;
}

/** The factor `s(u)` with `normalised(u) = s(u) u`. */
function rowScale(row: Float64Array, norm: QkNorm, epsRms: number): number {
  if (norm === "none") return 1;
  const ss = sumSquares(row);
  if (norm === "rms") return 1 / Math.sqrt(ss / row.length + epsRms);
  return 1 / Math.max(Math.sqrt(ss), L2_NORM_FLOOR);
}

/** Whether the `l2` denominator is the floor (then `s` is constant). */
function l2Floored(row: Float64Array): boolean {
  return !(Math.sqrt(sumSquares(row)) > L2_NORM_FLOOR);
}

function sumSquares(row: Float64Array): number {
  let ss = 0;
  for (let i = 0; i < row.length; i++) ss += row[i] * row[i];
  return ss;
}
