/**
 * Streaming test sets for the evaluation loop: one {@linkcode TestGroup} per operand length
 * (addition), per number of pairs (mqar), or one for a held-out text.
 *
 * Each group draws its examples lazily, `batchSize` at a time, one example per batch row, from its
 * own seeded stream, so memory does not grow with the number of samples. The addition stream is
 * exactly {@linkcode additionTestSet}'s (same seed derivation, same draws, in order), drawn
 * incrementally instead of as one array.
 *
 * @module
 */

import type { Batch } from "../model/types.ts";
import {
  ADDITION_PAD_ID,
  type AdditionConfig,
  additionConfig,
  additionExampleLength,
  additionTestStream,
  createMqarTask,
  DataRng,
  deriveSeed,
  type Example,
  type MqarConfig,
  mqarConfig,
} from "../tasks/mod.ts";
import type { TestGroup } from "./evaluate.ts";

/**
 * One example per row, row length `T`; the same layout as the tasks module's packing
 * (`ids[i] = tokens[i]`, `targets[i] = tokens[i+1]`, `weights[i] = loss[i+1]`, the rest PAD, weight 0;
 * for examples with place values `places[i] = places_of_example[i+1]`, -1 elsewhere).
 */
export function rowsBatch(examples: readonly Example[], T: number, padId: number): Batch {
  const B = examples.length;
  if (B < 1) throw new RangeError("rowsBatch needs at least one example");
  const ids = new Int32Array(B * T).fill(padId);
  const targets = new Int32Array(B * T).fill(padId);
  const weights = new Float32Array(B * T);
  const starts = new Uint8Array(B * T);
  let places: Int16Array | undefined;
  examples.forEach((ex, row) => {
    const n = ex.tokens.length;
    if (n > T) throw new RangeError(`rowsBatch: an example of ${n} tokens does not fit a row of T = ${T}`);
    const base = row * T;
    starts[base] = 1;
    if (n < T) starts[base + n] = 1; // padding is its own unsupervised segment
    ids.set(ex.tokens, base);
    targets.set(ex.tokens.subarray(1), base);
    for (let i = 0; i + 1 < n; i++) weights[base + i] = ex.loss[i + 1];
    if (ex.places) {
      places ??= new Int16Array(B * T).fill(-1);
      places.set(ex.places.subarray(1), base);
    }
  });
  return places ? { B, T, ids, targets, weights, starts, places } : { B, T, ids, targets, weights, starts };
}

function checkCounts(samples: number, batchSize: number): void {
  if (!Number.isInteger(samples) || samples < 1) {
    throw new RangeError(`samples must be an integer >= 1, got ${samples}`);
  }
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new RangeError(`batchSize must be an integer >= 1, got ${batchSize}`);
  }
}

/** A group of `samples` examples drawn by `draw` from a fresh stream, `batchSize` rows at a time. */
function streamGroup(
  key: number,
  samples: number,
  batchSize: number,
  T: number,
  padId: number,
  fresh: () => () => Example,
): TestGroup {
  checkCounts(samples, batchSize);
  return {
    key,
    batchCount: Math.ceil(samples / batchSize),
    *batches() {
      const draw = fresh();
      for (let done = 0; done < samples; done += batchSize) {
        const rows = Array.from({ length: Math.min(batchSize, samples - done) }, draw);
        yield rowsBatch(rows, T, padId);
      }
    },
  };
}

/**
 * Test groups for addition: per length, `samples` sums of two operands of exactly that many digits,
 * written in `config`'s format (operand and answer order, BOS, hints from `hintOffset`, default 0):
 * the streams of {@linkcode additionTestStream}. A length needing more hint ids than `config` has is
 * a RangeError. The operands do not depend on the offset: only the hint tokens move.
 */
export function additionGroups(
  config: AdditionConfig,
  lengths: readonly number[],
  samples: number,
  seed: number,
  batchSize: number,
  hintOffset = 0,
): TestGroup[] {
  const format = additionConfig(config);
  return lengths.map((digits) => {
    if (!Number.isInteger(digits) || digits < 1) {
      throw new RangeError(`addition length must be >= 1, got ${digits}`);
    }
    additionTestStream(digits, seed, format, hintOffset); // checks the hint range before any batch is drawn
    const T = additionExampleLength(format, digits);
    return streamGroup(
      digits,
      samples,
      batchSize,
      T,
      ADDITION_PAD_ID,
      () => additionTestStream(digits, seed, format, hintOffset),
    );
  });
}

/**
 * Test groups for mqar: per number of pairs `p`, examples of the trained task with `p` pairs and
 * `min(queries, p)` queries (same vocabulary, so the model's embedding fits). `p` may not exceed
 * the number of keys.
 */
export function mqarGroups(
  config: MqarConfig,
  pairCounts: readonly number[],
  samples: number,
  seed: number,
  batchSize: number,
): TestGroup[] {
  return pairCounts.map((pairs) => {
    if (pairs > config.keys) {
      throw new RangeError(
        `mqar: ${pairs} pairs need ${pairs} distinct keys; the checkpoint's task has ${config.keys}`,
      );
    }
    const task = createMqarTask(mqarConfig({ ...config, pairs, queries: Math.min(config.queries, pairs) }));
    return streamGroup(pairs, samples, batchSize, task.maxExampleLength, task.padId, () => {
      const rng = new DataRng(deriveSeed(seed, `eval:mqar:pairs=${pairs}`));
      return () => task.sample(rng, "eval");
    });
  });
}

/**
 * One group over a held-out byte range `[from, to)` of `bytes`: consecutive windows of `seqLen`
 * bytes overlapping by one, so every byte after `from` is predicted exactly once; at most
 * `maxWindows` windows (the last may be shorter).
 */
export function textGroup(
  bytes: Uint8Array,
  from: number,
  to: number,
  seqLen: number,
  maxWindows: number,
  batchSize: number,
): TestGroup {
  checkCounts(maxWindows, batchSize);
  if (
    !(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from + 2 <= to && to <= bytes.length)
  ) {
    throw new RangeError(
      `text: held-out range [${from}, ${to}) of ${bytes.length} bytes holds fewer than 2 bytes`,
    );
  }
  if (!Number.isInteger(seqLen) || seqLen < 2) {
    throw new RangeError(`text: seqLen must be >= 2, got ${seqLen}`);
  }
  const step = seqLen - 1;
  const windows = Math.min(maxWindows, Math.ceil((to - from - 1) / step));
  const window = (i: number): Example => {
    const start = from + i * step;
    const tokens = Int32Array.from(bytes.subarray(start, Math.min(to, start + seqLen)));
    const loss = new Uint8Array(tokens.length).fill(1);
    loss[0] = 0;
    return { tokens, loss };
  };
  return {
    key: 0,
    batchCount: Math.ceil(windows / batchSize),
    *batches() {
      for (let done = 0; done < windows; done += batchSize) {
        const rows = Array.from({ length: Math.min(batchSize, windows - done) }, (_, j) => window(done + j));
        yield rowsBatch(rows, seqLen, 0);
      }
    },
  };
}
