/**
 * The evaluation report: one result per checkpoint over the same test groups, and its JSON form.
 * The terminal table, CSV and plot are rendered from this one structure.
 *
 * @module
 */

import type { PlacedAccuracyTally } from "./evaluate.ts";
import {
  type AccuracyTally,
  bitsPerByte,
  type BitsTally,
  groupAccuracies,
  type GroupAccuracy,
  mergePlaceTallies,
  type PlaceSummary,
  type RangeAverage,
  rangeAverage,
  summarisePlaces,
} from "./metrics.ts";
import { type NoExtrapolationReference, noExtrapolationReference } from "./reference.ts";

/** Tasks `falcon eval` knows. */
export const EVAL_TASKS = ["addition", "mqar", "text"] as const;

/** An evaluation task. */
export type EvalTask = typeof EVAL_TASKS[number];

/** What identifies a checkpoint in tables and plots. */
export interface CheckpointMeta {
  /** Where it was read from. */
  readonly path: string;
  /** Mixer (rule) of its model. */
  readonly mixer: string;
  /** Pair alignment of its model. */
  readonly alignment: string;
  /** Training seed, when the checkpoint records one. */
  readonly seed: number | null;
  /** Training length `Ltrain` (addition: max operand digits; mqar: max pairs), when the task has one. */
  readonly trainLength: number | null;
  /** A name the user gave it (`falcon eval --label`), used as its column label. */
  readonly label?: string;
}

/** One checkpoint's results. */
export interface CheckpointResult extends CheckpointMeta {
  /** Column label: rule, alignment and seed (made unique within a report). */
  readonly label: string;
  /** Per test group (addition, mqar); empty for text. */
  readonly groups: GroupAccuracy[];
  /** Mean over groups with key <= trainLength. */
  readonly inDistribution: RangeAverage | null;
  /** Mean over groups with key > trainLength. */
  readonly extrapolation: RangeAverage | null;
  /** Text task: bits per byte, byte perplexity and scored bytes. */
  readonly text: { bitsPerByte: number; perplexity: number; bytes: number } | null;
  /**
   * Addition: digit accuracy per place value over every test sum, pooled below and at-or-above the
   * training length (the latter is the extrapolation measure). Absent or null for other tasks (and
   * in reports written before it existed).
   */
  readonly places?: PlaceSummary | null;
  /**
   * Addition: the no-extrapolation reference at this checkpoint's training length over the same
   * lengths (`reference.ts`: analytic, in expectation). Absent or null for other tasks.
   */
  readonly reference?: NoExtrapolationReference | null;
}

/** A whole evaluation. */
export interface EvalReport {
  /** Task evaluated. */
  readonly task: EvalTask;
  /** What a group key means: `length` (addition operand digits), `pairs` (mqar), `file` (text). */
  readonly keyName: "length" | "pairs" | "file";
  /** Group keys evaluated, in order. */
  readonly keys: number[];
  /** Sequences per group. */
  readonly samples: number;
  /** Base seed of the test sets. */
  readonly seed: number;
  /** Addition with index hints evaluated at a non-zero hint offset (absent: offset 0). */
  readonly hintOffset?: number;
  /** ISO date of the run. */
  readonly date: string;
  /** Per checkpoint, in the order given. */
  readonly checkpoints: CheckpointResult[];
}

/**
 * `falcon1a prefix s0`: rule, alignment and seed (`s?` when unknown). The Transformer has no fast
 * state, so no alignment: `transformer s0`. A label the user gave (`meta.label`) is used as it is.
 */
export function checkpointLabel(meta: CheckpointMeta): string {
  if (meta.label !== undefined) return meta.label;
  const seed = `s${meta.seed ?? "?"}`;
  return meta.mixer === "transformer" ? `${meta.mixer} ${seed}` : `${meta.mixer} ${meta.alignment} ${seed}`;
}

