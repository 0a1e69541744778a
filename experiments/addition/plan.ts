/**
 * The addition length-extrapolation experiment (SPEC section 8, issue 6): which models are trained,
 * on what, for how long, and how they are evaluated. The full plan trains every rule below with the
 * same size, budget and data on operands of up to 32 digits and evaluates all of them on 1..48
 * digits; the smoke plan runs the same code end to end in seconds.
 *
 * @module
 */

import type { ModelConfig } from "../../src/model/types.ts";
import type { Alignment } from "../../src/rules/config.ts";
import type { MixerName } from "../../src/model/types.ts";
import { preset } from "../../src/train/presets.ts";
import { type AdditionConfig, additionConfig, additionExampleLength } from "../../src/tasks/addition.ts";
import type { TrainConfig } from "../../src/train/config.ts";

/**
 * Model fields a variant sets over the plan's: the architecture of the Transformer baseline, and the
 * window of Falcon-3/3A for probes (`variant_probe.ts`).
 */
export type VariantModel = Partial<Pick<ModelConfig, "shortConv" | "qkNorm" | "window">>;

/** One model variant: a mixer, for fast-weight mixers an alignment, and its own model fields. */
export interface Variant {
  /** Mixer of every block. */
  readonly mixer: MixerName;
  /** Pair alignment (ignored by the Transformer). */
  readonly alignment: Alignment;
  /**
   * Name of the variant in run directories and on the results page (default: the mixer, and
   * `mixer-alignment` for run directories of fast-weight mixers).
   */
  readonly name?: string;
  /** Model fields of this variant over the plan's (none: the SPEC section 7 defaults). */
  readonly model?: VariantModel;
}

/**
 * The Transformer as the experiment runs it: RoPE softmax attention with the same short
 * convolution (width 4, SiLU) on q, k, v as the fast-weight mixers and parameter-free QK RMS-norm
 * (issue 15: without them it did not learn what the others learn).
 */
export const TRANSFORMER: Variant = {
  mixer: "transformer",
  alignment: "same-step",
  name: "transformer",
  model: { shortConv: true, qkNorm: "rms" },
};

/** The plain Transformer baseline (no short convolution, no QK norm): in no plan, one variant away. */
export const TRANSFORMER_PLAIN: Variant = {
  mixer: "transformer",
  alignment: "same-step",
  name: "transformer-plain",
  model: { shortConv: false, qkNorm: "none" },
};

/** The full list: the four Falcon rules under both alignments, the baselines, the Transformer. */
export const FULL_VARIANTS: readonly Variant[] = [
  ...(["falcon1", "falcon1a", "falcon3a", "falcon3"] as const).map((mixer) => ({
    mixer,
    alignment: "prefix" as const,
  })),
  ...(["falcon1", "falcon1a", "falcon3a", "falcon3"] as const).map((mixer) => ({
    mixer,
    alignment: "same-step" as const,
  })),
  ...(["deltanet", "gated_deltanet", "mamba2", "retnet", "linear"] as const).map((mixer) => ({
    mixer,
    alignment: "same-step" as const,
  })),
  TRANSFORMER,
];

/**
 * `base` with a Falcon-3/3A window of `window` pairs, named for it (`falcon3a-prefix` with window 2 is
 * `falcon3a-prefix-w2`): the same variant `variant_probe.ts --window` trains, so a probe's stored result
 * is a plan run's.
 */
export function windowVariant(base: Variant, window: number): Variant {
  return { ...base, name: `${variantName(base)}-w${window}`, model: { ...base.model, window } };
}

/**
 * The `gpu` plan's list: {@linkcode FULL_VARIANTS} with Falcon-3A at a window of 2 pairs. At the
 * default window of 4, falcon3a under prefix alignment never learned answer place 0 in 2 of 3 seeds
 * (90.3% and 90.4%, also with 4500 steps), while at a window of 2 seeds 0 and 2 reached 99.9% and
 * 100% (docs/results/addition.md, 2026-12-02); Falcon-3 keeps the window of 4 (3 of 3 seeds learned).
 */
export const GPU_VARIANTS: readonly Variant[] = FULL_VARIANTS.map((v) =>
  v.mixer === "falcon3a" ? windowVariant(v, 2) : v
);

/** The smoke list: one Falcon rule and the Transformer. */
export const SMOKE_VARIANTS: readonly Variant[] = [
  { mixer: "falcon1a", alignment: "prefix" },
  TRANSFORMER,
];

