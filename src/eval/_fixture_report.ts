/**
 * A small hand-made {@linkcode EvalReport} shared by the report, table, CSV and plot tests.
 *
 * @module
 */

import type { EvalReport } from "./report.ts";
import { accuracyResult, uniqueLabels } from "./report.ts";
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
