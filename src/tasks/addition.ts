/**
 * The addition task (SPEC section 8): `a+b=c<eos>` with operands of independently drawn lengths in
 * `[1, L]` digits and no leading zero. Loss falls only on the answer tokens, EOS included.
 *
 * The format options (operand and answer digit order, BOS, index hints, equal-length operands, a
 * length curriculum) are fields of {@linkcode AdditionConfig} (`addition_config.ts`); how an example
 * is written, its vocabulary and its text form are in `addition_format.ts`; the curriculum's
 * schedule in `addition_curriculum.ts`. This module samples training examples and builds the seeded
 * test sets; it re-exports the other three.
 *
 * Sampling a training example draws, from the stream, in this order: the first operand's length
 * (in `[1, L(step)]`, `L(step)` the curriculum's length, `L` without one) and its digits, the second
 * operand's length (not drawn with `equalLength`: it is the first's) and its digits, then with index
 * hints the offset `o` uniform in `[0, H - (L + 1)]`. With the default options this is exactly the
 * first version's stream. Evaluation examples (`split` `eval`, the test sets, prompts) use hint
 * offset 0 and no curriculum.
 *
 * @module
 */

import { type AdditionConfig, additionConfig, type AdditionFormat } from "./addition_config.ts";
import { curriculumDigits } from "./addition_curriculum.ts";
import {
  ADDITION_EOS_ID,
  ADDITION_PAD_ID,
  additionExample,
  additionExampleLength,
  additionText,
  additionVocabulary,
  checkHintRange,
  decodeAdditionTokens,
  encodeAdditionText,
} from "./addition_format.ts";
import { DataRng, deriveSeed } from "./rng.ts";
import type { Example, Task } from "./types.ts";

export * from "./addition_config.ts";
export * from "./addition_curriculum.ts";
export * from "./addition_format.ts";

/** A random operand of exactly `digits` digits, no leading zero (a 1-digit operand may be 0). */
export function randomOperand(rng: DataRng, digits: number): string {
  let s = String(digits === 1 ? rng.int(0, 9) : rng.int(1, 9));
  for (let i = 1; i < digits; i++) s += String(rng.int(0, 9));
  return s;
}

/** Create the addition task (the configuration is normalised through {@linkcode additionConfig}). */
export function createAdditionTask(options: AdditionConfig): Task<AdditionConfig> {
  const config = additionConfig(options);
  const L = config.maxDigits;
  const H = config.indexHints;
  return {
    config,
    vocabSize: additionVocabulary(config).size,
    padId: ADDITION_PAD_ID,
    eosId: ADDITION_EOS_ID,
    maxExampleLength: additionExampleLength(config),
    sample(rng, split, progress) {
      const training = split === "train";
      const longest = curriculumDigits(config, training ? progress : undefined);
      const lengthA = rng.int(1, longest);
      const a = randomOperand(rng, lengthA);
      const b = randomOperand(rng, config.equalLength ? lengthA : rng.int(1, longest));
      const offset = H > 0 && training ? rng.int(0, H - (L + 1)) : 0;
      return additionExample(additionText(a, b, config, offset), config);
    },
    encode: (text) => encodeAdditionText(text, config),
    decode: (tokens) => decodeAdditionTokens(tokens, config),
  };
}

function asConfig(config: AdditionConfig | AdditionFormat): AdditionConfig {
  return typeof config === "string" ? additionConfig({ format: config }) : additionConfig(config);
}

/**
 * The test stream for one operand length: examples whose operands BOTH have exactly `digits` digits,
 * in `config`'s format with hints at offset 0, drawn from a stream seeded by
 * `deriveSeed(seed, "eval:addition:len=<digits>")` (so each length has its own seeded set and none
 * shares the training stream's seed). Throws a RangeError when `digits` is not an integer >= 1 or
 * needs more hint ids than `config` has.
 */
export function additionTestStream(
  digits: number,
  seed: number,
  config: AdditionConfig | AdditionFormat = "lsd",
  hintOffset = 0,
): () => Example {
  if (!Number.isInteger(digits) || digits < 1) {
    throw new RangeError(`additionTestSet: digits must be an integer >= 1, got ${digits}`);
  }
  const c = asConfig(config);
  checkHintRange(c, digits, hintOffset);
  const rng = new DataRng(deriveSeed(seed, `eval:addition:len=${digits}`));
  return () =>
    additionExample(additionText(randomOperand(rng, digits), randomOperand(rng, digits), c, hintOffset), c);
}

/**
 * The test set for one operand length: the first `count` examples of
 * {@linkcode additionTestStream}`(digits, seed, config)` (a bare answer order means the default
 * format with that answer order).
 */
export function additionTestSet(
  digits: number,
  count: number,
  seed: number,
  config: AdditionConfig | AdditionFormat = "lsd",
): Example[] {
  const next = additionTestStream(digits, seed, config);
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`additionTestSet: count must be an integer >= 1, got ${count}`);
  }
  return Array.from({ length: count }, next);
}

/**
 * Parse an addition prompt `a+b=` (plain digits, most-significant first, whatever the task's format).
 * Returns the operands, or null when the text is not of that form.
 */
export function parseAdditionPrompt(prompt: string): { a: string; b: string } | null {
  const m = /^(\d+)\+(\d+)=$/.exec(prompt);
  return m ? { a: m[1], b: m[2] } : null;
}
