/**
 * One evaluation from loaded checkpoints to a report: checks that every checkpoint was trained
 * for the task asked, builds the test groups once, scores every model on them (streaming) and
 * summarises. The CLI (`falcon eval`) and the experiment drivers call this.
 *
 * @module
 */

import { InputError } from "../errors.ts";
import type { AdditionConfig, MqarConfig, TextConfig } from "../tasks/mod.ts";
import {
  ADDITION_EOS_ID,
  ADDITION_FORMAT_FIELDS,
  additionConfig,
  fnv1aHex,
  TEXT_TRAIN_FRACTION,
} from "../tasks/mod.ts";
import {
  BITS,
  type EvalProgress,
  evaluateModels,
  TEACHER_FORCED,
  teacherForcedByPlace,
  type TestGroup,
} from "./evaluate.ts";
import type { EvalCheckpoint } from "./load.ts";
import {
  accuracyResult,
  additionResult,
  type EvalReport,
  type EvalTask,
  textResult,
  uniqueLabels,
} from "./report.ts";
import { additionGroups, mqarGroups, textGroup } from "./test_sets.ts";

/** What to evaluate. */
export interface EvalOptions {
  /** Task; every checkpoint must have been trained on it. */
  readonly task: EvalTask;
  /** Operand lengths (addition) or pair counts (mqar); ignored for text. */
  readonly keys: readonly number[];
  /** Sequences per group (text: at most this many windows). */
  readonly samples: number;
  /** Base seed of the test sets. */
  readonly seed: number;
  /** Rows per batch. */
  readonly batchSize: number;
  /**
   * Addition with index hints: the hint id of answer place 0 (default 0, as in training's plans); the
   * operands stay the same, only the hint tokens move. Non-zero without hints is an InputError.
   */
  readonly hintOffset?: number;
  /** Text task: the held-out file's bytes and name. */
  readonly text?: { readonly bytes: Uint8Array; readonly name: string };
  /** Date to record (default now). */
  readonly date?: Date;
}

/** Where the text task reads from: the training corpus's held-out tail, or a whole separate file. */
export function heldOutRange(
  config: TextConfig,
  bytes: Uint8Array,
): { from: number; to: number; what: string } {
  if (bytes.length === config.corpusBytes && fnv1aHex(bytes) === config.corpusHash) {
    return {
      from: Math.floor(bytes.length * TEXT_TRAIN_FRACTION),
      to: bytes.length,
      what: "the eval split (last 10%) of the training corpus",
    };
  }
  return { from: 0, to: bytes.length, what: "the whole file (not the training corpus)" };
}

function sameTaskConfigs(checkpoints: readonly EvalCheckpoint[], task: EvalTask): void {
  for (const c of checkpoints) {
    if (c.task.task !== task) {
      throw new InputError(`${c.meta.path} was trained on the ${c.task.task} task, not ${task}`);
    }
  }
  const first = checkpoints[0];
  for (const c of checkpoints.slice(1)) {
    if (c.model.config.vocabSize !== first.model.config.vocabSize) {
      throw new InputError(
        `${c.meta.path} has vocabulary ${c.model.config.vocabSize}, ${first.meta.path} has ${first.model.config.vocabSize}`,
      );
    }
    if (task === "addition") {
      const a = additionConfig(c.task as AdditionConfig);
      const b = additionConfig(first.task as AdditionConfig);
      const field = ADDITION_FORMAT_FIELDS.find((f) => a[f] !== b[f]);
      if (field !== undefined) {
        throw new InputError(
          `${c.meta.path} has addition ${field} ${JSON.stringify(a[field])}, ${first.meta.path} ${
            JSON.stringify(b[field])
          }: they need different test sets`,
        );
      }
    }
    if (task === "mqar") {
      const a = c.task as MqarConfig;
      const b = first.task as MqarConfig;
      if (a.keys !== b.keys || a.values !== b.values || a.queries !== b.queries) {
        throw new InputError(
          `${c.meta.path} and ${first.meta.path} have different mqar vocabularies or queries`,
        );
      }
    }
  }
}

/** The test groups for `options`, built from the first checkpoint's task config. */
export function buildGroups(first: EvalCheckpoint, options: EvalOptions): TestGroup[] {
  const { keys, samples, seed, batchSize, hintOffset = 0 } = options;
  if (hintOffset !== 0 && options.task !== "addition") {
    throw new InputError(`the hint offset applies to the addition task only, not ${options.task}`);
  }
  switch (options.task) {
    case "addition":
      try {
        return additionGroups(first.task as AdditionConfig, keys, samples, seed, batchSize, hintOffset);
      } catch (err) {
        // a length beyond the checkpoint's hint ids
        if (err instanceof RangeError) throw new InputError(`${first.meta.path}: ${err.message}`);
        throw err;
      }
    case "mqar": {
      const config = first.task as MqarConfig;
      const tooMany = keys.find((p) => p > config.keys);
      if (tooMany !== undefined) {
        throw new InputError(
          `mqar: ${tooMany} pairs need ${tooMany} distinct keys; the checkpoints' task has ${config.keys}`,
        );
      }
      return mqarGroups(config, keys, samples, seed, batchSize);
    }
    case "text": {
      if (!options.text) throw new InputError("the text task needs a held-out file (--text FILE)");
      const config = first.task as TextConfig;
      const { from, to } = heldOutRange(config, options.text.bytes);
      if (to - from < 2) {
        throw new InputError(`text file ${options.text.name} holds fewer than 2 held-out bytes`);
      }
      return [textGroup(options.text.bytes, from, to, config.seqLen, samples, batchSize)];
    }
  }
}

/** Evaluate checkpoints on the same test sets and build the report. */
export async function evaluateCheckpoints(
  checkpoints: readonly EvalCheckpoint[],
  options: EvalOptions,
  onProgress?: (progress: EvalProgress) => void,
): Promise<EvalReport> {
  if (checkpoints.length === 0) throw new InputError("no checkpoint to evaluate");
  sameTaskConfigs(checkpoints, options.task);
  const groups = buildGroups(checkpoints[0], options);
  const models = checkpoints.map((c) => c.model);
  const metas = checkpoints.map((c) => c.meta);
  const labels = uniqueLabels(metas);
  const base = {
    task: options.task,
    samples: options.samples,
    seed: options.seed,
    ...(options.hintOffset ? { hintOffset: options.hintOffset } : {}),
    date: (options.date ?? new Date()).toISOString(),
  };
  if (options.task === "text") {
    const tallies = await evaluateModels(models, groups, BITS, onProgress);
    return {
      ...base,
      keyName: "file",
      keys: [0],
      checkpoints: metas.map((m, i) => textResult(m, labels[i], tallies[i].get(0)!)),
    };
  }
  const keys = groups.map((g) => g.key);
  if (options.task === "addition") {
    const tallies = await evaluateModels(models, groups, teacherForcedByPlace(ADDITION_EOS_ID), onProgress);
    return {
      ...base,
      keyName: "length",
      keys,
      checkpoints: metas.map((m, i) => additionResult(m, labels[i], tallies[i])),
    };
  }
  const tallies = await evaluateModels(models, groups, TEACHER_FORCED, onProgress);
  return {
    ...base,
    keyName: "pairs",
    keys,
    checkpoints: metas.map((m, i) => accuracyResult(m, labels[i], tallies[i])),
  };
}
