/**
 * Evaluation metrics (SPEC section 8) computed from a model's logits on a task batch.
 *
 * Scored positions are the positions a task supervises: weight > 0 in its {@linkcode Batch}
 * (the same positions the training loss uses). For addition those are the answer digits and the
 * end-of-sequence token (the tasks module supervises EOS). Sequences are delimited by the batch's
 * start flags (position 0 of a row always opens one), so packed rows are scored per sequence.
 *
 * - **teacher-forced accuracy**: at each scored position, the argmax of the logits (given the true
 *   prefix, which is what one forward pass over the batch gives) is compared with the target.
 *   Ties go to the lowest token id; a NaN logit never wins.
 * - **digit accuracy**: the fraction of scored positions predicted right, EOS EXCLUDED: positions
 *   whose target is the `eosId` passed in (addition's EOS) do not count, so it measures digits only
 *   (the trainer's `teacherForcedAccuracy` uses the same rule).
 * - **exact match**: a sequence is exact when every one of its scored positions, EOS INCLUDED, is
 *   right. Sequences without a scored position (padding) are not counted.
 * - **per place value** (addition): the same argmax at every answer digit, counted by the digit's
 *   place value (0 = units; the batch's `places`), over every sum evaluated. Places at or beyond the
 *   training length `Ltrain` are digits no training sum had: their pooled accuracy is the
 *   extrapolation measure, which the per-length average mixes with in-range places.
 * - **bits per byte** (byte-level text): mean over scored positions of `-log2 softmax(logits)[target]`.
 *
 * Shapes: `B` rows, `T` positions, `V` vocabulary; logits are `[B, T, V]` row-major.
 *
 * @module
 */

import type { Batch } from "../model/types.ts";

/** The parts of a batch the metrics read. */
export type ScoredBatch = Pick<Batch, "B" | "T" | "targets" | "weights" | "starts">;

/** Running counts of teacher-forced predictions (one per model and test group). */
export interface AccuracyTally {
  /** Scored tokens seen, EOS targets excluded. */
  tokens: number;
  /** Of those, tokens whose argmax equals the target. */
  correctTokens: number;
  /** Sequences with at least one scored token. */
  sequences: number;
  /** Sequences whose scored tokens are all right. */
  exactSequences: number;
}

/** Running sums for bits per byte. */
export interface BitsTally {
  /** Sum of `-log2 p(target)` over scored positions. */
  bits: number;
  /** Scored positions (bytes). */
  tokens: number;
}

/** A tally with every count at 0. */
export function emptyAccuracyTally(): AccuracyTally {
  return { tokens: 0, correctTokens: 0, sequences: 0, exactSequences: 0 };
}

/** A bits tally with every sum at 0. */
export function emptyBitsTally(): BitsTally {
  return { bits: 0, tokens: 0 };
}

function checkShapes(logits: ArrayLike<number>, batch: ScoredBatch, vocabSize: number): void {
  const n = batch.B * batch.T;
  if (!Number.isInteger(vocabSize) || vocabSize < 1) {
    throw new RangeError(`vocabSize must be an integer >= 1, got ${vocabSize}`);
  }
  if (logits.length !== n * vocabSize) {
    throw new RangeError(
      `logits length ${logits.length} does not match B*T*V = ${batch.B}*${batch.T}*${vocabSize} = ${
        n * vocabSize
      }`,
    );
  }
  for (const key of ["targets", "weights", "starts"] as const) {
    if (batch[key].length !== n) {
      throw new RangeError(`batch.${key} length ${batch[key].length} does not match B*T = ${n}`);
    }
  }
}

/** Index of the largest of `logits[offset .. offset+size)`; ties go to the lowest index, NaN never wins. */
export function argmax(logits: ArrayLike<number>, offset: number, size: number): number {
  let best = 0;
  let bestValue = -Infinity;
  let found = false;
  for (let i = 0; i < size; i++) {
    const value = logits[offset + i];
    if (value > bestValue || (!found && value === -Infinity)) {
      best = i;
      bestValue = value;
      found = true;
    }
  }
  return best;
}

