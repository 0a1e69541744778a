/**
 * What every task provides: a vocabulary, a seeded example sampler and a text codec.
 *
 * @module
 */

import type { DataRng } from "./rng.ts";

/** Names of the tasks (SPEC section 8). */
export const TASKS = ["addition", "mqar", "text"] as const;

/** A task name. */
export type TaskName = typeof TASKS[number];

/**
 * One example: a token sequence and which of its tokens are supervised. Position `i` of a packed
 * row predicts token `i + 1`; `loss[i] = 1` means token `i` is a target (so `loss[0]` is always 0).
 */
export interface Example {
  /** Token ids. */
  readonly tokens: Int32Array;
  /** 1 where the token is a supervised target, else 0 (same length as `tokens`). */
  readonly loss: Uint8Array;
  /**
   * Addition: for each token, the place value (0 = units) of the digit it is when it is an ANSWER
   * digit, else -1 (operand digits, hints, symbols, EOS). Same length as `tokens`. Absent for tasks
   * without place values.
   */
  readonly places?: Int16Array;
}

/** Where a training stream is: the 1-based step whose batch is being assembled, of `steps` in all. */
export interface SampleProgress {
  /** 1-based step being assembled. */
  readonly step: number;
  /** Total steps of the run. */
  readonly steps: number;
}

/** Which part of the data an example comes from (matters for `text`, where eval is a held-out tail). */
export type Split = "train" | "eval";

/** A task: vocabulary, sampler and codec. */
export interface Task<C extends { readonly task: TaskName } = { readonly task: TaskName }> {
  /** The task's JSON-serialisable configuration (stored in checkpoints). */
  readonly config: C;
  /** Vocabulary size (the model's `vocabSize`). */
  readonly vocabSize: number;
  /** Token used to fill unused positions of a packed row (never supervised). */
  readonly padId: number;
  /** End-of-sequence token, where the task has one. */
  readonly eosId?: number;
  /** Longest example the sampler produces. */
  readonly maxExampleLength: number;
  /**
   * Draw one example from `rng`. `progress` (training only) lets a task change its examples over
   * the run (the addition length curriculum); without it a task samples its full distribution.
   */
  sample(rng: DataRng, split: Split, progress?: SampleProgress): Example;
  /** Text to token ids; throws a RangeError naming the first character outside the vocabulary. */
  encode(text: string): Int32Array;
  /** Token ids to text. */
  decode(tokens: ArrayLike<number>): string;
}
