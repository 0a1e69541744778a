/**
 * The addition task (SPEC section 8): `a+b=c<eos>` with operands of independently drawn lengths in
 * `[1, L]` digits and no leading zero; the answer `c` is written least-significant digit first
 * (`lsd`, the default) or most-significant first (`msd`). The operands are always written
 * most-significant digit first. Loss falls only on the answer tokens, EOS included.
 *
 * Vocabulary (14 tokens): `0`-`9` are ids 0-9, `+` is 10, `=` is 11, EOS is 12, PAD is 13.
 * In text, EOS is written `$` and PAD `_`.
 *
 * @module
 */

import { DataRng, deriveSeed } from "./rng.ts";
import type { Example, Task } from "./types.ts";

/** Id of `+`. */
export const PLUS_ID = 10;
/** Id of `=`. */
export const EQUALS_ID = 11;
/** Id of the end-of-sequence token (text form `$`). */
export const ADDITION_EOS_ID = 12;
/** Id of the padding token (text form `_`). */
export const ADDITION_PAD_ID = 13;
/** Vocabulary size of the addition task. */
export const ADDITION_VOCAB_SIZE = 14;

const SYMBOLS = "0123456789+=$_";

/** Order of the answer digits. */
export type AdditionFormat = "lsd" | "msd";

/** Configuration of the addition task. */
export interface AdditionConfig {
  /** Always `addition`. */
  readonly task: "addition";
  /** Largest operand length `L` in digits (the paper trains on 32). */
  readonly maxDigits: number;
  /** Answer digit order (default `lsd`). */
  readonly format: AdditionFormat;
}

/** Build an {@linkcode AdditionConfig}, filling defaults and validating. */
export function additionConfig(overrides: Partial<Omit<AdditionConfig, "task">> = {}): AdditionConfig {
  const config: AdditionConfig = { task: "addition", maxDigits: 32, format: "lsd", ...overrides };
  if (!Number.isInteger(config.maxDigits) || config.maxDigits < 1) {
    throw new RangeError(`addition: maxDigits must be an integer >= 1, got ${config.maxDigits}`);
  }
  if (config.format !== "lsd" && config.format !== "msd") {
    throw new RangeError(`addition: format must be lsd or msd, got "${config.format}"`);
  }
  return config;
}

/** A random operand of exactly `digits` digits, no leading zero (a 1-digit operand may be 0). */
export function randomOperand(rng: DataRng, digits: number): string {
  let s = String(digits === 1 ? rng.int(0, 9) : rng.int(1, 9));
  for (let i = 1; i < digits; i++) s += String(rng.int(0, 9));
  return s;
}

/** The text of one example: `a+b=` then the answer in `format` order, then `$` (EOS). */
export function additionText(a: string, b: string, format: AdditionFormat): string {
  const sum = (BigInt(a) + BigInt(b)).toString();
  const answer = format === "lsd" ? [...sum].reverse().join("") : sum;
  return `${a}+${b}=${answer}$`;
}

function encodeAddition(text: string): Int32Array {
  const out = new Int32Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const id = SYMBOLS.indexOf(text[i]);
    if (id < 0) {
      throw new RangeError(
        `addition: character "${text[i]}" at index ${i} is not in the vocabulary (digits, +, =, $ for EOS)`,
      );
    }
    out[i] = id;
  }
  return out;
}

/**
 * Encode an example text and mark every token after `=` (the answer and EOS) as supervised. The
 * answer digits get their place values (`places`: 0 = units) read in `format` order, every other
 * token -1.
 */
export function additionExample(text: string, format: AdditionFormat = "lsd"): Example {
  const tokens = encodeAddition(text);
  const loss = new Uint8Array(tokens.length);
  const eq = text.indexOf("=");
  if (eq < 0) throw new RangeError(`addition: example "${text}" has no "="`);
  loss.fill(1, eq + 1);
  const places = new Int16Array(tokens.length).fill(-1);
  let answerLength = 0;
  while (eq + 1 + answerLength < tokens.length && tokens[eq + 1 + answerLength] <= 9) answerLength++;
  for (let j = 0; j < answerLength; j++) {
    places[eq + 1 + j] = format === "lsd" ? j : answerLength - 1 - j;
  }
  return { tokens, loss, places };
}

/** Create the addition task. */
export function createAdditionTask(config: AdditionConfig): Task<AdditionConfig> {
  const L = config.maxDigits;
  return {
    config,
    vocabSize: ADDITION_VOCAB_SIZE,
    padId: ADDITION_PAD_ID,
    eosId: ADDITION_EOS_ID,
    maxExampleLength: 3 * L + 4, // a (L) + b (L) + '+' '=' + answer (L + 1) + EOS
    sample(rng) {
      const a = randomOperand(rng, rng.int(1, L));
      const b = randomOperand(rng, rng.int(1, L));
      return additionExample(additionText(a, b, config.format), config.format);
    },
    encode: encodeAddition,
    decode: (tokens) => Array.from(tokens, (id) => SYMBOLS[id] ?? `<${id}>`).join(""),
  };
}

/**
 * The test set for one operand length: `count` examples whose operands BOTH have exactly `digits`
 * digits, drawn from a stream seeded by `deriveSeed(seed, "eval:addition:len=<digits>")`, so each
 * length has its own seeded set and none shares the training stream's seed.
 */
export function additionTestSet(
  digits: number,
  count: number,
  seed: number,
  format: AdditionFormat = "lsd",
): Example[] {
  if (!Number.isInteger(digits) || digits < 1) {
    throw new RangeError(`additionTestSet: digits must be an integer >= 1, got ${digits}`);
  }
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`additionTestSet: count must be an integer >= 1, got ${count}`);
  }
  const rng = new DataRng(deriveSeed(seed, `eval:addition:len=${digits}`));
  const out: Example[] = [];
  for (let i = 0; i < count; i++) {
    out.push(
      additionExample(additionText(randomOperand(rng, digits), randomOperand(rng, digits), format), format),
    );
  }
  return out;
}

/**
 * Parse an addition prompt `a+b=` (digits only). Returns the operands, or null when the text is not
 * of that form.
 */
export function parseAdditionPrompt(prompt: string): { a: string; b: string } | null {
  const m = /^(\d+)\+(\d+)=$/.exec(prompt);
  return m ? { a: m[1], b: m[2] } : null;
}

/** Decode a generated answer (digits, optionally followed by EOS) in `format` order to a number string. */
export function decodeAdditionAnswer(answer: string, format: AdditionFormat): string {
  const digits = answer.replace(/\$.*$/, "");
  return format === "lsd" ? [...digits].reverse().join("") : digits;
}