/**
 * Add the teacher-forced predictions of one batch to `tally` (digit accuracy and exact match).
 * Positions whose target is `eosId` count for exact match only.
 *
 * @example
 * ```ts
 * import { addTeacherForced, emptyAccuracyTally } from "./metrics.ts";
 * // one row, two positions, vocabulary of 2; only position 1 is scored, its target is 1
 * const batch = {
 *   B: 1, T: 2,
 *   targets: Int32Array.of(0, 1), weights: Float32Array.of(0, 1), starts: Uint8Array.of(1, 0),
 * };
 * const tally = emptyAccuracyTally();
 * addTeacherForced(tally, Float32Array.of(9, 0, 0.2, 0.7), batch, 2);
 * if (tally.correctTokens !== 1 || tally.exactSequences !== 1) throw new Error("expected a hit");
 * ```
 */
export function addTeacherForced(
  tally: AccuracyTally,
  logits: ArrayLike<number>,
  batch: ScoredBatch,
  vocabSize: number,
  eosId?: number,
): void {
  checkShapes(logits, batch, vocabSize);
  const { B, T, targets, weights, starts } = batch;
  for (let b = 0; b < B; b++) {
    let seqTokens = 0;
    let seqWrong = 0;
    const close = () => {
      if (seqTokens > 0) {
        tally.sequences++;
        if (seqWrong === 0) tally.exactSequences++;
      }
      seqTokens = 0;
      seqWrong = 0;
    };
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      if (t > 0 && starts[i]) close();
      if (!(weights[i] > 0)) continue;
      const hit = argmax(logits, i * vocabSize, vocabSize) === targets[i];
      seqTokens++;
      if (!hit) seqWrong++;
      if (targets[i] === eosId) continue;
      tally.tokens++;
      if (hit) tally.correctTokens++;
    }
    close();
  }
}

/** `-log2 softmax(logits[offset .. offset+size))[target]`, computed stably. */
export function bitsOfTarget(
  logits: ArrayLike<number>,
  offset: number,
  size: number,
  target: number,
): number {
  if (!Number.isInteger(target) || target < 0 || target >= size) {
    throw new RangeError(`target ${target} is outside the vocabulary [0, ${size})`);
  }
  let max = -Infinity;
  for (let i = 0; i < size; i++) max = Math.max(max, logits[offset + i]);
  let sum = 0;
  for (let i = 0; i < size; i++) sum += Math.exp(logits[offset + i] - max);
  const nats = Math.log(sum) + max - logits[offset + target];
  return nats / Math.LN2;
}

/** Add the cross-entropy (in bits) of one batch's scored positions to `tally`. */
export function addBits(
  tally: BitsTally,
  logits: ArrayLike<number>,
  batch: ScoredBatch,
  vocabSize: number,
): void {
  checkShapes(logits, batch, vocabSize);
  const n = batch.B * batch.T;
  for (let i = 0; i < n; i++) {
    if (!(batch.weights[i] > 0)) continue;
    tally.bits += bitsOfTarget(logits, i * vocabSize, vocabSize, batch.targets[i]);
    tally.tokens++;
  }
}

/** Rates of one accuracy tally: NaN where nothing was scored. */
export function accuracyRates(tally: AccuracyTally): { digitAccuracy: number; exactMatch: number } {
  return {
    digitAccuracy: tally.tokens > 0 ? tally.correctTokens / tally.tokens : NaN,
    exactMatch: tally.sequences > 0 ? tally.exactSequences / tally.sequences : NaN,
  };
}

/** Bits per byte and byte perplexity (`2^bpb`) of a tally: NaN where nothing was scored. */
export function bitsPerByte(tally: BitsTally): { bitsPerByte: number; perplexity: number } {
  const bpb = tally.tokens > 0 ? tally.bits / tally.tokens : NaN;
  return { bitsPerByte: bpb, perplexity: Math.pow(2, bpb) };
}

/** Per-group (operand length, or number of mqar pairs) accuracy. */
export interface GroupAccuracy {
  /** Operand length in digits (addition) or number of key-value pairs (mqar). */
  readonly key: number;
  /** Scored tokens. */
  readonly tokens: number;
  /** Sequences. */
  readonly sequences: number;
  /** Fraction of scored tokens predicted right. */
  readonly digitAccuracy: number;
  /** Fraction of sequences entirely right. */
  readonly exactMatch: number;
}

/** Mean of the per-group rates over a range of keys (each group weighs the same). */
export interface RangeAverage {
  /** First key of the range (inclusive). */
  readonly from: number;
  /** Last key of the range (inclusive). */
  readonly to: number;
  /** Groups in the range that were evaluated. */
  readonly groups: number;
  /** Mean digit accuracy over those groups. */
  readonly digitAccuracy: number;
  /** Mean exact-match rate over those groups. */
  readonly exactMatch: number;
}

