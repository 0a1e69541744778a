/**
 * Turning a user's request (task, mixer, preset, overrides, run directory, resume) into a complete
 * {@linkcode TrainSetup}, checking everything before any work. Bad input throws an
 * {@linkcode InputError} naming the option and the value (the CLI exits with code 2).
 *
 * @module
 */

import { DEFAULT_CORPUS, DEFAULT_CORPUS_NAME } from "../../fixtures/corpus/falcon_notes.ts";
import { type CheckpointState, loadCheckpoint } from "../checkpoint/checkpoint.ts";
import { InputError } from "../errors.ts";
import { modelConfig, validateModelConfig } from "../model/config.ts";
import type { MixerName, ModelConfig } from "../model/types.ts";
import type { Backend } from "../rules/backend.ts";
import type { Alignment, QkNorm } from "../rules/config.ts";
import { createTask, fnv1aHex, type TaskConfig } from "../tasks/mod.ts";
import type { TaskName } from "../tasks/types.ts";
import { type TrainConfig, trainConfig, validateTrainConfig } from "./config.ts";
import { preset, presetTaskConfig } from "./presets.ts";
import { CHECKPOINT_FILE, type TrainSetup, validateSetup } from "./trainer.ts";

/** What the user asked for. Fields named in `explicit` were given by the user (not defaults). */
export interface RunRequest {
  /** Task name. */
  readonly task: TaskName;
  /** Mixer of every block. */
  readonly mixer: MixerName;
  /** Pair alignment. */
  readonly alignment: Alignment;
  /** Short convolution on q, k, v (default: the model default, on; false with qkNorm none: the plain Transformer). */
  readonly shortConv?: boolean;
  /** q/k normalisation (default: the mixer's, `modelConfig`). */
  readonly qkNorm?: QkNorm;
  /** Preset name. */
  readonly preset: string;
  /** Steps (default: the preset's). */
  readonly steps?: number;
  /** Run seed. */
  readonly seed: number;
  /** Run directory. */
  readonly outDir: string;
  /** Continue from `outDir`'s checkpoint. */
  readonly resume: boolean;
  /** Corpus of the text task: its bytes and name (default: the built-in corpus). */
  readonly corpus?: { readonly bytes: Uint8Array; readonly name: string };
  /**
   * Options the user set explicitly (`task`, `mixer`, `alignment`, `shortConv`, `qkNorm`, `steps`,
   * `seed`, `preset`); with `resume` those of the model must match the checkpoint.
   */
  readonly explicit: ReadonlySet<string>;
  /** Backend to train on. */
  readonly backend: Backend;
}

function asInput<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof RangeError || err instanceof TypeError) {
      throw new InputError(`${what}: ${err.message}`);
    }
    throw err;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

function resumeConfigs(request: RunRequest, state: CheckpointState, path: string) {
  const check = (flag: string, key: string, given: unknown, saved: unknown) => {
    if (request.explicit.has(key) && given !== saved) {
      throw new InputError(`${flag} ${given} does not match the checkpoint ${path}, which has ${saved}`);
    }
  };
  check("--task", "task", request.task, state.task.task);
  check("--rule", "mixer", request.mixer, state.model.mixer);
  check("--alignment", "alignment", request.alignment, state.model.alignment);
  check("--short-conv/--no-short-conv: shortConv", "shortConv", request.shortConv, state.model.shortConv);
  check("--qk-norm", "qkNorm", request.qkNorm, state.model.qkNorm);
  check("--seed", "seed", request.seed, state.train.seed);
  const model = state.model;
  asInput(`${path}: model_config`, () => validateModelConfig(model));
  const train = {
    ...(state.train as unknown as TrainConfig),
    ...(request.steps ? { steps: request.steps } : {}),
  };
  asInput(`${path}: train_config`, () => validateTrainConfig(train));
  return { model, task: state.task, train };
}

/** The default corpus as bytes, with its name. */
export function defaultCorpus(): { bytes: Uint8Array; name: string } {
  return { bytes: new TextEncoder().encode(DEFAULT_CORPUS), name: DEFAULT_CORPUS_NAME };
}

/** Build and check a complete training setup (reads the run directory's checkpoint when resuming). */
export async function planRun(request: RunRequest): Promise<TrainSetup> {
  const checkpointPath = `${request.outDir}/${CHECKPOINT_FILE}`;
  // the corpus matters for the task that will run: the checkpoint's when resuming
  let corpus = request.task === "text" ? request.corpus ?? defaultCorpus() : undefined;
  let model: ModelConfig;
  let task: TaskConfig;
  let train: TrainConfig;
  let resumeFrom: CheckpointState | undefined;
  if (request.resume) {
    if (!(await exists(checkpointPath))) {
      throw new InputError(
        `--resume: no checkpoint to resume in ${request.outDir} (expected ${checkpointPath})`,
      );
    }
    resumeFrom = await loadCheckpoint(checkpointPath);
    ({ model, task, train } = resumeConfigs(request, resumeFrom, checkpointPath));
    if (request.corpus && task.task !== "text") {
      throw new InputError(`--corpus applies to the text task only; the checkpoint is of task ${task.task}`);
    }
    corpus = task.task === "text" ? request.corpus ?? defaultCorpus() : undefined;
    if (task.task === "text" && corpus && task.corpusHash !== fnv1aHex(corpus.bytes)) {
      throw new InputError(
        `the checkpoint was trained on corpus "${task.corpusName}" (${task.corpusBytes} bytes, hash ${task.corpusHash}), ` +
          `not on "${corpus.name}" (${corpus.bytes.length} bytes, hash ${fnv1aHex(corpus.bytes)})`,
      );
    }
  } else {
    if (await exists(checkpointPath)) {
      throw new InputError(
        `${request.outDir} already holds a checkpoint; pass --resume or choose another --out`,
      );
    }
    if (request.corpus && request.task !== "text") {
      throw new InputError(`--corpus applies to the text task only, not ${request.task}`);
    }
    const p = asInput("--preset", () => preset(request.preset));
    task = asInput(
      request.task === "text" ? `--corpus ${corpus!.name}` : "task",
      () => presetTaskConfig(p, request.task, corpus),
    );
    const vocabSize = createTask(task, corpus?.bytes).vocabSize;
    model = asInput(
      "model",
      () =>
        modelConfig({
          ...p.model,
          vocabSize,
          mixer: request.mixer,
          alignment: request.alignment,
          ...(request.shortConv === undefined ? {} : { shortConv: request.shortConv }),
          ...(request.qkNorm === undefined ? {} : { qkNorm: request.qkNorm }),
        }),
    );
    train = asInput(
      "training",
      () =>
        trainConfig({ ...p.train, seed: request.seed, ...(request.steps ? { steps: request.steps } : {}) }),
    );
  }
  const setup: TrainSetup = {
    backend: request.backend,
    model,
    task,
    train,
    runDir: request.outDir,
    corpus: corpus?.bytes,
    resumeFrom,
  };
  asInput("setup", () => validateSetup(setup, createTask(task, corpus?.bytes)));
  return setup;
}
