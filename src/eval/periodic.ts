/**
 * The evaluation `falcon train --eval-every N` runs during training (`TrainSetup.evaluate`): a
 * small fixed test set at the training length, scored teacher-forced, so metrics.jsonl shows when
 * learning starts. Its test sets come from `deriveSeed(seed, "eval-every")`, a stream of their
 * own: the training stream is never drawn from, and the model is only read (logits), so the losses
 * are the same with and without it.
 *
 * What each task logs (`eval` of the line), always first `loss`: the validation loss, the mean
 * cross-entropy in nats per supervised token (as the training loss, on the held-out set), then:
 * - addition: `samples` sums of two `maxDigits`-digit operands: `digitAccuracy` (EOS not counted),
 *   `exactMatch` (EOS included), `placesInRange` (digit accuracy over places `< maxDigits`) and
 *   `place<p>` for every place value seen (`place0` = units; the carry digit's place `maxDigits`
 *   is beyond the training length);
 * - mqar: `samples` examples with the training number of pairs: `accuracy` and `exactMatch`;
 * - text: up to `samples` windows of the held-out tail: `bitsPerByte`.
 *
 * @module
 */

import { ADDITION_EOS_ID, deriveSeed, type TaskConfig } from "../tasks/mod.ts";
import {
  BITS,
  evaluateModels,
  type Metric,
  type ScoringModel,
  TEACHER_FORCED,
  teacherForcedByPlace,
} from "./evaluate.ts";
import { accuracyRates, bitsPerByte, type BitsTally, summarisePlaces } from "./metrics.ts";

/** `metric` and the cross-entropy of the same logits (one model call per batch). */
function withLoss<T>(metric: Metric<T>): Metric<{ score: T; bits: BitsTally }> {
  return {
    empty: () => ({ score: metric.empty(), bits: BITS.empty() }),
    add(tally, logits, batch, vocabSize) {
      metric.add(tally.score, logits, batch, vocabSize);
      BITS.add(tally.bits, logits, batch, vocabSize);
    },
  };
}

/** Mean nats per scored token of a bits tally. */
function natsPerToken(bits: BitsTally): number {
  return bits.tokens > 0 ? (bits.bits * Math.LN2) / bits.tokens : NaN;
}
import { heldOutRange } from "./run.ts";
import { additionGroups, mqarGroups, textGroup } from "./test_sets.ts";

/** Options of {@linkcode trainingEvaluation}. */
export interface TrainingEvalOptions {
  /** Run seed; the test sets use `deriveSeed(seed, "eval-every")`. */
  readonly seed: number;
  /** Sums (mqar: examples, text: windows) per evaluation (default 64). */
  readonly samples?: number;
  /** Rows per model call (default 16). */
  readonly batchSize?: number;
  /** Text task: the training corpus (its held-out tail is scored). */
  readonly corpus?: Uint8Array;
}

/** Default number of sums per periodic evaluation. */
export const TRAINING_EVAL_SAMPLES = 64;

/**
 * The periodic evaluation of a task: a function that scores a model on the same fixed test set
 * every time it is called and returns the numbers to log.
 */
export function trainingEvaluation(
  task: TaskConfig,
  options: TrainingEvalOptions,
): (model: ScoringModel, step: number) => Promise<Record<string, number>> {
  const samples = options.samples ?? TRAINING_EVAL_SAMPLES;
  const batchSize = options.batchSize ?? 16;
  const seed = deriveSeed(options.seed, "eval-every");
  switch (task.task) {
    case "addition": {
      const groups = additionGroups(task, [task.maxDigits], samples, seed, batchSize);
      return async (model) => {
        const [tallies] = await evaluateModels(
          [model],
          groups,
          withLoss(teacherForcedByPlace(ADDITION_EOS_ID)),
        );
        const { score: tally, bits } = tallies.get(task.maxDigits)!;
        const places = summarisePlaces(tally.places, task.maxDigits);
        const rates = accuracyRates(tally);
        const out: Record<string, number> = {
          loss: natsPerToken(bits),
          digitAccuracy: rates.digitAccuracy,
          exactMatch: rates.exactMatch,
          placesInRange: places.inRange?.digitAccuracy ?? NaN,
        };
        for (const p of places.perPlace) out[`place${p.place}`] = p.digitAccuracy;
        return out;
      };
    }
    case "mqar": {
      const groups = mqarGroups(task, [task.pairs], samples, seed, batchSize);
      return async (model) => {
        const [tallies] = await evaluateModels([model], groups, withLoss(TEACHER_FORCED));
        const { score, bits } = tallies.get(task.pairs)!;
        const rates = accuracyRates(score);
        return { loss: natsPerToken(bits), accuracy: rates.digitAccuracy, exactMatch: rates.exactMatch };
      };
    }
    case "text": {
      if (!options.corpus) throw new RangeError("trainingEvaluation: the text task needs its corpus bytes");
      const { from, to } = heldOutRange(task, options.corpus);
      const groups = [textGroup(options.corpus, from, to, task.seqLen, samples, batchSize)];
      return async (model) => {
        const [tallies] = await evaluateModels([model], groups, BITS);
        const bits = tallies.get(0)!;
        return { loss: natsPerToken(bits), bitsPerByte: bitsPerByte(bits).bitsPerByte };
      };
    }
  }
}
