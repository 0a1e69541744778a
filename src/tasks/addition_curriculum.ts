/**
 * The addition length curriculum: the largest operand length of the training examples at a step.
 *
 * Definition (a step schedule): with `L0 = startDigits`, `L = maxDigits`, `steps` training steps
 * and `R = round(fraction * steps)` ramp steps, step `s` (1-based) trains on operands of up to
 *
 *     L(s) = min(L, L0 + floor((L - L0 + 1) * (s - 1) / R))   for s <= R,
 *     L(s) = L                                                for s > R (and when R = 0).
 *
 * So the ramp is split into `L - L0 + 1` stages of (nearly) equal length, stage `k` training on up
 * to `L0 + k` digits; the last stage (`L`) lasts to the end of training. The schedule depends only
 * on the step and the configuration (integer arithmetic, no rounding surprises), so a seeded stream
 * of training examples is deterministic.
 *
 * @module
 */

import type { AdditionConfig } from "./addition_config.ts";
import type { SampleProgress } from "./types.ts";

/**
 * The largest operand length used at `progress.step` of `progress.steps`: `maxDigits` without a
 * curriculum or without progress (e.g. an evaluation stream). Throws a RangeError for a step outside
 * `[1, steps]`.
 *
 * @example
 * ```ts
 * import { additionConfig } from "./addition_config.ts";
 * import { curriculumDigits } from "./addition_curriculum.ts";
 * const config = additionConfig({ maxDigits: 4, curriculum: { startDigits: 2, fraction: 0.5 } });
 * // 6 ramp steps over 3 stages (2, 3, 4 digits), then 4 digits
 * const lengths = Array.from({ length: 12 }, (_, i) => curriculumDigits(config, { step: i + 1, steps: 12 }));
 * if (lengths.join() !== "2,2,3,3,4,4,4,4,4,4,4,4") throw new Error(lengths.join());
 * ```
 */
export function curriculumDigits(config: AdditionConfig, progress?: SampleProgress): number {
  const curriculum = config.curriculum;
  if (!curriculum || !progress) return config.maxDigits;
  const { step, steps } = progress;
  if (!Number.isInteger(steps) || steps < 1) {
    throw new RangeError(`addition curriculum: steps must be an integer >= 1, got ${steps}`);
  }
  if (!Number.isInteger(step) || step < 1 || step > steps) {
    throw new RangeError(`addition curriculum: step must be an integer in [1, ${steps}], got ${step}`);
  }
  const L = config.maxDigits;
  const L0 = curriculum.startDigits;
  const ramp = Math.round(curriculum.fraction * steps);
  if (step > ramp) return L;
  return Math.min(L, L0 + Math.floor(((L - L0 + 1) * (step - 1)) / ramp));
}
