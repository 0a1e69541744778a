/**
 * The evaluation loop: several models scored on the same test groups, streaming.
 *
 * A test group is one operand length (addition), one number of pairs (mqar) or the held-out file
 * (text). Its batches come from a generator that is called once per group: each batch is generated,
 * scored by every model in turn, then dropped, so memory does not grow with the number of samples
 * and every model sees exactly the same sequences.
 *
 * @module
 */

import type { Batch, LanguageModel } from "../model/types.ts";
import {
  type AccuracyTally,
  addBits,
  addPlaceAccuracy,
  addTeacherForced,
  type BitsTally,
  emptyAccuracyTally,
  emptyBitsTally,
  emptyPlaceTally,
  type PlacedBatch,
  type PlaceTally,
} from "./metrics.ts";

/** What the loop needs of a model: its vocabulary size and its logits. */
export interface ScoringModel {
  /** Only the vocabulary size is read. */
  readonly config: Pick<LanguageModel["config"], "vocabSize">;
  /** Logits `[B, T, V]` of a batch. */
  logits: LanguageModel["logits"];
}

/** One test group: a key and a lazily generated, deterministic stream of batches. */
export interface TestGroup {
  /** Operand length, number of pairs, or 0 for a single group. */
  readonly key: number;
  /** How many batches `batches()` yields (for progress). */
  readonly batchCount: number;
  /** A fresh stream of the group's batches; calling it twice yields the same batches. */
  batches(): Iterable<Batch> | AsyncIterable<Batch>;
}

/** How a tally is started and fed. */
export interface Metric<T> {
  /** A zero tally. */
  empty(): T;
  /** Add one batch's logits. */
  add(tally: T, logits: ArrayLike<number>, batch: PlacedBatch, vocabSize: number): void;
}

/** Teacher-forced digit accuracy (targets equal to `eosId` excluded) and exact match (all included). */
export function teacherForced(eosId?: number): Metric<AccuracyTally> {
  return {
    empty: emptyAccuracyTally,
    add: (tally, logits, batch, vocabSize) => addTeacherForced(tally, logits, batch, vocabSize, eosId),
  };
}

/** An accuracy tally with the per-place counts of the same predictions (addition). */
export interface PlacedAccuracyTally extends AccuracyTally {
  /** Per place value counts (EOS excluded). */
  places: PlaceTally;
}

/**
 * Teacher-forced digit accuracy and exact match as {@linkcode teacherForced}, plus the per-place
 * counts from the batch's `places`, from the same logits (one model call per batch).
 */
export function teacherForcedByPlace(eosId?: number): Metric<PlacedAccuracyTally> {
  return {
    empty: () => ({ ...emptyAccuracyTally(), places: emptyPlaceTally() }),
    add(tally, logits, batch, vocabSize) {
      addTeacherForced(tally, logits, batch, vocabSize, eosId);
      addPlaceAccuracy(tally.places, logits, batch, vocabSize);
    },
  };
}

/** Teacher-forced accuracy with every scored position counted (no EOS to exclude, e.g. mqar). */
export const TEACHER_FORCED: Metric<AccuracyTally> = teacherForced();

/** Cross-entropy in bits (bits per byte for byte-level text). */
export const BITS: Metric<BitsTally> = { empty: emptyBitsTally, add: addBits };

/** Progress of an evaluation, reported after every scored batch. */
export interface EvalProgress {
  /** Model-batches scored so far. */
  readonly done: number;
  /** Model-batches in the whole evaluation. */
  readonly total: number;
  /** Key of the group being scored. */
  readonly key: number;
}

/**
 * Score every model on every group; returns, per model (in order), its tally per group key.
 *
 * @example
 * ```ts
 * import { evaluateModels, TEACHER_FORCED } from "./evaluate.ts";
 * const batch = {
 *   B: 1, T: 1, ids: Int32Array.of(0), targets: Int32Array.of(1),
 *   weights: Float32Array.of(1), starts: Uint8Array.of(1),
 * };
 * const model = { config: { vocabSize: 2 }, logits: () => Promise.resolve(Float32Array.of(0, 1)) };
 * const group = { key: 3, batchCount: 1, batches: () => [batch] };
 * const [tallies] = await evaluateModels([model], [group], TEACHER_FORCED);
 * if (tallies.get(3)?.correctTokens !== 1) throw new Error("expected one right token");
 * ```
 */
export async function evaluateModels<T>(
  models: readonly ScoringModel[],
  groups: readonly TestGroup[],
  metric: Metric<T>,
  onProgress?: (progress: EvalProgress) => void,
): Promise<Map<number, T>[]> {
  if (models.length === 0) throw new RangeError("evaluateModels needs at least one model");
  const keys = new Set<number>();
  for (const group of groups) {
    if (keys.has(group.key)) throw new RangeError(`test group key ${group.key} appears twice`);
    keys.add(group.key);
  }
  const total = groups.reduce((s, g) => s + g.batchCount, 0) * models.length;
  const results = models.map(() => new Map<number, T>());
  let done = 0;
  for (const group of groups) {
    const tallies = models.map((_, m) => {
      const tally = metric.empty();
      results[m].set(group.key, tally);
      return tally;
    });
    for await (const batch of group.batches()) {
      for (let m = 0; m < models.length; m++) {
        const model = models[m];
        const logits = await model.logits(batch);
        metric.add(tallies[m], logits, batch, model.config.vocabSize);
        done++;
        onProgress?.({ done, total, key: group.key });
      }
    }
  }
  return results;
}
