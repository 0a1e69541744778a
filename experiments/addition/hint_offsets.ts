/**
 * The hint-offset check of the addition experiment (docs/results/addition.md, "Two runs fall
 * short"): evaluates checkpoints on the plan's test sums with the index hints starting at several
 * hint ids, and prints per offset the accuracy of answer places 0..3, of places < and >= the training
 * length, and the digit accuracy over 1-L. A model that never learned the rarest hint ids (0, 1) is
 * right at places 0-1 once the offset moves them to ids it knows; a model that cannot read the first
 * answer place stays at chance there whatever the offset.
 *
 * Imports nothing from npm (runs on the GPU machine beside `run_one.ts`):
 *
 * ```
 * deno run --allow-read --allow-write experiments/addition/hint_offsets.ts --offsets 0,1,2,4 \
 *   [--lengths 1-32] [--samples 100] [--seed 1234] [--backend webgpu] [--out FILE.json] CHECKPOINT...
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { backendChoice, releaseBackend, selectBackend } from "../../backend_select.ts";
import { loadEvalCheckpoint } from "../../src/eval/load.ts";
import type { EvalReport } from "../../src/eval/report.ts";
import { evaluateCheckpoints } from "../../src/eval/run.ts";
import { parseLengths } from "../../src/eval/lengths.ts";

/** One checkpoint at one hint offset: the figures the check compares. */
export interface OffsetRow {
  /** The checkpoint's label (rule, alignment, seed). */
  readonly label: string;
  /** Hint id of answer place 0. */
  readonly offset: number;
  /** Digit accuracy of answer places 0..3 over every test sum. */
  readonly firstPlaces: readonly number[];
  /** Digit accuracy of places below the training length, over every test sum. */
  readonly belowTrainLength: number;
  /** Digit accuracy of places at or beyond the training length (null when no length reaches them). */
  readonly beyondTrainLength: number | null;
  /** Teacher-forced digit accuracy averaged over the lengths 1..L (every length weighs the same). */
  readonly inDistribution: number | null;
}

/** The rows of one report (one offset), one per checkpoint. */
export function offsetRows(report: EvalReport, offset: number): OffsetRow[] {
  return report.checkpoints.map((c) => {
    const perPlace = c.places?.perPlace ?? [];
    return {
      label: c.label,
      offset,
      firstPlaces: [0, 1, 2, 3].map((p) => perPlace.find((x) => x.place === p)?.digitAccuracy ?? NaN),
      belowTrainLength: c.places?.inRange?.digitAccuracy ?? NaN,
      beyondTrainLength: c.places?.extrapolation?.digitAccuracy ?? null,
      inDistribution: c.inDistribution?.digitAccuracy ?? null,
    };
  });
}

function percent(x: number | null): string {
  return x === null || Number.isNaN(x) ? "-" : (100 * x).toFixed(1);
}

/** A plain-text table of the rows. */
export function formatOffsetRows(rows: readonly OffsetRow[]): string {
  const head = "checkpoint | offset | place 0 | place 1 | place 2 | place 3 | places < L | places >= L | 1-L";
  const lines = rows.map((r) =>
    [r.label, String(r.offset), ...r.firstPlaces.map(percent), percent(r.belowTrainLength)].join(" | ") +
    ` | ${percent(r.beyondTrainLength)} | ${percent(r.inDistribution)}`
  );
  return [head, ...lines].join("\n") + "\n";
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    options: {
      offsets: { type: "string", default: "0,1,2" },
      lengths: { type: "string", default: "1-48" },
      samples: { type: "string", default: "100" },
      seed: { type: "string", default: "1234" },
      backend: { type: "string", default: "auto" },
      out: { type: "string" },
    },
    allowPositionals: true,
    strict: true,
  });
  try {
    if (positionals.length === 0) throw new RangeError("give one or more checkpoints");
    const backendName = backendChoice(values.backend);
    const offsets = values.offsets.split(",").map((s) => {
      if (!/^\d+$/.test(s)) throw new RangeError(`--offsets: "${s}" is not an integer >= 0`);
      return Number(s);
    });
    for (const [name, value] of [["samples", values.samples], ["seed", values.seed]] as const) {
      if (!/^\d+$/.test(value)) throw new RangeError(`--${name} must be an integer >= 0, got "${value}"`);
    }
    const keys = parseLengths(values.lengths);
    const backend = await selectBackend(backendName);
    try {
      const checkpoints = [];
      for (const path of positionals) checkpoints.push(await loadEvalCheckpoint(path, backend));
      const rows: OffsetRow[] = [];
      for (const hintOffset of offsets) {
        const report = await evaluateCheckpoints(checkpoints, {
          task: "addition",
          keys,
          samples: Number(values.samples),
          seed: Number(values.seed),
          batchSize: 32,
          hintOffset,
        });
        rows.push(...offsetRows(report, hintOffset));
        console.error(`offset ${hintOffset} done`);
      }
      console.log(formatOffsetRows(rows).trimEnd());
      if (values.out) await Deno.writeTextFile(values.out, JSON.stringify(rows, null, 2) + "\n");
    } finally {
      releaseBackend(backend);
    }
  } catch (err) {
    console.error(`hint_offsets: ${err instanceof Error ? err.message : err}`);
    Deno.exit(2);
  }
}
