/**
 * Greedy prediction from a checkpoint: continue a prompt with the argmax token until EOS (or a
 * token budget), and for addition decode the answer and check it against the true sum.
 *
 * @module
 */

import { type CheckpointState, loadCheckpoint } from "../checkpoint/checkpoint.ts";
import { InputError } from "../errors.ts";
import { modelFromState } from "../eval/load.ts";
import type { LanguageModel } from "../model/types.ts";
import type { Backend } from "../rules/backend.ts";
import { type AdditionConfig, decodeAdditionAnswer, parseAdditionPrompt } from "../tasks/addition.ts";
import { createTask } from "../tasks/mod.ts";
import type { Task } from "../tasks/types.ts";
import { argmax, type LogitsModel } from "./accuracy.ts";

/** A model and its task, loaded from a checkpoint. */
export interface LoadedCheckpoint {
  /** The checkpoint's contents. */
  readonly state: CheckpointState;
  /** The model with the saved parameters. */
  readonly model: LanguageModel;
  /** The task (codec only for text: the corpus is not needed to predict). */
  readonly task: Task;
}

/** Load a checkpoint onto `backend`; bad or missing files throw an InputError naming the path. */
export async function loadForPrediction(path: string, backend: Backend): Promise<LoadedCheckpoint> {
  let state: CheckpointState;
  try {
    state = await loadCheckpoint(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw new InputError(`checkpoint ${path} does not exist`);
    if (err instanceof Deno.errors.IsADirectory) throw new InputError(`checkpoint ${path} is a directory`);
    throw err;
  }
  let task: Task;
  try {
    task = createTask(state.task);
  } catch (err) {
    if (err instanceof RangeError) throw new InputError(`${path}: task_config: ${err.message}`);
    throw err;
  }
  return { state, model: modelFromState(backend, state, path), task };
}

/** Result of {@linkcode predict}. */
export interface Prediction {
  /** The prompt as given. */
  readonly prompt: string;
  /** Generated text (decoded tokens, EOS included when produced). */
  readonly completion: string;
  /** Generated token ids. */
  readonly tokens: number[];
  /** Whether generation stopped at EOS (false: the token budget ran out). */
  readonly stoppedAtEos: boolean;
  /** Logits of every prompt position `[promptLength][V]` (position i predicts token i+1). */
  readonly promptLogits: number[][];
  /** Addition only: the decoded number, the true sum and whether they agree. */
  readonly addition?: { readonly answer: string; readonly expected: string; readonly correct: boolean };
}

/**
 * Greedy continuation of `prompt`, at most `maxTokens` tokens (default: addition the longest
 * possible answer plus EOS, mqar 1 (the recalled value), text 64).
 * An addition prompt must read `a+b=`. Throws an InputError for text outside the vocabulary.
 */
export async function predict(
  model: LogitsModel,
  task: Task,
  prompt: string,
  maxTokens?: number,
): Promise<Prediction> {
  const V = model.config.vocabSize;
  const isAddition = task.config.task === "addition";
  const operands = isAddition ? parseAdditionPrompt(prompt) : null;
  if (isAddition && !operands) {
    throw new InputError(`--prompt "${prompt}" is not an addition prompt of the form 12345+678=`);
  }
  let ids: Int32Array;
  try {
    ids = task.encode(prompt);
  } catch (err) {
    if (err instanceof RangeError) throw new InputError(`--prompt: ${err.message}`);
    throw err;
  }
  if (ids.length === 0) throw new InputError("--prompt is empty");
  // addition: the longest possible answer and EOS; mqar: the one recalled value; text: 64 bytes
  const budget = maxTokens ??
    (operands ? Math.max(operands.a.length, operands.b.length) + 2 : task.config.task === "mqar" ? 1 : 64);
  const seq = Array.from(ids);
  let promptLogits: number[][] = [];
  const tokens: number[] = [];
  let stoppedAtEos = false;
  for (let n = 0; n < budget; n++) {
    const T = seq.length;
    const starts = new Uint8Array(T);
    starts[0] = 1;
    const logits = await model.logits({ B: 1, T, ids: Int32Array.from(seq), starts });
    if (n === 0) {
      promptLogits = Array.from({ length: T }, (_, t) => Array.from(logits.subarray(t * V, (t + 1) * V)));
    }
    const next = argmax(logits, (T - 1) * V, V);
    tokens.push(next);
    seq.push(next);
    if (next === task.eosId) {
      stoppedAtEos = true;
      break;
    }
  }
  const completion = task.decode(tokens);
  let addition: Prediction["addition"];
  if (operands) {
    const answer = decodeAdditionAnswer(completion, (task.config as AdditionConfig).format);
    const expected = (BigInt(operands.a) + BigInt(operands.b)).toString();
    addition = { answer, expected, correct: stoppedAtEos && answer === expected };
  }
  return { prompt, completion, tokens, stoppedAtEos, promptLogits, addition };
}
