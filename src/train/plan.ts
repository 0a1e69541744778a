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
import {
  type AdditionConfig,
  additionConfig,
  type AdditionOptions,
  createTask,
  fnv1aHex,
  type TaskConfig,
} from "../tasks/mod.ts";
import type { TaskName } from "../tasks/types.ts";
import { type TrainConfig, trainConfig, validateTrainConfig } from "./config.ts";
import {
  applyOverrides,
  overriddenField,
  OVERRIDE_NAMES,
  overrideText,
  overrideValues,
  type RunOverrides,
} from "./overrides.ts";
import { preset, presetTaskConfig } from "./presets.ts";
import { CHECKPOINT_FILE, type TrainSetup, validateSetup } from "./trainer.ts";

/** The addition format options a run request may set (`maxDigits` is the preset's). */
export type AdditionRunOptions = Omit<AdditionOptions, "task" | "maxDigits">;

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
  /**
   * Addition format options the user gave (fields left out take the defaults, which mean the
   * first version's format); with `resume`, every field given must equal the checkpoint's. Only
   * for the addition task.
   */
  readonly addition?: AdditionRunOptions;
  /** Backend to train on. */
  readonly backend: Backend;
  /**
   * Preset overrides (`overrides.ts`). A fresh run applies them to the preset; with `resume` each
   * must equal the checkpoint's value (`checkpoint-every` excepted: it may change).
   */
  readonly overrides?: RunOverrides;
}

/** Overrides that a resumed run may change (they do not change what is computed). */
const CHANGEABLE_ON_RESUME = new Set(["checkpoint-every"]);

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
  for (const [field, value] of givenAdditionOptions(request.addition)) {
    if (state.task.task !== "addition") {
      throw new InputError(
        `${optionText(field, value)} applies to the addition task only; ${path} is ${state.task.task}`,
      );
    }
    const saved = additionConfig(state.task)[field];
    if (JSON.stringify(saved) !== JSON.stringify(value)) {
      throw new InputError(
        `${optionText(field, value)} does not match the checkpoint ${path}, which has ${
          optionText(field, saved)
        }`,
      );
    }
  }
  if (request.explicit.has("preset")) {
    const saved = state.runConfig?.preset;
    if (typeof saved === "string") {
      if (saved !== request.preset) {
        throw new InputError(
          `--preset ${request.preset} does not match the checkpoint ${path}, which was trained with preset ${saved}`,
        );
      }
    } else {
      // a checkpoint from before run_config: compare the model sizes the preset fixes
      const p = asInput("--preset", () => preset(request.preset));
      for (const [field, value] of Object.entries(p.model)) {
        const savedValue = (state.model as unknown as Record<string, unknown>)[field];
        if (savedValue !== value) {
          throw new InputError(
            `--preset ${request.preset} does not match the checkpoint ${path}: the preset has ${field} ${value}, ` +
              `the checkpoint ${savedValue}`,
          );
        }
      }
    }
  }
  const overrides = request.overrides ?? {};
  for (const name of OVERRIDE_NAMES) {
    const o = overrides[name];
    if (!o || CHANGEABLE_ON_RESUME.has(name)) continue;
    const saved = overriddenField(name, {
      model: state.model as unknown as Record<string, unknown>,
      train: state.train,
    });
    if (saved !== o.value) {
      throw new InputError(
        `${overrideText(name, o)} does not match the checkpoint ${path}, which has ${saved}`,
      );
    }
  }
  if (request.steps !== undefined && request.steps < state.step) {
    throw new InputError(
      `--steps ${request.steps} is below the step of the checkpoint ${path} (${state.step}); ` +
        `a resumed run continues to a total of --steps, so pass --steps ${state.step} or more`,
    );
  }
  const model = state.model;
  asInput(`${path}: model_config`, () => validateModelConfig(model));
  const train = {
    ...(state.train as unknown as TrainConfig),
    ...(request.steps ? { steps: request.steps } : {}),
    ...(overrides["checkpoint-every"] ? { checkpointEvery: overrides["checkpoint-every"].value } : {}),
  };
  asInput(`${path}: train_config`, () => validateTrainConfig(train));
  return { model, task: state.task, train };
}

/** The command-line flag of each addition format option (for error messages). */
export const ADDITION_OPTION_FLAGS: Readonly<Record<keyof AdditionRunOptions, string>> = {
  format: "--answer-order",
  operandOrder: "--operand-order",
  bos: "--bos",
  indexHints: "--index-hints",
  equalLength: "--equal-length",
  curriculum: "--curriculum",
};

type AdditionField = keyof typeof ADDITION_OPTION_FLAGS;

