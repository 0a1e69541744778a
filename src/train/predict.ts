/**
 * Greedy prediction from a checkpoint: continue a prompt with the argmax token until EOS (or a
 * token budget), and for addition decode the answer and check it against the true sum.
 *
 * @module
 */

import type { CheckpointState } from "../checkpoint/checkpoint.ts";
import { loadCheckpointState } from "../convert/checkpoint_state.ts";
import { InputError } from "../errors.ts";
import { modelFromState } from "../eval/load.ts";
import type { LanguageModel } from "../model/types.ts";
import type { Backend } from "../rules/backend.ts";
import {
  type AdditionConfig,
  additionPromptText,
  additionVocabulary,
  checkHintRange,
  decodeAdditionAnswer,
  parseAdditionPrompt,
} from "../tasks/addition.ts";
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
    state = await loadCheckpointState(path); // a native file or an hf export directory
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw new InputError(`checkpoint ${path} does not exist`);
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
  /**
   * The prompt as the model saw it: for addition, `a+b=` rebuilt in the checkpoint's format
   * (operand order, BOS, hints at offset 0); otherwise the prompt itself.
   */
  readonly promptText: string;
  /** Generated text (decoded tokens, EOS included when produced; addition: inserted hints too). */
  readonly completion: string;
  /** Generated token ids (addition with index hints: the hints the generator inserted too). */
  readonly tokens: number[];
  /** Whether generation stopped at EOS (false: the token budget ran out). */
  readonly stoppedAtEos: boolean;
  /** Logits of every prompt position `[promptLength][V]` (position i predicts token i+1). */
  readonly promptLogits: number[][];
  /** Addition only: the decoded number, the true sum and whether they agree. */
  readonly addition?: { readonly answer: string; readonly expected: string; readonly correct: boolean };
}

/** What the generator needs to write the hints of an addition answer itself. */
interface HintPlan {
  /** Id of `h_0` (hint `h_p` is `firstHintId + p`, offset 0); the hints are the vocabulary's last ids. */
  readonly firstHintId: number;
  /** Place of the k-th answer digit written. */
  readonly places: readonly number[];
  /** Answer digits that certainly come (the generator writes their hints without asking the model). */
  readonly certain: number;
}

/**
 * The hints of an addition answer in `config`'s format, or null without hints. The sum of operands
 * of at most `n` digits has `n` or `n + 1` digits (`n = max(|a|, |b|)`). With an lsd answer the
 * places are `0, 1, ..., n`: the hints of the first `n` digits are written unasked, and after the
 * n-th digit the model decides between EOS and the carry digit `n` (whose hint the generator then
 * writes). With an msd answer the first digit's place is the answer's length minus one, which the
 * model would have to know before writing it: the generator takes it from the true sum, the same
 * information the hints give in training and in teacher-forced evaluation.
 */
function hintPlan(config: AdditionConfig, a: string, b: string): HintPlan | null {
  const vocab = additionVocabulary(config);
  if (vocab.firstHintId === null) return null;
  const first = vocab.firstHintId;
  const n = Math.max(a.length, b.length);
  if (config.format === "lsd") {
    return {
      firstHintId: first,
      places: Array.from({ length: n + 1 }, (_, p) => p),
      certain: n,
    };
  }
  const length = (BigInt(a) + BigInt(b)).toString().length;
  return {
    firstHintId: first,
    places: Array.from({ length }, (_, k) => length - 1 - k),
    certain: length,
  };
}

/** The prompt ids of `prompt` for `task` (addition: rebuilt in the task's format). */
function promptIds(task: Task, prompt: string, operands: { a: string; b: string } | null) {
  let text = prompt;
  try {
    if (operands) {
      const config = task.config as AdditionConfig;
      checkHintRange(config, Math.max(operands.a.length, operands.b.length));
      text = additionPromptText(operands.a, operands.b, config);
    }
    return { text, ids: task.encode(text) };
  } catch (err) {
    if (err instanceof RangeError) throw new InputError(`--prompt: ${err.message}`);
    throw err;
  }
}

/**
 * Greedy continuation of `prompt`, at most `maxTokens` tokens chosen by the model (default:
 * addition the longest possible answer plus EOS, mqar 1 (the recalled value), text 64).
 * An addition prompt must read `a+b=` (plain digits, most-significant first); it is rebuilt in the
 * checkpoint's format. With index hints the model never writes a hint: the generator inserts the
 * hint of each answer place before the model writes that place's token (see `hintPlan` for the
 * carry digit and the msd answer order), and the model's greedy choice is the argmax over the
 * tokens other than the hints (never targets in training, so their logits mean nothing); inserted
 * hints do not count against `maxTokens`.
 * Throws an InputError for text outside the vocabulary.
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
  const { text: promptText, ids } = promptIds(task, prompt, operands);
  if (ids.length === 0) throw new InputError("--prompt is empty");
  // addition: the longest possible answer and EOS; mqar: the one recalled value; text: 64 bytes
  const budget = maxTokens ??
    (operands ? Math.max(operands.a.length, operands.b.length) + 2 : task.config.task === "mqar" ? 1 : 64);
  const plan = operands ? hintPlan(task.config as AdditionConfig, operands.a, operands.b) : null;
  const seq = Array.from(ids);
  let promptLogits: number[][] = [];
  const tokens: number[] = [];
  let stoppedAtEos = false;
  let written = 0; // answer tokens the model has written (each takes one place of the plan)
  const push = (id: number) => {
    tokens.push(id);
    seq.push(id);
  };
  const choose = async () => {
    const T = seq.length;
    const starts = new Uint8Array(T);
    starts[0] = 1;
    const logits = await model.logits({ B: 1, T, ids: Int32Array.from(seq), starts });
    if (promptLogits.length === 0) {
      promptLogits = Array.from(
        { length: ids.length },
        (_, t) => Array.from(logits.subarray(t * V, (t + 1) * V)),
      );
    }
    // hints are never targets: with hints the model chooses among the other tokens (hint ids are last)
    return argmax(logits, (T - 1) * V, plan ? plan.firstHintId : V);
  };
  for (let n = 0; n < budget; n++) {
    if (plan && written < plan.certain) push(plan.firstHintId + plan.places[written]);
    let next = await choose();
    if (plan && written >= plan.certain && written < plan.places.length && next !== task.eosId) {
      // the model continues the answer: the generator writes the next digit's hint, the model the digit
      push(plan.firstHintId + plan.places[written]);
      next = await choose();
    }
    push(next);
    if (next === task.eosId) {
      stoppedAtEos = true;
      break;
    }
    written++;
  }
  const completion = task.decode(tokens);
  let addition: Prediction["addition"];
  if (operands) {
    const answer = decodeAdditionAnswer(completion, (task.config as AdditionConfig).format);
    const expected = (BigInt(operands.a) + BigInt(operands.b)).toString();
    addition = { answer, expected, correct: stoppedAtEos && answer === expected };
  }
  return { prompt, promptText, completion, tokens, stoppedAtEos, promptLogits, addition };
}
