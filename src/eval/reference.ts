/**
 * The no-extrapolation reference (SPEC section 8): what the per-length teacher-forced metrics of a
 * model would be if it were right on every answer digit of place `< Ltrain` and guessed beyond it,
 * right with probability `guess` (1/10 for a uniform guess over the ten digits). It is computed
 * ANALYTICALLY, in expectation over the test sets' distribution (two operands of exactly `n`
 * digits, no leading zero, a 1-digit operand may be 0), not counted over a drawn test set:
 *
 * - the answer has `n` digits, or `n + 1` when the sum carries out of the top place, which happens
 *   with probability `carry(n)` ({@linkcode carryProbability});
 * - digit accuracy = E[right digits] / E[answer digits]
 *   = (sum over places p < n of r(p) + carry(n) * r(n)) / (n + carry(n)), with r(p) = 1 for p < Ltrain
 *   and `guess` beyond: the limit of the pooled per-length digit accuracy as the samples grow;
 * - exact match = E[guess^(answer digits at places >= Ltrain)] (EOS assumed right).
 *
 * At Ltrain = 32 it gives 81.0% (80.97) averaged over 33-48 digits and 69.3% at 48: the level a
 * length average reaches with no extrapolation at all, while the per-place measure of the same
 * model is exactly `guess`. (Leaving the carry digit out, i.e. answers of exactly `n` digits, would
 * give 82.1% and 70.0%: SPEC's "about 81-82%" spans the two.)
 *
 * @module
 */

import { type GroupAccuracy, type RangeAverage, rangeAverage } from "./metrics.ts";

/** The expected probability of a uniform guess over the ten digits. */
export const DIGIT_GUESS = 0.1;

/**
 * Probability that the sum of two operands of exactly `digits` digits has `digits + 1` digits, the
 * operands drawn as the test sets draw them: each digit uniform, the leading one in 1-9 (a 1-digit
 * operand in 0-9). For `n >= 2`, with the lower `n - 1` digits carrying with probability
 * `(N - 1) / (2N)`, `N = 10^(n-1)`: P = (45 + 8 * that) / 81 (45 of the 81 pairs of leading digits
 * sum to 10 or more, 8 sum to exactly 9). For `n = 1`: 45 / 100.
 */
export function carryProbability(digits: number): number {
  if (!Number.isInteger(digits) || digits < 1) {
    throw new RangeError(`carryProbability: digits must be an integer >= 1, got ${digits}`);
  }
  if (digits === 1) return 45 / 100;
  const lowerCarry = 0.5 - 0.5 * Math.pow(10, -(digits - 1));
  return (45 + 8 * lowerCarry) / 81;
}

/** The no-extrapolation reference for one checkpoint's training length over the evaluated lengths. */
export interface NoExtrapolationReference {
  /** Training length `Ltrain`: places below it are right. */
  readonly trainLength: number;
  /** Probability of a right digit at places `>= Ltrain`. */
  readonly guess: number;
  /** Per operand length: expected digit accuracy and exact match of one sum (`tokens` = its expected answer digits, `sequences` = 1). */
  readonly perLength: GroupAccuracy[];
  /** Mean over the evaluated lengths `1..Ltrain`. */
  readonly inDistribution: RangeAverage | null;
  /** Mean over the evaluated lengths above `Ltrain`. */
  readonly extrapolation: RangeAverage | null;
}

/** Expected digit accuracy and exact match of the reference model at one operand length. */
export function referenceAtLength(
  digits: number,
  trainLength: number,
  guess = DIGIT_GUESS,
): { digitAccuracy: number; exactMatch: number; expectedDigits: number } {
  if (!Number.isInteger(trainLength) || trainLength < 1) {
    throw new RangeError(`trainLength must be an integer >= 1, got ${trainLength}`);
  }
  if (!(guess >= 0 && guess <= 1)) throw new RangeError(`guess must be in [0, 1], got ${guess}`);
  const carry = carryProbability(digits);
  const right = (place: number) => (place < trainLength ? 1 : guess);
  const known = Math.min(digits, trainLength);
  const beyond = digits - known; // places trainLength..digits-1
  const expectedRight = known + guess * beyond + carry * right(digits);
  const expectedDigits = digits + carry;
  const beyondWithCarry = beyond + (digits >= trainLength ? 1 : 0);
  return {
    digitAccuracy: expectedRight / expectedDigits,
    exactMatch: (1 - carry) * Math.pow(guess, beyond) + carry * Math.pow(guess, beyondWithCarry),
    expectedDigits,
  };
}

/**
 * The reference at every length of `lengths`, with the same range means as a checkpoint's report
 * (each length weighing the same).
 *
 * @example
 * ```ts
 * import { noExtrapolationReference } from "./reference.ts";
 * const lengths = Array.from({ length: 48 }, (_, i) => i + 1);
 * const ref = noExtrapolationReference(32, lengths);
 * const beyond = ref.extrapolation!.digitAccuracy;
 * if (beyond.toFixed(3) !== "0.810") throw new Error(`expected 81.0%, got ${beyond}`);
 * ```
 */
export function noExtrapolationReference(
  trainLength: number,
  lengths: readonly number[],
  guess = DIGIT_GUESS,
): NoExtrapolationReference {
  const perLength = [...new Set(lengths)].sort((a, b) => a - b).map((key) => {
    const r = referenceAtLength(key, trainLength, guess);
    return {
      key,
      tokens: r.expectedDigits,
      sequences: 1,
      digitAccuracy: r.digitAccuracy,
      exactMatch: r.exactMatch,
    };
  });
  const last = perLength.length > 0 ? perLength[perLength.length - 1].key : 0;
  return {
    trainLength,
    guess,
    perLength,
    inDistribution: rangeAverage(perLength, 1, trainLength),
    extrapolation: last > trainLength ? rangeAverage(perLength, trainLength + 1, last) : null,
  };
}
