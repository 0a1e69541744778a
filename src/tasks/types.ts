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
   * Per token, the place value of an ANSWER digit (0 = units), else -1 (operands, symbols, EOS);
   * same length as `tokens`. Only tasks with a per-place metric (addition) fill it.
   */
  readonly places?: Int16Array;
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
  /** Draw one example from `rng`. */
  sample(rng: DataRng, split: Split): Example;
  /** Text to token ids; throws a RangeError naming the first character outside the vocabulary. */
  encode(text: string): Int32Array;
  /** Token ids to text. */
  decode(tokens: ArrayLike<number>): string;
}
