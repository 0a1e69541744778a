/**
 * The in-distribution score of a trained addition model as `falcon eval` reports it: the `avg 1-L`
 * row, the mean over operand lengths 1..L (L the training length) of the teacher-forced digit
 * accuracy and exact-match rate per length, on `falcon eval`'s default test sets
 * ({@linkcode EVAL_DEFAULTS}: 100 sums per length, seed 0). `falcon train` prints it at the end of
 * a run, so the two commands agree on what "in-distribution" means and on its number.
 *
 * @module
 */

import type { LanguageModel } from "../model/types.ts";
import type { AdditionConfig } from "../tasks/mod.ts";
import type { RangeAverage } from "./metrics.ts";
import { evaluateCheckpoints } from "./run.ts";

/** `falcon eval`'s defaults: sums per length, test-set seed, rows per batch. */
export const EVAL_DEFAULTS = { samples: 100, seed: 0, batchSize: 32 } as const;

/** The `avg 1-L` row of `falcon eval` for `model` trained on `task`, and how many sums it scored. */
export async function additionInDistribution(
  model: LanguageModel,
  task: AdditionConfig,
  options: { samples?: number; seed?: number; batchSize?: number } = {},
): Promise<{ average: RangeAverage; sums: number; samples: number; seed: number }> {
  const samples = options.samples ?? EVAL_DEFAULTS.samples;
  const seed = options.seed ?? EVAL_DEFAULTS.seed;
  const keys = Array.from({ length: task.maxDigits }, (_, i) => i + 1);
  const report = await evaluateCheckpoints(
    [{
      meta: {
        path: "(trained model)",
        mixer: model.config.mixer,
        alignment: model.config.alignment,
        seed: null,
        trainLength: task.maxDigits,
      },
      task,
      model,
    }],
    { task: "addition", keys, samples, seed, batchSize: options.batchSize ?? EVAL_DEFAULTS.batchSize },
  );
  const average = report.checkpoints[0].inDistribution!;
  return { average, sums: samples * keys.length, samples, seed };
}