/** Everything the driver needs to run the experiment. */
export interface Plan {
  /** Which plan ({@linkcode PLAN_NAMES}). */
  readonly name: PlanName;
  /** Variants trained. */
  readonly variants: readonly Variant[];
  /** Training seeds of every variant. */
  readonly seeds: readonly number[];
  /** Model fields shared by every variant (size). */
  readonly model: Partial<ModelConfig>;
  /** Hyperparameters shared by every run (the seed is set per run). */
  readonly train: Partial<TrainConfig>;
  /** Largest training operand length `Ltrain`. */
  readonly maxDigits: number;
  /**
   * Addition format options of every run (operand and answer order, BOS, index hints, equal
   * lengths, curriculum; SPEC section 8); `maxDigits` is the field above. Empty: the default format.
   */
  readonly task: AdditionPlanOptions;
  /** Evaluated operand lengths. */
  readonly lengths: readonly number[];
  /** Test sequences per length. */
  readonly samples: number;
  /** Seed of the test sets. */
  readonly evalSeed: number;
}

/** The addition format options a plan may set. */
export type AdditionPlanOptions = Partial<Omit<AdditionConfig, "task" | "maxDigits">>;

/** Overrides from the command line. */
export interface PlanOverrides {
  /** Optimizer steps of every run. */
  readonly steps?: number;
  /** Number of seeds (seeds 0..n-1). */
  readonly seeds?: number;
  /** Test sequences per length. */
  readonly samples?: number;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/**
 * Plan names: `full` (the paper's data at a size the budget allows), `gpu` (the same data in the
 * format a recurrent model can learn, sized for the GPU machine), `paper` (the paper's size too),
 * `lab` (3-digit training, fast), `smoke` (seconds).
 */
export const PLAN_NAMES = ["full", "gpu", "paper", "lab", "smoke"] as const;

/** A plan name. */
export type PlanName = typeof PLAN_NAMES[number];

/**
 * The addition format of the `gpu` plan (SPEC section 8.1's leads): operands written units first like
 * the answer (so place i of both operands and of the sum come in the same order), a BOS token (under
 * prefix alignment the first step writes nothing), index hints before every digit (64 ids: the
 * offsets seen in training, 0..31, cover the places 32..47 evaluation asks for, so a place beyond the
 * training length has a hint id the model has met), and a length curriculum from 8 digits to 32 over
 * the first 30% of the steps (without it the loss stayed flat for millions of tokens at L = 32).
 */
export const GPU_PLAN_FORMAT: AdditionPlanOptions = {
  operandOrder: "lsd",
  format: "lsd",
  bos: true,
  indexHints: 64,
  curriculum: { startDigits: 8, fraction: 0.3 },
};

/** What distinguishes the plans; everything else is shared. */
const PLANS: Record<PlanName, {
  preset: "addition" | "lab" | "tiny";
  model?: Partial<ModelConfig>;
  train?: Partial<TrainConfig>;
  variants: readonly Variant[];
  seeds: number;
  steps?: number;
  seqLen?: number;
  maxDigits: number;
  task?: AdditionPlanOptions;
  maxLength: number;
  samples: number;
}> = {
  // SPEC section 8's data (Ltrain 32, lengths 1..48) at the size that fits the issue's budget: the
  // `lab` model (2 layers, width 64), rows of 128 tokens (a 32-digit sample is about 100), 800 steps.
  // 42 runs x (about 140 s training + 20 s evaluation on one core): about 7 minutes with
  // `--jobs 16` on 16 cores, about an hour with `--jobs 2` on 2.
  full: {
    preset: "lab",
    variants: FULL_VARIANTS,
    seeds: 3,
    steps: 800,
    seqLen: 128,
    maxDigits: 32,
    maxLength: 48,
    samples: 100,
  },
  // SPEC section 8's data in the learnable format (GPU_PLAN_FORMAT) on the GPU machine: a 2-layer,
  // 128-wide model (4 heads of 32), 32 rows of ~200 tokens per step (one 32-digit example with BOS and
  // hints is 198 tokens), 3000 steps = 19M tokens per run (the probes needed 15-30M)
  gpu: {
    preset: "lab",
    model: { dModel: 128, heads: 4, ffnHidden: 256, chunkSize: 64 },
    train: { batchSize: 32, lr: 3e-3, warmupSteps: 200 },
    variants: GPU_VARIANTS,
    seeds: 3,
    steps: 3000,
    maxDigits: 32,
    task: GPU_PLAN_FORMAT,
    maxLength: 48,
    samples: 100,
  },
  // the paper-scale model (the `addition` preset: 4 layers, width 256, 20000 steps) on the same data:
  // for a machine much faster than the ones this project has (not run here)
  paper: {
    preset: "addition",
    variants: FULL_VARIANTS,
    seeds: 3,
    maxDigits: 32,
    maxLength: 48,
    samples: 200,
  },
  // every variant and seed at the size 2 CPU cores finish in well under the 2-hour budget: the
  // `lab` preset (2 layers, width 64, 1000 steps), Ltrain 3, lengths 1..8 (extrapolation to 8 digits)
  lab: { preset: "lab", variants: FULL_VARIANTS, seeds: 3, maxDigits: 3, maxLength: 8, samples: 200 },
  // the code path end to end in seconds; not a result
  smoke: {
    preset: "tiny",
    variants: SMOKE_VARIANTS,
    seeds: 1,
    steps: 12,
    maxDigits: 3,
    maxLength: 6,
    samples: 16,
  },
};

/**
 * The plan of a name with command-line overrides. Warmup is the preset's, capped at a tenth of the
 * steps (so a shortened run still reaches its peak learning rate); checkpoints are written only at
 * the end of each run.
 */
export function makePlan(name: PlanName, overrides: PlanOverrides = {}): Plan {
  for (const [key, value] of Object.entries(overrides)) {
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      throw new RangeError(`--${key} must be an integer >= 1, got ${value}`);
    }
  }
  if (!(PLAN_NAMES as readonly string[]).includes(name)) {
    throw new RangeError(`unknown plan "${name}"; expected one of ${PLAN_NAMES.join(", ")}`);
  }
  const spec = PLANS[name];
  const p = preset(spec.preset);
  const steps = overrides.steps ?? spec.steps ?? p.train.steps ?? 1;
  const task = spec.task ?? {};
  const longest = additionExampleLength(additionConfig({ ...task, maxDigits: spec.maxDigits }));
  return {
    name,
    variants: spec.variants,
    seeds: range(0, (overrides.seeds ?? spec.seeds) - 1),
    model: { ...p.model, ...spec.model },
    train: {
      ...p.train,
      ...spec.train,
      steps,
      seqLen: Math.max(spec.seqLen ?? p.train.seqLen ?? 0, longest),
      warmupSteps: Math.min(spec.train?.warmupSteps ?? p.train.warmupSteps ?? 0, Math.floor(steps / 10)),
      checkpointEvery: 0,
    },
    maxDigits: spec.maxDigits,
    task,
    lengths: range(1, spec.maxLength),
    samples: overrides.samples ?? spec.samples,
    evalSeed: 1234,
  };
}

