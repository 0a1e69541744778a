/**
 * Named run presets: model size, task sizes and hyperparameters. CLI flags override single fields.
 *
 * - `tiny`: a 2-layer, 32-wide model (24k parameters with falcon1) on addition of up to 2-digit
 *   operands, B=16 rows of T=32, 600 steps. With falcon1 it takes about 2 minutes on 2 CPU cores
 *   with the float64 reference backend and visibly learns addition (`learning_test.ts` asserts a
 *   loss fall by x5 and >= 75% in-distribution digit accuracy; measured x25 and 94%).
 * - `addition`: the experiment setup of SPEC section 8 (train on up to 32-digit operands), a
 *   4-layer, 256-wide model, B=32 rows of T=128, 20000 steps; meant for the fast backends.
 *
 * @module
 */

import type { ModelConfig } from "../model/types.ts";
import { additionConfig } from "../tasks/addition.ts";
import type { TaskConfig } from "../tasks/mod.ts";
import { mqarConfig } from "../tasks/mqar.ts";
import { textConfig } from "../tasks/text.ts";
import type { TaskName } from "../tasks/types.ts";
import type { TrainConfig } from "./config.ts";

/** Preset names. */
export const PRESETS = ["tiny", "lab", "addition"] as const;

/** A preset name. */
export type PresetName = typeof PRESETS[number];

/** What a preset fixes; `vocabSize` comes from the task. */
export interface Preset {
  /** Model fields (the mixer and alignment are chosen by the caller). */
  readonly model: Partial<ModelConfig>;
  /** Hyperparameters. */
  readonly train: Partial<TrainConfig>;
  /** Addition task sizes. */
  readonly addition: { readonly maxDigits: number };
  /** MQAR task sizes. */
  readonly mqar: {
    readonly pairs: number;
    readonly queries: number;
    readonly keys: number;
    readonly values: number;
  };
  /** Text task window. */
  readonly text: { readonly seqLen: number };
}

const TABLE: Record<PresetName, Preset> = {
  tiny: {
    model: { dModel: 32, layers: 2, heads: 2, ffnHidden: 64, chunkSize: 16 },
    train: {
      steps: 600,
      batchSize: 16,
      seqLen: 32,
      lr: 1e-2,
      warmupSteps: 20,
      minLrRatio: 0.1,
      weightDecay: 0.01,
      beta2: 0.99,
      clipNorm: 1,
      checkpointEvery: 100,
    },
    addition: { maxDigits: 2 },
    mqar: { pairs: 4, queries: 4, keys: 16, values: 16 },
    text: { seqLen: 32 },
  },
  lab: {
    model: { dModel: 64, layers: 2, heads: 2, ffnHidden: 128, chunkSize: 16 },
    train: {
      steps: 1000,
      batchSize: 16,
      seqLen: 32,
      lr: 1e-2,
      warmupSteps: 60,
      minLrRatio: 0.1,
      weightDecay: 0.01,
      beta2: 0.99,
      clipNorm: 1,
      checkpointEvery: 200,
    },
    addition: { maxDigits: 3 },
    mqar: { pairs: 16, queries: 16, keys: 64, values: 64 },
    text: { seqLen: 128 },
  },
  addition: {
    model: { dModel: 256, layers: 4, heads: 4, chunkSize: 64 },
    train: {
      steps: 20000,
      batchSize: 32,
      seqLen: 128,
      lr: 1e-3,
      warmupSteps: 500,
      minLrRatio: 0.1,
      weightDecay: 0.1,
      beta2: 0.95,
      clipNorm: 1,
      checkpointEvery: 1000,
    },
    addition: { maxDigits: 32 },
    mqar: { pairs: 32, queries: 32, keys: 128, values: 128 },
    text: { seqLen: 128 },
  },
};

/** The preset of a name; throws a RangeError listing the presets for an unknown name. */
export function preset(name: string): Preset {
  if (!(PRESETS as readonly string[]).includes(name)) {
    throw new RangeError(`unknown preset "${name}"; expected one of ${PRESETS.join(", ")}`);
  }
  return TABLE[name as PresetName];
}

/** The task configuration a preset gives a task (`corpus` and its name are needed for `text`). */
export function presetTaskConfig(
  p: Preset,
  task: TaskName,
  corpus?: { bytes: Uint8Array; name: string },
): TaskConfig {
  switch (task) {
    case "addition":
      return additionConfig(p.addition);
    case "mqar":
      return mqarConfig(p.mqar);
    case "text":
      if (!corpus) throw new RangeError("the text task needs a corpus");
      return textConfig(corpus.bytes, corpus.name, p.text.seqLen);
  }
}
