/**
 * Central finite differences in float64, for checking hand-derived backward passes (SPEC section 5).
 *
 * @module
 */

/**
 * The gradient of `f` with respect to every entry of `x` by central differences
 * `(f(x + h e_i) - f(x - h e_i)) / 2h`. `f` must read `x` (it is perturbed in place and restored).
 *
 * @example
 * ```ts
 * import { numericGradient } from "./finite_difference.ts";
 * const x = Float64Array.of(1, 2);
 * const g = numericGradient(() => x[0] * x[0] + 3 * x[1], x);
 * if (Math.abs(g[0] - 2) > 1e-6 || Math.abs(g[1] - 3) > 1e-6) throw new Error("bad gradient");
 * ```
 */
export function numericGradient(f: () => number, x: Float64Array, h = 1e-5): Float64Array {
  if (!(h > 0)) throw new RangeError(`step h must be > 0, got ${h}`);
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const saved = x[i];
    x[i] = saved + h;
    const up = f();
    x[i] = saved - h;
    const down = f();
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

/**
 * Throw unless `||analytic - numeric|| <= rtol ||numeric|| + atol sqrt(n)` (L2 norms). The message
 * names the array, the error, and the first entry with the largest difference.
 */
export function assertGradientClose(
  name: string,
  analytic: ArrayLike<number>,
  numeric: ArrayLike<number>,
  rtol = 1e-6,
  atol = 1e-8,
): void {
  if (analytic.length !== numeric.length) {
    throw new RangeError(`${name}: length ${analytic.length}, expected ${numeric.length}`);
  }
  let diff = 0;
  let norm = 0;
  let worst = -1;
  let worstValue = -1;
  for (let i = 0; i < numeric.length; i++) {
    const d = Math.abs(analytic[i] - numeric[i]);
    diff += d * d;
    norm += numeric[i] * numeric[i];
    if (!(d <= worstValue)) {
      worstValue = Number.isNaN(d) ? Infinity : d;
      worst = i;
    }
  }
  const bound = rtol * Math.sqrt(norm) + atol * Math.sqrt(numeric.length);
  if (!(Math.sqrt(diff) <= bound)) {
    throw new Error(
      `${name}: |analytic - numeric| = ${Math.sqrt(diff)} > ${bound} (|numeric| = ${Math.sqrt(norm)}); ` +
        `largest difference at index ${worst}: analytic ${analytic[worst]}, numeric ${numeric[worst]}`,
    );
  }
}
