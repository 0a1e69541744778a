/**
 * Small hand-made {@linkcode EvalReport}s shared by the report, table, CSV and plot tests.
 *
 * @module
 */

import type { PlacedAccuracyTally } from "./evaluate.ts";
import type { EvalReport } from "./report.ts";
import { accuracyResult, additionResult, uniqueLabels } from "./report.ts";
import type { AccuracyTally } from "./metrics.ts";

function tallies(rows: [number, number, number, number, number][]): Map<number, AccuracyTally> {
  return new Map(rows.map(([k, tokens, correctTokens, sequences, exactSequences]) => [k, {
    tokens,
    correctTokens,
    sequences,
    exactSequences,
  }]));
}

/** Two addition checkpoints (trained on 2 digits) over lengths 1..4. */
export function fixtureReport(): EvalReport {
  const metas = [
    { path: "a.safetensors", mixer: "falcon1a", alignment: "prefix", seed: 0, trainLength: 2 },
    { path: "b.safetensors", mixer: "transformer", alignment: "same-step", seed: 1, trainLength: 2 },
  ];
  const labels = uniqueLabels(metas);
  return {
    task: "addition",
    keyName: "length",
    keys: [1, 2, 3, 4],
    samples: 4,
    seed: 7,
    date: "2026-11-29T00:00:00.000Z",
    checkpoints: [
      accuracyResult(
        metas[0],
        labels[0],
        tallies([[1, 8, 8, 4, 4], [2, 12, 9, 4, 2], [3, 16, 8, 4, 1], [4, 20, 5, 4, 0]]),
      ),
      accuracyResult(
        metas[1],
        labels[1],
        tallies([[1, 8, 6, 4, 2], [2, 12, 6, 4, 1], [3, 16, 4, 4, 0], [4, 20, 2, 4, 0]]),
      ),
    ],
  };
}

/** One length's tally: `[tokens, correct, sequences, exact]` and the per-place totals and right counts. */
type PlacedRow = [number, number, number, number, number[], number[]];

function placedTallies(rows: PlacedRow[]): Map<number, PlacedAccuracyTally> {
  return new Map(rows.map(([tokens, correctTokens, sequences, exactSequences, total, correct], i) => [i + 1, {
    tokens,
    correctTokens,
    sequences,
    exactSequences,
    places: { total, correct },
  }]));
}

/**
 * Two addition checkpoints with per-place tallies over lengths 1..4, trained on 2 and 3 digits
 * (two sums per length). Merged places: A right 7/8, 6/8, 1/6, 0/2; B right 8/8, 7/8, 4/6, 0/2.
 */
export function placedFixtureReport(): EvalReport {
  const metas = [
    { path: "a.safetensors", mixer: "falcon1a", alignment: "prefix", seed: 0, trainLength: 2 },
    { path: "b.safetensors", mixer: "falcon3a", alignment: "prefix", seed: 0, trainLength: 3 },
  ];
  const labels = uniqueLabels(metas);
  return {
    task: "addition",
    keyName: "length",
    keys: [1, 2, 3, 4],
    samples: 2,
    seed: 7,
    date: "2026-12-01T00:00:00.000Z",
    checkpoints: [
      additionResult(
        metas[0],
        labels[0],
        placedTallies([
          [4, 4, 2, 2, [2, 2], [2, 2]],
          [6, 5, 2, 1, [2, 2, 2], [2, 2, 1]],
          [6, 3, 2, 0, [2, 2, 2], [2, 1, 0]],
          [8, 2, 2, 0, [2, 2, 2, 2], [1, 1, 0, 0]],
        ]),
      ),
      additionResult(
        metas[1],
        labels[1],
        placedTallies([
          [4, 4, 2, 2, [2, 2], [2, 2]],
          [6, 6, 2, 2, [2, 2, 2], [2, 2, 2]],
          [6, 5, 2, 1, [2, 2, 2], [2, 2, 1]],
          [8, 4, 2, 0, [2, 2, 2, 2], [2, 1, 1, 0]],
        ]),
      ),
    ],
  };
}