/** An addition option as the user typed it: `--bos`, `--index-hints 24`, `--curriculum 8:0.1`. */
function optionText(field: AdditionField, value: unknown): string {
  const flag = ADDITION_OPTION_FLAGS[field];
  if (typeof value === "boolean") return value ? flag : `${flag} off`;
  if (value !== null && typeof value === "object") {
    const { startDigits, fraction } = value as { startDigits: unknown; fraction: unknown };
    return `${flag} ${startDigits}:${fraction}`;
  }
  return `${flag} ${value}`;
}

/** The addition options the user gave, as [field, value] pairs (undefined fields left out). */
function givenAdditionOptions(options: AdditionRunOptions | undefined): [AdditionField, unknown][] {
  return Object.entries(options ?? {}).filter(([field, value]) =>
    value !== undefined && field in ADDITION_OPTION_FLAGS
  ) as [AdditionField, unknown][];
}

/**
 * The addition task of a preset with the user's options, each option checked on its own against
 * the preset's `maxDigits` so that an error names the flag and its value.
 */
function additionTask(base: TaskConfig, options: AdditionRunOptions | undefined): TaskConfig {
  const fromPreset = additionConfig(base as AdditionConfig);
  for (const [field, value] of givenAdditionOptions(options)) {
    asInput(optionText(field, value), () => additionConfig({ ...fromPreset, [field]: value }));
  }
  return asInput("addition options", () => additionConfig({ ...fromPreset, ...options }));
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
  const overrides = request.overrides ?? {};
  let runConfig: Record<string, unknown> | undefined = {
    preset: request.preset,
    overrides: overrideValues(overrides),
  };
  if (request.resume) {
    if (!(await exists(checkpointPath))) {
      throw new InputError(
        `--resume: no checkpoint to resume in ${request.outDir} (expected ${checkpointPath})`,
      );
    }
    resumeFrom = await loadCheckpoint(checkpointPath);
    ({ model, task, train } = resumeConfigs(request, resumeFrom, checkpointPath));
    // a checkpoint from before run_config: its preset is known only when --preset was given (and checked)
    runConfig = resumeFrom.runConfig ??
      (request.explicit.has("preset") ? { preset: request.preset, overrides: {} } : undefined);
    if (runConfig && overrides["checkpoint-every"]) {
      const saved = (runConfig.overrides ?? {}) as Record<string, unknown>;
      runConfig = {
        ...runConfig,
        overrides: { ...saved, "checkpoint-every": overrides["checkpoint-every"].value },
      };
    }
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
        `${request.outDir} already holds a checkpoint; pass --resume to continue it, --force to start clean, ` +
          "or choose another --out",
      );
    }
    if (request.corpus && request.task !== "text") {
      throw new InputError(`--corpus applies to the text task only, not ${request.task}`);
    }
    const given = givenAdditionOptions(request.addition);
    if (given.length > 0 && request.task !== "addition") {
      throw new InputError(
        `${optionText(...given[0])} applies to the addition task only, not ${request.task}`,
      );
    }
    const base = asInput("--preset", () => preset(request.preset));
    const p = { ...base, ...applyOverrides(base, overrides) };
    // an error about a field names the overrides the user gave
    const overridden = OVERRIDE_NAMES.filter((n) => overrides[n]).map((n) => overrideText(n, overrides[n]!));
    const withGiven = (what: string) =>
      overridden.length > 0 ? `${what} (preset ${request.preset} with ${overridden.join(", ")})` : what;
    task = asInput(
      request.task === "text" ? `--corpus ${corpus!.name}` : "task",
      () => presetTaskConfig(p, request.task, corpus),
    );
    if (task.task === "addition") task = additionTask(task, request.addition);
    const taskInstance = createTask(task, corpus?.bytes);
    const vocabSize = taskInstance.vocabSize;
    model = asInput(
      withGiven("model"),
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
    // addition: rows at least one example long (BOS and index hints lengthen the examples beyond
    // what the preset's rows were sized for; with the default format every preset's rows fit)
    const seqLen = task.task === "addition" && !overrides["seq-len"]
      ? Math.max(p.train.seqLen ?? 0, taskInstance.maxExampleLength)
      : p.train.seqLen;
    train = asInput(
      withGiven("training"),
      () =>
        trainConfig({
          ...p.train,
          ...(seqLen === undefined ? {} : { seqLen }),
          seed: request.seed,
          ...(request.steps ? { steps: request.steps } : {}),
        }),
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
    runConfig,
  };
  const seqLenGiven = overrides["seq-len"] && !request.resume
    ? `${overrideText("seq-len", overrides["seq-len"])}: `
    : "";
  asInput(`${seqLenGiven}setup`, () => validateSetup(setup, createTask(task, corpus?.bytes)));
  return setup;
}