/** Per-group rates from tallies keyed by group, sorted by key. */
export function groupAccuracies(tallies: ReadonlyMap<number, AccuracyTally>): GroupAccuracy[] {
  return [...tallies.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([key, tally]) => ({
      key,
      tokens: tally.tokens,
      sequences: tally.sequences,
      ...accuracyRates(tally),
    }));
}

/**
 * Mean of the per-group rates over keys in `[from, to]`; null when no evaluated group falls in it.
 * Every length weighs the same (longer lengths have more answer tokens but do not count more).
 */
export function rangeAverage(
  groups: readonly GroupAccuracy[],
  from: number,
  to: number,
): RangeAverage | null {
  const inRange = groups.filter((g) => g.key >= from && g.key <= to);
  if (inRange.length === 0) return null;
  const mean = (f: (g: GroupAccuracy) => number) => inRange.reduce((s, g) => s + f(g), 0) / inRange.length;
  return {
    from,
    to,
    groups: inRange.length,
    digitAccuracy: mean((g) => g.digitAccuracy),
    exactMatch: mean((g) => g.exactMatch),
  };
}

/** Addition summary: per-length rates, the in-distribution (1..Ltrain) and extrapolation (> Ltrain) means. */
export interface AdditionSummary {
  /** Training length `Ltrain` from the checkpoint's task config. */
  readonly trainLength: number;
  /** Per operand length. */
  readonly perLength: GroupAccuracy[];
  /** Mean over evaluated lengths `1..Ltrain`. */
  readonly inDistribution: RangeAverage | null;
  /** Mean over evaluated lengths above `Ltrain`. */
  readonly extrapolation: RangeAverage | null;
}

/** Summarise per-length tallies of an addition evaluation against the training length. */
export function summariseAddition(
  tallies: ReadonlyMap<number, AccuracyTally>,
  trainLength: number,
): AdditionSummary {
  if (!Number.isInteger(trainLength) || trainLength < 1) {
    throw new RangeError(`trainLength must be an integer >= 1, got ${trainLength}`);
  }
  const perLength = groupAccuracies(tallies);
  const maxLength = perLength.length > 0 ? perLength[perLength.length - 1].key : 0;
  return {
    trainLength,
    perLength,
    inDistribution: rangeAverage(perLength, 1, trainLength),
    extrapolation: maxLength > trainLength ? rangeAverage(perLength, trainLength + 1, maxLength) : null,
  };
}

/**
 * Per place value counts of teacher-forced answer digits, over every sum fed in (any operand
 * length). A place value `p` is the digit's power of ten (0 = units), read from the batch's
 * `places`; positions with place -1 (operands, symbols, EOS, padding) are not counted.
 */
export interface PlaceTally {
  /** `total[p]`: scored answer digits of place `p` (0 where none was seen). */
  total: number[];
  /** `correct[p]`: of those, digits whose argmax equals the target. */
  correct: number[];
}

/** A place tally with nothing counted. */
export function emptyPlaceTally(): PlaceTally {
  return { total: [], correct: [] };
}

/** The parts of a batch the per-place metric reads (`places` is required here). */
export type PlacedBatch = ScoredBatch & { readonly places?: Int16Array };

/**
 * Add the teacher-forced predictions of one batch's answer digits to `tally`, per place value:
 * positions with weight > 0 and `places[i] >= 0`. Throws a RangeError when the batch has no
 * `places` (its task does not mark answer places) or when their length is not `B*T`.
 *
 * @example
 * ```ts
 * import { addPlaceAccuracy, emptyPlaceTally } from "./metrics.ts";
 * // one row of two answer digits: the units (place 0) right, the tens (place 1) wrong
 * const batch = {
 *   B: 1, T: 2, targets: Int32Array.of(1, 1), weights: Float32Array.of(1, 1),
 *   starts: Uint8Array.of(1, 0), places: Int16Array.of(0, 1),
 * };
 * const tally = emptyPlaceTally();
 * addPlaceAccuracy(tally, Float32Array.of(0, 1, 1, 0), batch, 2);
 * if (tally.correct.join() !== "1,0" || tally.total.join() !== "1,1") throw new Error("unexpected tally");
 * ```
 */
