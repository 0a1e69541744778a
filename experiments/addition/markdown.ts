/**
 * The results page of the addition experiment (`docs/results/addition-PLAN.md`).
 *
 * @module
 */

import { noExtrapolationReference } from "../../src/eval/reference.ts";
import type { MeanSd, VariantSummary } from "./aggregate.ts";
import { describeVariant, type Plan } from "./plan.ts";

/** What one training run did. */
export interface RunRecord {
  /** Run directory name (e.g. `falcon1a-prefix-s0`). */
  readonly name: string;
  /** Mixer. */
  readonly mixer: string;
  /** Alignment. */
  readonly alignment: string;
  /** Training seed. */
  readonly seed: number;
  /** Steps trained. */
  readonly steps: number;
  /** Mean loss of the last step. */
  readonly finalLoss: number;
  /** Training wall time, seconds. */
  readonly wallSeconds: number;
  /** Trainable scalars. */
  readonly parameterCount: number;
}

/** The context printed at the top of the page. */
export interface ExperimentInfo {
  /** Command line that produced the page. */
  readonly command: string;
  /** ISO date of the run. */
  readonly date: string;
  /** Backend name. */
  readonly backend: string;
  /** The plan. */
  readonly plan: Plan;
  /** Wall time of this driver call, seconds. */
  readonly wallSeconds: number;
  /** Runs whose stored result this call reused instead of training (from an earlier, interrupted call). */
  readonly reusedRuns?: number;
  /** Runs of the plan with no result yet (a page written with `--stored-only` before the plan finished). */
  readonly missingRuns?: readonly string[];
  /** Every training run. */
  readonly runs: readonly RunRecord[];
  /** File name of the plot, relative to the page. */
  readonly plotFile: string;
  /** File name of the JSON, relative to the page. */
  readonly jsonFile: string;
}

/** `85.9 ± 1.2` (percent, one decimal; the spread is omitted for one seed). */
export function formatMeanSd(m: MeanSd): string {
  if (m.n === 0) return "-";
  const mean = (100 * m.mean).toFixed(1);
  return m.n === 1 ? mean : `${mean} ± ${(100 * m.sd).toFixed(1)}`;
}

/** The paper's setting (SPEC section 8): trained on 32 digits, evaluated on 1..48. */
const PAPER_TRAIN_LENGTH = 32;
const PAPER_LENGTHS = Array.from({ length: 48 }, (_, i) => i + 1);

function paperCell(v: number | undefined): string {
  return v === undefined ? "" : (100 * v).toFixed(1);
}

