/**
 * Teacher-forced accuracy (SPEC section 8): for each supervised position, the argmax of the logits
 * given the true prefix is compared with the true next token.
 *
 * @module
 */

import type { LanguageModel } from "../model/types.ts";
import type { Example } from "../tasks/types.ts";

/** What scoring needs of a model: its vocabulary size and its logits. */
export interface LogitsModel {
  /** Only the vocabulary size is read. */
  readonly config: { readonly vocabSize: number };
  /** Logits `[B, T, V]` of a batch. */
  logits: LanguageModel["logits"];
}

/** Result of {@linkcode teacherForcedAccuracy}. */
export interface AccuracyResult {
  /** Examples evaluated. */
  readonly examples: number;
  /** Supervised positions whose target is not EOS (the answer digits / values). */
  readonly tokens: number;
  /** Fraction of those predicted right. */
  readonly tokenAccuracy: number;
  /** Fraction of examples with every supervised token (EOS included) right. */
  readonly exactMatch: number;
}

/** Index of the largest of `n` values starting at `offset` (first one on ties). */
export function argmax(values: ArrayLike<number>, offset: number, n: number): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (values[offset + i] > values[offset + best]) best = i;
  return best;
}

/**
 * Evaluate examples one per row, `batchSize` rows per model call. `eosId` positions count for the
 * exact match but not for the token accuracy.
 */
export async function teacherForcedAccuracy(
  model: LogitsModel,
  examples: readonly Example[],
  options: { batchSize?: number; eosId?: number; padId?: number } = {},
): Promise<AccuracyResult> {
  const batchSize = options.batchSize ?? 32;
  const V = model.config.vocabSize;
  let tokens = 0;
  let correct = 0;
  let exact = 0;
  for (let at = 0; at < examples.length; at += batchSize) {
    const chunk = examples.slice(at, at + batchSize);
    const B = chunk.length;
    const T = Math.max(...chunk.map((e) => e.tokens.length));
    const ids = new Int32Array(B * T).fill(options.padId ?? 0);
    const starts = new Uint8Array(B * T);
    chunk.forEach((e, r) => {
      ids.set(e.tokens, r * T);
      starts[r * T] = 1;
    });
    const logits = await model.logits({ B, T, ids, starts });
    chunk.forEach((e, r) => {
      let allRight = true;
      for (let i = 1; i < e.tokens.length; i++) {
        if (!e.loss[i]) continue;
        const right = argmax(logits, (r * T + i - 1) * V, V) === e.tokens[i];
        allRight &&= right;
        if (e.tokens[i] !== options.eosId) {
          tokens++;
          if (right) correct++;
        }
      }
      if (allRight) exact++;
    });
  }
  return {
    examples: examples.length,
    tokens,
    tokenAccuracy: tokens > 0 ? correct / tokens : 0,
    exactMatch: examples.length > 0 ? exact / examples.length : 0,
  };
}
