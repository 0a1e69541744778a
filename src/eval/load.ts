/**
 * Loading a checkpoint for evaluation: the model rebuilt on a backend with the saved parameters,
 * and what the report needs to know about it (rule, alignment, seed, task, training length).
 *
 * @module
 */

import type { Backend } from "../rules/backend.ts";
import type { CheckpointState } from "../checkpoint/mod.ts";
import { loadCheckpointState } from "../convert/checkpoint_state.ts";
import { createModel } from "../model/mod.ts";
import type { LanguageModel } from "../model/types.ts";
import type { TaskConfig } from "../tasks/mod.ts";
import { InputError } from "../errors.ts";
import { writeTensors } from "../train/model_state.ts";
import type { CheckpointMeta } from "./report.ts";
import type { ScoringModel } from "./evaluate.ts";

/** A checkpoint ready to be scored. */
export interface EvalCheckpoint {
  /** Identity for tables and plots. */
  readonly meta: CheckpointMeta;
  /** The task it was trained on. */
  readonly task: TaskConfig;
  /** The model with the checkpoint's parameters (only its vocabulary size and logits are used). */
  readonly model: ScoringModel;
}

/** Training length of a task: addition `maxDigits`, mqar `pairs`, none for text. */
export function trainLengthOf(task: TaskConfig): number | null {
  switch (task.task) {
    case "addition":
      return task.maxDigits;
    case "mqar":
      return task.pairs;
    default:
      return null;
  }
}

/** The training seed recorded in a checkpoint's train config (`seed`), or null. */
export function seedOf(state: Pick<CheckpointState, "train">): number | null {
  const seed = state.train.seed;
  return typeof seed === "number" && Number.isInteger(seed) ? seed : null;
}

/**
 * Rebuild a checkpoint's model on `backend`: the architecture from its config, every parameter
 * copied from the file (through the trainer's `writeTensors`). Throws an InputError naming the file
 * when a parameter is missing, extra or of another shape.
 */
export function modelFromState(backend: Backend, state: CheckpointState, path: string): LanguageModel {
  let model: LanguageModel;
  try {
    model = createModel(backend, state.model, 0);
    writeTensors(backend, new Map(model.parameters().map((p) => [p.name, p.value])), state.params, path);
  } catch (err) {
    if (err instanceof RangeError || err instanceof TypeError) {
      throw new InputError(`${path}: ${err.message}`);
    }
    throw err;
  }
  return model;
}

/** Read a checkpoint file and rebuild its model on `backend`. */
export async function loadEvalCheckpoint(path: string, backend: Backend): Promise<EvalCheckpoint> {
  let state: CheckpointState;
  try {
    state = await loadCheckpointState(path); // a native file or an hf export directory
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw new InputError(`checkpoint ${path} does not exist`);
    if (err instanceof Error && !(err instanceof Deno.errors.PermissionDenied)) {
      throw new InputError(`${path} is not a falcon checkpoint: ${err.message}`);
    }
    throw err;
  }
  const meta: CheckpointMeta = {
    path,
    mixer: state.model.mixer,
    alignment: state.model.alignment,
    seed: seedOf(state),
    trainLength: trainLengthOf(state.task),
  };
  return { meta, task: state.task, model: modelFromState(backend, state, path) };
}
