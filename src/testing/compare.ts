/**
 * Comparison and random-data helpers shared by every test: `atol + rtol * |ref|` checks that
 * report the largest difference and the first failing index (llm.c `validate_result`).
 *
 * @module
 */

/** Tolerances per precision (SPEC section 4). */
export const TOLERANCE = {
  /** Two float64 implementations or forms. */
  f64: { rtol: 1e-10, atol: 1e-12 },
  /** A float32 kernel against the float64 reference: outputs. */
  f32Forward: { rtol: 1e-5, atol: 1e-6 },
  /** A float32 kernel against the float64 reference: gradients. */
  f32Backward: { rtol: 1e-4, atol: 1e-5 },
} as const;

/** Relative L2 error `||a - b|| / max(||b||, tiny)`. */
export function relativeL2(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  if (actual.length !== expected.length) {
    throw new RangeError(`length mismatch: ${actual.length} vs ${expected.length}`);
  }
  let num = 0;
  let den = 0;
  for (let i = 0; i < actual.length; i++) {
    const d = actual[i] - expected[i];
    num += d * d;
    den += expected[i] * expected[i];
  }
  if (!Number.isFinite(num)) return Infinity;
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-300);
}

/** Largest absolute difference and its index. */
export function maxAbsDiff(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
): { value: number; index: number } {
  let value = 0;
  let index = -1;
  for (let i = 0; i < actual.length; i++) {
    const d = Math.abs(actual[i] - expected[i]);
    if (!(d <= value)) { // NaN counts as the largest
      value = Number.isNaN(d) ? Infinity : d;
      index = i;
    }
  }
  return { value, index };
}

/**
 * Throw unless every element satisfies `|a - e| <= atol + rtol * |e|`. The message names the
 * array, the first failing index, the largest difference and the relative L2 error.
 */
export function assertClose(
  name: string,
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: { rtol: number; atol: number },
): void {
  if (actual.length !== expected.length) {
    throw new Error(`${name}: length ${actual.length}, expected ${expected.length}`);
  }
  let first = -1;
  for (let i = 0; i < actual.length; i++) {
    const ok = Math.abs(actual[i] - expected[i]) <= tol.atol + tol.rtol * Math.abs(expected[i]);
    if (!ok) {
      first = i;
      break;
    }
  }
  if (first >= 0) {
    const worst = maxAbsDiff(actual, expected);
    throw new Error(
      `${name}: mismatch at index ${first} (got ${actual[first]}, expected ${expected[first]}); ` +
        `max |diff| ${worst.value} at ${worst.index}; rel L2 ${relativeL2(actual, expected)}; ` +
        `rtol ${tol.rtol}, atol ${tol.atol}`,
    );
  }
}

/** Throw unless the relative L2 error is at most `tol`. */
export function assertRelL2(
  name: string,
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: number,
) {
  const err = relativeL2(actual, expected);
  if (!(err <= tol)) {
    const worst = maxAbsDiff(actual, expected);
    throw new Error(
      `${name}: relative L2 error ${err} > ${tol}; max |diff| ${worst.value} at index ${worst.index}`,
    );
  }
}

export { Rng } from "../random.ts";
