import { assertAlmostEquals, assertEquals, assertThrows } from "./_assert.ts";
import {
  accuracyRates,
  addBits,
  addPlaceAccuracy,
  addTeacherForced,
  argmax,
  bitsPerByte,
  emptyAccuracyTally,
  emptyBitsTally,
  emptyPlaceTally,
  groupAccuracies,
  mergePlaceTallies,
  placeAccuracies,
  placeRangeAccuracy,
  rangeAverage,
  summariseAddition,
  summarisePlaces,
} from "./metrics.ts";

/**
 * B = 2 rows, T = 4, V = 3.
 * Row 0: one sequence; scored positions 2 (target 1, logits argmax 1: right) and 3 (target 2, argmax 0: wrong).
 * Row 1: two packed sequences (start at position 2); position 1 (target 0, tie 2 = 2 -> lowest id 0: right),
 *        position 3 (target 2, argmax 2: right).
 * Hand count: 4 tokens, 3 right; 3 sequences, 2 exact (row 1's two).
 */
const PACKED = {
  batch: {
    B: 2,
    T: 4,
    targets: Int32Array.of(0, 0, 1, 2, 0, 0, 0, 2),
    weights: Float32Array.of(0, 0, 1, 1, 0, 1, 0, 1),
    starts: Uint8Array.of(1, 0, 0, 0, 1, 0, 1, 0),
  },
  logits: Float32Array.of(
    ...[9, 0, 0], // row 0, t 0 (not scored: argmax 0 vs target 0 must not count)
    ...[0, 0, 9], // row 0, t 1 (not scored)
    ...[0, 5, 1], // row 0, t 2: argmax 1 = target 1
    ...[3, 1, 2], // row 0, t 3: argmax 0 != target 2
    ...[0, 9, 0], // row 1, t 0 (not scored)
    ...[2, 2, 1], // row 1, t 1: tie -> 0 = target 0
    ...[0, 0, 0], // row 1, t 2 (not scored, sequence start)
    ...[0, 0, 1], // row 1, t 3: argmax 2 = target 2
  ),
};

Deno.test("addTeacherForced() counts scored tokens and exact sequences per packed sequence", () => {
  const tally = emptyAccuracyTally();
  addTeacherForced(tally, PACKED.logits, PACKED.batch, 3);
  assertEquals(tally, { tokens: 4, correctTokens: 3, sequences: 3, exactSequences: 2 });
  const rates = accuracyRates(tally);
  assertEquals(rates.digitAccuracy, 0.75);
  assertAlmostEquals(rates.exactMatch, 2 / 3, 1e-15);
});

Deno.test("addTeacherForced() ignores rows with no scored position (padding) and accumulates", () => {
  const tally = emptyAccuracyTally();
  const padded = {
    B: 1,
    T: 2,
    targets: Int32Array.of(0, 0),
    weights: Float32Array.of(0, 0),
    starts: Uint8Array.of(1, 0),
  };
  addTeacherForced(tally, Float32Array.of(1, 0, 1, 0), padded, 2);
  assertEquals(tally, { tokens: 0, correctTokens: 0, sequences: 0, exactSequences: 0 });
  assertEquals(Number.isNaN(accuracyRates(tally).digitAccuracy), true);
  addTeacherForced(tally, PACKED.logits, PACKED.batch, 3);
  addTeacherForced(tally, PACKED.logits, PACKED.batch, 3);
  assertEquals(tally, { tokens: 8, correctTokens: 6, sequences: 6, exactSequences: 4 });
});

Deno.test("addTeacherForced() rejects logits whose size is not B*T*V", () => {
  assertThrows(
    () => addTeacherForced(emptyAccuracyTally(), new Float32Array(23), PACKED.batch, 3),
    RangeError,
    "logits length 23",
  );
});

Deno.test("addTeacherForced() leaves EOS targets out of digit accuracy but not out of exact match", () => {
  // V = 3, EOS = 2. Sequence A: digits right, EOS wrong. Sequence B: one digit wrong, EOS right.
  const batch = {
    B: 1,
    T: 6,
    targets: Int32Array.of(1, 0, 2, 0, 1, 2),
    weights: Float32Array.of(1, 1, 1, 1, 1, 1),
    starts: Uint8Array.of(1, 0, 0, 1, 0, 0),
  };
  const logits = Float32Array.of(0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1);
  const withEos = emptyAccuracyTally();
  addTeacherForced(withEos, logits, batch, 3, 2);
  // digits: A 2/2, B 1/2 -> 3 of 4; exact: A fails on EOS, B fails on a digit -> 0 of 2
  assertEquals(withEos, { tokens: 4, correctTokens: 3, sequences: 2, exactSequences: 0 });
  const noEos = emptyAccuracyTally();
  addTeacherForced(noEos, logits, batch, 3);
  assertEquals(noEos, { tokens: 6, correctTokens: 4, sequences: 2, exactSequences: 0 });
});

Deno.test("argmax() breaks ties to the lowest id and never picks NaN", () => {
  assertEquals(argmax([1, 3, 3, 2], 0, 4), 1);
  assertEquals(argmax([NaN, 0.5, NaN], 0, 3), 1);
  assertEquals(argmax([-Infinity, -Infinity], 0, 2), 0);
  assertEquals(argmax([7, 7, 0, 1, 5], 2, 3), 2);
});

