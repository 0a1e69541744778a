/**
 * Learning-rate schedule: linear warmup, then cosine decay to a floor.
 *
 * `lr(s)` for the 1-based step `s`: `peak * s / warmup` while `s <= warmup`; afterwards
 * `floor + (peak - floor) * (1 + cos(pi * p)) / 2` with `p = (s - warmup) / (steps - warmup)`
 * and `floor = peak * minLrRatio`.
 *
 * @module
 */

import type { TrainConfig } from "./config.ts";

/** Learning rate of the 1-based optimizer step `step`. */
export function learningRate(
  step: number,
  config: Pick<TrainConfig, "lr" | "minLrRatio" | "warmupSteps" | "steps">,
): number {
  const { lr, minLrRatio, warmupSteps, steps } = config;
  if (warmupSteps > 0 && step <= warmupSteps) return (lr * step) / warmupSteps;
  const span = Math.max(steps - warmupSteps, 1);
  const progress = Math.min(Math.max((step - warmupSteps) / span, 0), 1);
  const floor = lr * minLrRatio;
  return floor + (lr - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