function duration(seconds: number): string {
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(2)} h`;
}

/** Render the results page. */
export function renderMarkdown(info: ExperimentInfo, summaries: readonly VariantSummary[]): string {
  const { plan } = info;
  const L = plan.maxDigits;
  const last = plan.lengths[plan.lengths.length - 1];
  const first = plan.lengths[0];
  const m = plan.model;
  const t = plan.train;
  const lines: string[] = [];
  lines.push(`# Addition length extrapolation${plan.name === "smoke" ? " (SMOKE RUN: not a result)" : ""}`);
  lines.push("");
  if (plan.name === "smoke") {
    lines.push(
      "> This page comes from the `--smoke` plan: a tiny model, a few steps, one seed. It shows that the",
      "> pipeline runs end to end; its numbers say nothing about the rules.",
      "",
    );
  }
  lines.push(`- Command: \`${info.command}\``);
  lines.push(
    `- Date: ${info.date}; backend: ${info.backend}; ` +
      (info.reusedRuns
        ? `wall time of this call: ${
          duration(info.wallSeconds)
        } (${info.reusedRuns} of ${info.runs.length} ` +
          `runs were reused from an earlier call; each run's own training time is in the table below)`
        : `total wall time: ${duration(info.wallSeconds)}`),
  );
  if (info.missingRuns && info.missingRuns.length > 0) {
    lines.push(
      `- **Partial:** ${info.missingRuns.length} of the plan's ${
        info.runs.length + info.missingRuns.length
      } runs have no result yet (${info.missingRuns.join(", ")}); the summary covers the runs below only.`,
    );
  }
  lines.push(
    `- Model (every variant): ${m.layers} layers, width ${m.dModel}, ${m.heads} heads, chunk ${m.chunkSize}` +
      (m.ffnHidden ? `, MLP ${m.ffnHidden}` : "") + "; SPEC section 7 defaults otherwise.",
  );
  for (const v of plan.variants) {
    const described = describeVariant(v);
    if (described) lines.push(`- Variant ${described}.`);
  }
  lines.push(
    `- Training (every run): ${t.steps} steps, batch ${t.batchSize} rows x ${t.seqLen} tokens (packed), ` +
      `lr ${t.lr} (warmup ${t.warmupSteps}, cosine to ${t.minLrRatio} x), weight decay ${t.weightDecay}, ` +
      `clip ${t.clipNorm}; operands of 1..${L} digits (lsd answers); seeds ${plan.seeds.join(", ")}.`,
  );
  lines.push(
    `- Evaluation: operand lengths ${first}..${last}, both operands of exactly that length, ${plan.samples} ` +
      `sums per length, test-set seed ${plan.evalSeed}; every checkpoint sees the same sums.`,
  );
  lines.push(
    "- Metric: teacher-forced digit accuracy (argmax at each answer digit given the true prefix; EOS not counted), " +
      "averaged with every length weighing the same; exact match needs every answer token, EOS included.",
  );
  lines.push("");
  lines.push("## Summary (mean ± sample standard deviation over seeds, %)");
  lines.push("");
  lines.push(
    `| rule | alignment | seeds | digit acc ${first}-${L} | digit acc ${
      L + 1
    }-${last} | digit acc at ${last} | ` +
      `exact match ${L + 1}-${last} | paper 33-48 | paper at 48 | digit acc places >= ${L} |`,
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|");
  for (const s of summaries) {
    lines.push(
      `| ${s.variant} | ${s.alignment} | ${s.seeds.length} | ${formatMeanSd(s.inDistribution)} | ` +
        `${formatMeanSd(s.extrapolation)} | ${formatMeanSd(s.atMax)} | ${
          formatMeanSd(s.extrapolationExact)
        } | ` +
        `${paperCell(s.paper.extrapolation)} | ${paperCell(s.paper.atMax)} | ${
          formatMeanSd(s.placesBeyond)
        } |`,
    );
  }
  const ref = noExtrapolationReference(L, plan.lengths);
  const paperRef = noExtrapolationReference(PAPER_TRAIN_LENGTH, PAPER_LENGTHS);
  const refAt = (r: typeof ref, length: number) => r.perLength.find((g) => g.key === length)?.digitAccuracy;
  const one = (v: number | undefined) => formatMeanSd({ mean: v ?? NaN, sd: 0, n: v === undefined ? 0 : 1 });
  lines.push(
    `| no extrapolation (reference) | - | - | ${one(ref.inDistribution?.digitAccuracy)} | ` +
      `${one(ref.extrapolation?.digitAccuracy)} | ${one(refAt(ref, last))} | ${
        one(ref.extrapolation?.exactMatch)
      } | ` +
      `${paperCell(paperRef.extrapolation?.digitAccuracy)} | ${paperCell(refAt(paperRef, 48))} | 10.0 |`,
  );
  lines.push("");
  lines.push(
    "Paper figures (SPEC section 8): 124M-class models trained on 32 digits, average over 33-48 digits and at 48 " +
      "digits; they compare the shape of the result (ranking, fall-off past the training length), not the level.",
  );
  lines.push("");
  lines.push(
    `No extrapolation (reference): the expected score of a model right on every answer place < ${L} and guessing ` +
      "(10%) beyond, in expectation over the test sets' sums (src/eval/reference.ts); in the paper columns, the same " +
      `model at the paper's setting (trained on ${PAPER_TRAIN_LENGTH} digits). A length average above it needs ` +
      `digits beyond the training length; the last column pools the answer digits of places >= ${L} over every ` +
      "test sum, where that reference scores 10%.",
  );
  lines.push("");
  lines.push(`![digit accuracy by operand length, seed means](${info.plotFile})`);
  lines.push("");
  lines.push(`Per-length numbers of every checkpoint: [${info.jsonFile}](${info.jsonFile}).`);
  lines.push("");
  lines.push("## Training runs");
  lines.push("");
  lines.push("| run | parameters | steps | final loss | wall time |");
  lines.push("|---|---|---|---|---|");
  for (const r of info.runs) {
    lines.push(
      `| ${r.name} | ${r.parameterCount} | ${r.steps} | ${r.finalLoss.toFixed(4)} | ${
        duration(r.wallSeconds)
      } |`,
    );
  }
  return lines.join("\n") + "\n";
}