/** A variant's name in run directories: its own name, else `transformer` or `falcon1a-prefix`. */
export function variantName(variant: Variant): string {
  return variant.name ??
    (variant.mixer === "transformer" ? variant.mixer : `${variant.mixer}-${variant.alignment}`);
}

/** Directory name of one run: `falcon1a-prefix-s0`, `transformer-s2`, `transformer-plain-s0`. */
export function runName(variant: Variant, seed: number): string {
  return `${variantName(variant)}-s${seed}`;
}

/**
 * What a variant with its own model fields runs, in words: `transformer: RoPE softmax attention
 * with the short convolution (width 4, SiLU) on q, k, v and QK RMS-norm (shortConv true, qkNorm rms)`.
 * Null for a variant without them (SPEC defaults).
 */
export function describeVariant(variant: Variant): string | null {
  if (!variant.model) return null;
  const { shortConv, qkNorm, window } = variant.model;
  const parts = [
    shortConv === undefined
      ? null
      : shortConv
      ? "the short convolution (width 4, SiLU) on q, k, v"
      : "no short convolution",
    qkNorm === undefined
      ? null
      : qkNorm === "none"
      ? "no QK norm"
      : `QK ${qkNorm === "rms" ? "RMS" : "L2"}-norm`,
    window === undefined ? null : `a window of ${window} pair${window === 1 ? "" : "s"}`,
  ].filter((p) => p !== null);
  const what = variant.mixer === "transformer" ? "RoPE softmax attention" : variant.mixer;
  const plain = variant.mixer === "transformer" && shortConv === false && qkNorm === "none"
    ? " (the plain Transformer)"
    : "";
  const fields = Object.entries(variant.model).map(([k, v]) => `${k} ${v}`).join(", ");
  return `${variantName(variant)}: ${what} with ${parts.join(" and ")}${plain} (${fields})`;
}
