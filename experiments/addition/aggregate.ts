/**
 * Summaries over seeds of an addition evaluation: per variant (rule and alignment) the mean and
 * spread of the in-distribution and extrapolation averages and of the accuracy at the longest
 * length, next to the paper's figures (SPEC section 8).
 *
 * @module
 */

import { type GroupAccuracy, rangeAverage } from "../../src/eval/metrics.ts";
import type { CheckpointResult, EvalReport } from "../../src/eval/report.ts";

/** Mean, sample standard deviation (0 for one value) and count; NaN values are skipped. */
export interface MeanSd {
  /** Mean. */
  readonly mean: number;
  /** Sample standard deviation (n - 1 in the denominator); 0 when n = 1, NaN when n = 0. */
  readonly sd: number;
  /** Values used. */
  readonly n: number;
}

/** Mean and sample standard deviation of the finite values. */
export function meanSd(values: readonly number[]): MeanSd {
  const xs = values.filter((v) => Number.isFinite(v));
  const n = xs.length;
  if (n === 0) return { mean: NaN, sd: NaN, n };
  const mean = xs.reduce((s, v) => s + v, 0) / n;
  const sd = n === 1 ? 0 : Math.sqrt(xs.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1));
  return { mean, sd, n };
}

/** The paper's figures (124M-class models, SPEC section 8), as fractions; absent where not given. */
export const PAPER: Readonly<Record<string, { extrapolation?: number; atMax?: number }>> = {
  falcon3a: { extrapolation: 0.872, atMax: 0.69 },
  falcon1a: { extrapolation: 0.859, atMax: 0.69 },
  retnet: { extrapolation: 0.829 },
  mamba2: { extrapolation: 0.752 },
  transformer: { extrapolation: 0.658, atMax: 0.49 },
};

/** One variant's summary over its seeds. */
export interface VariantSummary {
  /**
   * The variant's name on the results page: the experiment's own name for it where it gives one
   * (`transformer`, `transformer-plain`: see `plan.ts`), else the mixer.
   */
  readonly variant: string;
  /** Mixer. */
  readonly mixer: string;
  /** Alignment (`-` for the Transformer). */
  readonly alignment: string;
  /** Seeds found. */
  readonly seeds: number[];
  /** Digit accuracy averaged over 1..Ltrain. */
  readonly inDistribution: MeanSd;
  /** Digit accuracy averaged over the lengths above Ltrain. */
  readonly extrapolation: MeanSd;
  /** Exact match averaged over the lengths above Ltrain. */
  readonly extrapolationExact: MeanSd;
  /** Digit accuracy at the longest evaluated length. */
  readonly atMax: MeanSd;
  /** Digit accuracy pooled over the answer places >= Ltrain (the per-place extrapolation measure). */
  readonly placesBeyond: MeanSd;
  /** Per-length digit accuracy and exact match averaged over seeds (for the plot). */
  readonly perLength: GroupAccuracy[];
  /** The paper's figures, where the paper gives them (Falcon rules: prefix alignment only). */
  readonly paper: { extrapolation?: number; atMax?: number };
}

/** Variant name, mixer and alignment of a checkpoint (`-`: the Transformer has no alignment). */
function variantOf(c: CheckpointResult, names: ReadonlyMap<string, string>) {
  const alignment = c.mixer === "transformer" ? "-" : c.alignment;
  return { variant: names.get(c.path) ?? c.mixer, mixer: c.mixer, alignment };
}

/**
 * Summarise a report's checkpoints per variant, in the order variants first appear. `names` maps
 * a checkpoint path to its variant's own name (checkpoints not in it are grouped by mixer and
 * alignment), so two Transformer variants of one experiment stay apart.
 */
export function summariseVariants(
  report: EvalReport,
  names: ReadonlyMap<string, string> = new Map(),
): VariantSummary[] {
  const byVariant = new Map<
    string,
    { variant: string; mixer: string; alignment: string; runs: CheckpointResult[] }
  >();
  for (const c of report.checkpoints) {
    const id = variantOf(c, names);
    const key = `${id.variant}|${id.mixer}|${id.alignment}`;
    const group = byVariant.get(key) ?? { ...id, runs: [] };
    group.runs.push(c);
    byVariant.set(key, group);
  }
  const maxKey = Math.max(...report.keys);
  return [...byVariant.values()].map(({ variant, mixer, alignment, runs }) => {
    const perLength = report.keys.map((k) => {
      const groups = runs.map((r) => r.groups.find((g) => g.key === k)).filter((g) => g !== undefined);
      return {
        key: k,
        tokens: groups.reduce((s, g) => s + g.tokens, 0),
        sequences: groups.reduce((s, g) => s + g.sequences, 0),
        digitAccuracy: meanSd(groups.map((g) => g.digitAccuracy)).mean,
        exactMatch: meanSd(groups.map((g) => g.exactMatch)).mean,
      };
    });
    const paperRow = PAPER[mixer];
    return {
      variant,
      mixer,
      alignment,
      seeds: runs.map((r) => r.seed ?? NaN),
      inDistribution: meanSd(runs.map((r) => r.inDistribution?.digitAccuracy ?? NaN)),
      extrapolation: meanSd(runs.map((r) => r.extrapolation?.digitAccuracy ?? NaN)),
      extrapolationExact: meanSd(runs.map((r) => r.extrapolation?.exactMatch ?? NaN)),
      atMax: meanSd(runs.map((r) => r.groups.find((g) => g.key === maxKey)?.digitAccuracy ?? NaN)),
      // absent in results stored before the per-place metric: then n = 0 ("-" on the page)
      placesBeyond: meanSd(runs.map((r) => r.places?.extrapolation?.digitAccuracy ?? NaN)),
      perLength,
      paper: paperRow && (mixer === "transformer" || !mixer.startsWith("falcon") || alignment === "prefix")
        ? paperRow
        : {},
    };
  });
}

/** A report with one "checkpoint" per variant holding the seed means (what the experiment plots). */
export function meanReport(report: EvalReport, summaries: readonly VariantSummary[]): EvalReport {
  const trainLength = report.checkpoints[0]?.trainLength ?? null;
  const last = Math.max(...report.keys);
  return {
    ...report,
    checkpoints: summaries.map((s) => ({
      path: "",
      mixer: s.mixer,
      alignment: s.alignment,
      seed: null,
      trainLength,
      label: `${
        s.alignment === "-" || s.variant !== s.mixer ? s.variant : `${s.mixer} ${s.alignment}`
      } (${s.seeds.length} seed${s.seeds.length === 1 ? "" : "s"})`,
      groups: s.perLength,
      inDistribution: trainLength === null ? null : rangeAverage(s.perLength, 1, trainLength),
      extrapolation: trainLength === null || last <= trainLength
        ? null
        : rangeAverage(s.perLength, trainLength + 1, last),
      text: null,
    })),
  };
}
