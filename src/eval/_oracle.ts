/**
 * Hand-made scoring models for the eval tests: an addition oracle that is right exactly up to a
 * chosen operand length, one that is right at chosen place values, and a uniform model.
 *
 * @module
 */

import { ADDITION_EOS_ID, ADDITION_VOCAB_SIZE, EQUALS_ID, PLUS_ID } from "../tasks/mod.ts";
import type { ScoringModel } from "./evaluate.ts";

/**
 * An lsd addition oracle: at every answer position it predicts the true next token (one-hot logits)
 * when both operands have at most `upTo` digits; beyond, it predicts PAD (always wrong).
 */
export function additionOracle(upTo: number): ScoringModel {
  const V = ADDITION_VOCAB_SIZE;
  return {
    config: { vocabSize: V },
    logits(batch) {
      const out = new Float32Array(batch.B * batch.T * V);
      for (let b = 0; b < batch.B; b++) {
        const row = [...batch.ids.subarray(b * batch.T, (b + 1) * batch.T)];
        const plus = row.indexOf(PLUS_ID);
        const eq = row.indexOf(EQUALS_ID);
        const a = row.slice(0, plus).join("");
        const c = row.slice(plus + 1, eq).join("");
        const answer = [...[...(BigInt(a) + BigInt(c)).toString()].reverse().map(Number), ADDITION_EOS_ID];
        const knows = a.length <= upTo && c.length <= upTo;
        for (let t = 0; t < batch.T; t++) {
          const next = t >= eq && t - eq < answer.length && knows ? answer[t - eq] : V - 1;
          out[(b * batch.T + t) * V + next] = 1;
        }
      }
      return Promise.resolve(out);
    },
  };
}

/** A model with all-zero logits over `vocabSize` tokens (uniform predictions). */
export function uniformModel(vocabSize: number): ScoringModel {
  return {
    config: { vocabSize },
    logits: (batch) => Promise.resolve(new Float32Array(batch.B * batch.T * vocabSize)),
  };
}

/**
 * An addition model that knows the answer digits of the places `knows` accepts and is wrong at the
 * others: at every answer position it puts a one-hot logit on the true digit when `knows(place)`,
 * else on the fixed wrong digit `(true + 1) % 10`; EOS and every other position get the true next
 * token. `format` is the answer order of the sums it reads.
 */
export function placeOracle(knows: (place: number) => boolean, format: "lsd" | "msd" = "lsd"): ScoringModel {
  const V = ADDITION_VOCAB_SIZE;
  return {
    config: { vocabSize: V },
    logits(batch) {
      const out = new Float32Array(batch.B * batch.T * V);
      for (let b = 0; b < batch.B; b++) {
        const row = [...batch.ids.subarray(b * batch.T, (b + 1) * batch.T)];
        const plus = row.indexOf(PLUS_ID);
        const eq = row.indexOf(EQUALS_ID);
        const sum = (BigInt(row.slice(0, plus).join("")) + BigInt(row.slice(plus + 1, eq).join("")))
          .toString();
        const digits = (format === "lsd" ? [...sum].reverse() : [...sum]).map(Number);
        for (let t = 0; t < batch.T; t++) {
          const j = t - eq; // answer index this position predicts
          let next = t + 1 < batch.T ? batch.ids[b * batch.T + t + 1] : V - 1;
          if (j >= 0 && j < digits.length) {
            const place = format === "lsd" ? j : digits.length - 1 - j;
            next = knows(place) ? digits[j] : (digits[j] + 1) % 10;
          } else if (j === digits.length) next = ADDITION_EOS_ID;
          out[(b * batch.T + t) * V + next] = 1;
        }
      }
      return Promise.resolve(out);
    },
  };
}