export function addPlaceAccuracy(
  tally: PlaceTally,
  logits: ArrayLike<number>,
  batch: PlacedBatch,
  vocabSize: number,
): void {
  checkShapes(logits, batch, vocabSize);
  const { places } = batch;
  const n = batch.B * batch.T;
  if (places === undefined) {
    throw new RangeError("batch.places is missing: the per-place metric needs the answer digits' places");
  }
  if (places.length !== n) {
    throw new RangeError(`batch.places length ${places.length} does not match B*T = ${n}`);
  }
  for (let i = 0; i < n; i++) {
    const place = places[i];
    if (place < 0 || !(batch.weights[i] > 0)) continue;
    while (tally.total.length <= place) {
      tally.total.push(0);
      tally.correct.push(0);
    }
    tally.total[place]++;
    if (argmax(logits, i * vocabSize, vocabSize) === batch.targets[i]) tally.correct[place]++;
  }
}

/** Sum of place tallies (e.g. the tallies of every operand length), as a new tally. */
export function mergePlaceTallies(tallies: Iterable<PlaceTally>): PlaceTally {
  const out = emptyPlaceTally();
  for (const t of tallies) {
    for (let p = 0; p < t.total.length; p++) {
      while (out.total.length <= p) {
        out.total.push(0);
        out.correct.push(0);
      }
      out.total[p] += t.total[p];
      out.correct[p] += t.correct[p];
    }
  }
  return out;
}

/** Accuracy at one place value, over all the sums evaluated. */
export interface PlaceAccuracy {
  /** Place value (0 = units). */
  readonly place: number;
  /** Answer digits of this place scored. */
  readonly tokens: number;
  /** Of those, predicted right. */
  readonly correctTokens: number;
  /** `correctTokens / tokens` (NaN when none was scored). */
  readonly digitAccuracy: number;
}

/** Accuracy pooled over a range of places: every digit weighs the same. */
export interface PlaceRangeAccuracy {
  /** First place of the range (inclusive). */
  readonly from: number;
  /** Last place of the range with a scored digit (inclusive). */
  readonly to: number;
  /** Answer digits scored in the range. */
  readonly tokens: number;
  /** Fraction of them predicted right. */
  readonly digitAccuracy: number;
}

/** Per-place rates of a tally, place 0 up to the highest place seen. */
export function placeAccuracies(tally: PlaceTally): PlaceAccuracy[] {
  return tally.total.map((tokens, place) => ({
    place,
    tokens,
    correctTokens: tally.correct[place],
    digitAccuracy: tokens > 0 ? tally.correct[place] / tokens : NaN,
  }));
}

/**
 * Digit accuracy pooled over places `from..to` (inclusive; `to` defaults to the highest place seen):
 * null when no digit of those places was scored.
 */
export function placeRangeAccuracy(
  places: readonly PlaceAccuracy[],
  from: number,
  to = Infinity,
): PlaceRangeAccuracy | null {
  const inRange = places.filter((p) => p.place >= from && p.place <= to && p.tokens > 0);
  if (inRange.length === 0) return null;
  const tokens = inRange.reduce((s, p) => s + p.tokens, 0);
  const correct = inRange.reduce((s, p) => s + p.correctTokens, 0);
  return { from, to: inRange[inRange.length - 1].place, tokens, digitAccuracy: correct / tokens };
}

/**
 * Per-place accuracy split at the training length `Ltrain` (SPEC section 8): places `< Ltrain` are
 * in range; places `>= Ltrain` are digits no training sum had (the carry digit of two `Ltrain`-digit
 * operands, place `Ltrain`, counts beyond too), and their pooled accuracy is the extrapolation.
 */
export interface PlaceSummary {
  /** Training length `Ltrain`. */
  readonly trainLength: number;
  /** Per place value, 0 up to the highest place seen. */
  readonly perPlace: PlaceAccuracy[];
  /** Pooled over places `0..Ltrain-1`. */
  readonly inRange: PlaceRangeAccuracy | null;
  /** Pooled over places `>= Ltrain`: the extrapolation measure. */
  readonly extrapolation: PlaceRangeAccuracy | null;
}

/** Summarise a place tally against the training length. */
export function summarisePlaces(tally: PlaceTally, trainLength: number): PlaceSummary {
  if (!Number.isInteger(trainLength) || trainLength < 1) {
    throw new RangeError(`trainLength must be an integer >= 1, got ${trainLength}`);
  }
  const perPlace = placeAccuracies(tally);
  return {
    trainLength,
    perPlace,
    inRange: placeRangeAccuracy(perPlace, 0, trainLength - 1),
    extrapolation: placeRangeAccuracy(perPlace, trainLength),
  };
}