Deno.test("addBits() sums -log2 p(target): uniform over 4 is 2 bits, [ln 3, 0, 0, 0] on target 0 is 1 bit", () => {
  const tally = emptyBitsTally();
  const batch = {
    B: 1,
    T: 3,
    targets: Int32Array.of(3, 0, 1),
    weights: Float32Array.of(1, 1, 0),
    starts: Uint8Array.of(1, 0, 0),
  };
  const logits = Float64Array.of(0, 0, 0, 0, Math.log(3), 0, 0, 0, 100, 0, 0, 0);
  addBits(tally, logits, batch, 4);
  // position 0: 2 bits; position 1: p = 3 / (3 + 3) = 1/2 -> 1 bit; position 2 is not scored
  assertEquals(tally.tokens, 2);
  assertAlmostEquals(tally.bits, 3, 1e-12);
  assertAlmostEquals(bitsPerByte(tally).bitsPerByte, 1.5, 1e-12);
  assertAlmostEquals(bitsPerByte(tally).perplexity, Math.pow(2, 1.5), 1e-12);
});

Deno.test("summariseAddition() averages per-length rates over 1..Ltrain and above it, each length weighing the same", () => {
  const tallies = new Map([
    [3, { tokens: 4, correctTokens: 1, sequences: 1, exactSequences: 0 }],
    [1, { tokens: 2, correctTokens: 2, sequences: 1, exactSequences: 1 }],
    [2, { tokens: 10, correctTokens: 5, sequences: 4, exactSequences: 1 }],
  ]);
  const summary = summariseAddition(tallies, 2);
  assertEquals(summary.perLength.map((g) => g.key), [1, 2, 3]);
  assertEquals(summary.perLength.map((g) => g.digitAccuracy), [1, 0.5, 0.25]);
  assertEquals(summary.inDistribution, { from: 1, to: 2, groups: 2, digitAccuracy: 0.75, exactMatch: 0.625 });
  assertEquals(summary.extrapolation, { from: 3, to: 3, groups: 1, digitAccuracy: 0.25, exactMatch: 0 });
  assertEquals(summariseAddition(tallies, 3).extrapolation, null);
  assertThrows(() => summariseAddition(tallies, 0), RangeError, "trainLength");
});

Deno.test("rangeAverage() is null when no evaluated group falls in the range", () => {
  const groups = groupAccuracies(
    new Map([[5, { tokens: 1, correctTokens: 1, sequences: 1, exactSequences: 1 }]]),
  );
  assertEquals(rangeAverage(groups, 1, 4), null);
  assertEquals(rangeAverage(groups, 1, 5)?.digitAccuracy, 1);
});

/**
 * B = 1, T = 6, V = 3; two sequences (start at 0 and 3). Positions and what they predict:
 * 0: place 0, target 1, argmax 1 (right)   1: place 1, target 2, argmax 0 (wrong)
 * 2: EOS (place -1, weighted: never counted) 3: place 0, target 0, argmax 0 (right)
 * 4: place 2, target 1, argmax 1 but weight 0 (not scored)  5: place 1, target 2, argmax 2 (right)
 * Hand count: place 0 2/2, place 1 1/2, place 2 0/0.
 */
const PLACED = {
  batch: {
    B: 1,
    T: 6,
    targets: Int32Array.of(1, 2, 2, 0, 1, 2),
    weights: Float32Array.of(1, 1, 1, 1, 0, 1),
    starts: Uint8Array.of(1, 0, 0, 1, 0, 0),
    places: Int16Array.of(0, 1, -1, 0, 2, 1),
  },
  logits: Float32Array.of(0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1),
};

Deno.test("addPlaceAccuracy() counts scored answer digits per place value, skipping place -1 and weight 0", () => {
  const tally = emptyPlaceTally();
  addPlaceAccuracy(tally, PLACED.logits, PLACED.batch, 3);
  // place 2 was only seen at weight 0: it grows no slot
  assertEquals(tally, { total: [2, 2], correct: [2, 1] });
  addPlaceAccuracy(tally, PLACED.logits, PLACED.batch, 3);
  assertEquals(tally, { total: [4, 4], correct: [4, 2] });
  assertEquals(placeAccuracies(tally).map((p) => [p.place, p.tokens, p.digitAccuracy]), [[0, 4, 1], [
    1,
    4,
    0.5,
  ]]);
});

Deno.test("addPlaceAccuracy() names a batch without places or with places of the wrong length", () => {
  const { places: _, ...unplaced } = PLACED.batch;
  assertThrows(
    () => addPlaceAccuracy(emptyPlaceTally(), PLACED.logits, unplaced, 3),
    RangeError,
    "batch.places",
  );
  assertThrows(
    () =>
      addPlaceAccuracy(emptyPlaceTally(), PLACED.logits, { ...PLACED.batch, places: Int16Array.of(0) }, 3),
    RangeError,
    "batch.places length 1 does not match B*T = 6",
  );
});

Deno.test("summarisePlaces() pools digits below and at-or-above the training length, every digit weighing the same", () => {
  // places 0..3: 10/10, 8/10, 1/4, 0/2 right
  const tally = mergePlaceTallies([
    { total: [6, 6, 4], correct: [6, 4, 1] },
    { total: [4, 4, 0, 2], correct: [4, 4, 0, 0] },
  ]);
  assertEquals(tally, { total: [10, 10, 4, 2], correct: [10, 8, 1, 0] });
  const summary = summarisePlaces(tally, 2);
  assertEquals(summary.inRange, { from: 0, to: 1, tokens: 20, digitAccuracy: 0.9 });
  // pooled 1 of 6, not the mean of 1/4 and 0/2
  assertEquals(summary.extrapolation, { from: 2, to: 3, tokens: 6, digitAccuracy: 1 / 6 });
  assertEquals(summarisePlaces(tally, 4).extrapolation, null);
  assertEquals(placeRangeAccuracy(summary.perPlace, 1, 2), {
    from: 1,
    to: 2,
    tokens: 14,
    digitAccuracy: 9 / 14,
  });
  assertThrows(() => summarisePlaces(tally, 0), RangeError, "trainLength must be an integer >= 1, got 0");
});