/** Labels for a list of checkpoints, suffixed `#2`, `#3`... where two would otherwise coincide. */
export function uniqueLabels(metas: readonly CheckpointMeta[]): string[] {
  const counts = new Map<string, number>();
  return metas.map((meta) => {
    const base = checkpointLabel(meta);
    const n = (counts.get(base) ?? 0) + 1;
    counts.set(base, n);
    return n === 1 ? base : `${base} #${n}`;
  });
}

/** Result of an accuracy task (addition or mqar) from its tallies per group key. */
export function accuracyResult(
  meta: CheckpointMeta,
  label: string,
  tallies: ReadonlyMap<number, AccuracyTally>,
): CheckpointResult {
  const groups = groupAccuracies(tallies);
  const last = groups.length > 0 ? groups[groups.length - 1].key : 0;
  const first = groups.length > 0 ? groups[0].key : 0;
  const L = meta.trainLength;
  return {
    ...meta,
    label,
    groups,
    inDistribution: L === null ? rangeAverage(groups, first, last) : rangeAverage(groups, first, L),
    extrapolation: L === null || last <= L ? null : rangeAverage(groups, L + 1, last),
    text: null,
  };
}

/**
 * Result of an addition evaluation: {@linkcode accuracyResult}'s per-length rates and means, plus
 * the per-place summary (the place tallies of every length summed, split at the training length)
 * and the no-extrapolation reference for the evaluated lengths. Without a training length both are
 * null.
 */
export function additionResult(
  meta: CheckpointMeta,
  label: string,
  tallies: ReadonlyMap<number, PlacedAccuracyTally>,
): CheckpointResult {
  const L = meta.trainLength;
  const places = mergePlaceTallies([...tallies.values()].map((t) => t.places));
  return {
    ...accuracyResult(meta, label, tallies),
    places: L === null ? null : summarisePlaces(places, L),
    reference: L === null ? null : noExtrapolationReference(L, [...tallies.keys()]),
  };
}

/** Result of the text task from its bits tally. */
export function textResult(meta: CheckpointMeta, label: string, tally: BitsTally): CheckpointResult {
  return {
    ...meta,
    label,
    groups: [],
    inDistribution: null,
    extrapolation: null,
    text: { ...bitsPerByte(tally), bytes: tally.tokens },
  };
}

/** The report as pretty JSON (NaN and infinities become null). */
export function reportJson(report: EvalReport): string {
  return jsonWithNulls(report, 2);
}

/** `value` as JSON text ending in a newline, with NaN and infinities written as null (JSON has neither). */
export function jsonWithNulls(value: unknown, indent?: number): string {
  return JSON.stringify(
    value,
    (_key, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v),
    indent,
  ) +
    "\n";
}

/**
 * One report from several evaluations of the same test sets (same task, keys, samples and seed),
 * e.g. checkpoints evaluated in separate processes: the checkpoint columns in the order given,
 * relabelled so labels stay unique; the date is the first report's. Throws a RangeError naming the
 * field where two reports differ.
 */
export function mergeReports(reports: readonly EvalReport[]): EvalReport {
  if (reports.length === 0) throw new RangeError("mergeReports: no report to merge");
  const first = reports[0];
  for (const [i, r] of reports.entries()) {
    for (const field of ["task", "keyName", "samples", "seed"] as const) {
      if (r[field] !== first[field]) {
        throw new RangeError(
          `mergeReports: report ${i} has ${field} ${JSON.stringify(r[field])}, report 0 has ${
            JSON.stringify(first[field])
          }`,
        );
      }
    }
    if (r.keys.join(",") !== first.keys.join(",")) {
      throw new RangeError(`mergeReports: report ${i} has keys [${r.keys}], report 0 has [${first.keys}]`);
    }
  }
  const columns = reports.flatMap((r) => r.checkpoints);
  const labels = uniqueLabels(columns);
  return { ...first, checkpoints: columns.map((c, i) => ({ ...c, label: labels[i] })) };
}
