/**
 * How an addition example is written (SPEC section 8): its vocabulary, its text form, its tokens,
 * which tokens are supervised and the place value of every answer digit.
 *
 * An example is `[BOS] a + b = c EOS`: `a` and `b` in the operand order (`operandOrder`), `c = a + b`
 * in the answer order (`format`). With `H = indexHints > 0` every digit, of the operands and of the
 * answer, is preceded by a hint token `h_{o+i}` naming its place `i` (0 = units digit); the offset
 * `o` is drawn per training example (the sampler's job) and is 0 in evaluation.
 *
 * Vocabulary: `0`-`9` are ids 0-9, `+` 10, `=` 11, EOS 12, PAD 13 (the 14 ids of the first version,
 * unchanged, so old checkpoints stay valid); then, appended only when used, BOS (id 14) and the `H`
 * hint ids (`h_0` at 14, or 15 with BOS). So the vocabulary size is `14 + (bos ? 1 : 0) + H`.
 *
 * Text form: digits, `+`, `=`, `$` for EOS, `_` for PAD, `^` for BOS and `[j]` for hint id `h_j`;
 * e.g. operands lsd, answer lsd, BOS and hints at offset 0: `12+5=` is `^[0]2[1]1+[0]5=[0]7[1]1$`.
 * Encoding and decoding are exact inverses on every token sequence of the vocabulary.
 *
 * Supervision: every token after `=` except the hints (the answer digits and EOS) has loss 1;
 * hints are input only. In a packed row position `i` predicts token `i + 1`, so the position before
 * a hint (the `=` or an answer digit) has weight 0 and the hint's own position, which predicts the
 * digit, weight 1.
 *
 * @module
 */

import { type AdditionConfig, additionConfig, type AdditionFormat } from "./addition_config.ts";
import type { Example } from "./types.ts";

/** Id of `+`. */
export const PLUS_ID = 10;
/** Id of `=`. */
export const EQUALS_ID = 11;
/** Id of the end-of-sequence token (text form `$`). */
export const ADDITION_EOS_ID = 12;
/** Id of the padding token (text form `_`). */
export const ADDITION_PAD_ID = 13;
/** Vocabulary size of the addition task without BOS and hints (the first version's 14 tokens). */
export const ADDITION_VOCAB_SIZE = 14;
/** Id of the BOS token (text form `^`) when the task has one. */
export const ADDITION_BOS_ID = 14;

const SYMBOLS = "0123456789+=$_";

/**
 * The configuration fields that decide how an evaluation example is written (its tokens): two
 * checkpoints can share test sets only when these agree. (`maxDigits`, `equalLength` and
 * `curriculum` shape the training distribution only.)
 */
export const ADDITION_FORMAT_FIELDS = ["format", "operandOrder", "bos", "indexHints"] as const;

/** Where the optional tokens of a configuration sit in its vocabulary. */
export interface AdditionVocabulary {
  /** Number of token ids (the model's `vocabSize`). */
  readonly size: number;
  /** Id of BOS, or null without BOS. */
  readonly bosId: number | null;
  /** Id of the hint `h_0` (hint `h_j` is `firstHintId + j`), or null without hints. */
  readonly firstHintId: number | null;
  /** Number of hint ids `H` (0 without hints). */
  readonly hints: number;
}

/** The vocabulary layout of a configuration (see the module doc). */
export function additionVocabulary(config: AdditionConfig): AdditionVocabulary {
  const bosId = config.bos ? ADDITION_BOS_ID : null;
  const firstHint = ADDITION_VOCAB_SIZE + (config.bos ? 1 : 0);
  return {
    size: firstHint + config.indexHints,
    bosId,
    firstHintId: config.indexHints > 0 ? firstHint : null,
    hints: config.indexHints,
  };
}

/** Whether `id` is a hint token of `vocab`. */
export function isHintId(vocab: AdditionVocabulary, id: number): boolean {
  return vocab.firstHintId !== null && id >= vocab.firstHintId && id < vocab.firstHintId + vocab.hints;
}

function vocabularyWords(vocab: AdditionVocabulary): string {
  return `digits, +, =, $ for EOS${vocab.bosId !== null ? ", ^ for BOS" : ""}${
    vocab.hints > 0 ? `, [0]..[${vocab.hints - 1}] for hints` : ""
  }`;
}

const HINT_TEXT = /\[(\d+)\]/y;

/** Text to token ids in `config`'s vocabulary; a RangeError names the first text outside it. */
export function encodeAdditionText(text: string, config: AdditionConfig): Int32Array {
  const vocab = additionVocabulary(config);
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const id = SYMBOLS.indexOf(c);
    if (id >= 0) {
      out.push(id);
    } else if (c === "^" && vocab.bosId !== null) {
      out.push(vocab.bosId);
    } else if (c === "[" && vocab.firstHintId !== null) {
      HINT_TEXT.lastIndex = i;
      const m = HINT_TEXT.exec(text);
      if (!m || Number(m[1]) >= vocab.hints) {
        throw new RangeError(
          `addition: "${m ? m[0] : text.slice(i, i + 6)}" at index ${i} is not a hint token ([0]..[${
            vocab.hints - 1
          }])`,
        );
      }
      out.push(vocab.firstHintId + Number(m[1]));
      i += m[0].length - 1;
    } else {
      throw new RangeError(
        `addition: character "${c}" at index ${i} is not in the vocabulary (${vocabularyWords(vocab)})`,
      );
    }
  }
  return Int32Array.from(out);
}

/** Token ids to text in `config`'s vocabulary; ids outside it are written `<id>`. */
export function decodeAdditionTokens(tokens: ArrayLike<number>, config: AdditionConfig): string {
  const vocab = additionVocabulary(config);
  return Array.from(tokens, (id) => {
    if (id >= 0 && id < SYMBOLS.length) return SYMBOLS[id];
    if (id === vocab.bosId) return "^";
    if (isHintId(vocab, id)) return `[${id - vocab.firstHintId!}]`;
    return `<${id}>`;
  }).join("");
}

/** The text of hint id `h_j`. */
function hintText(j: number): string {
  return `[${j}]`;
}

/** A number (given most-significant digit first) written in `order`, each digit after its hint. */
function writeNumber(digits: string, order: AdditionFormat, hintOffset: number | null): string {
  const n = digits.length;
  let s = "";
  for (let k = 0; k < n; k++) {
    const place = order === "lsd" ? k : n - 1 - k;
    if (hintOffset !== null) s += hintText(hintOffset + place);
    s += digits[n - 1 - place];
  }
  return s;
}

function asConfig(config: AdditionConfig | AdditionFormat): AdditionConfig {
  return typeof config === "string" ? additionConfig({ format: config }) : config;
}

/**
 * The text of one example `[^]a+b=c$` in `config`'s format (a bare answer order means the default
 * format with that answer order), hints starting at `hintOffset` (0 in evaluation). Operands are
 * decimal digit strings, most-significant digit first (as `randomOperand` draws them).
 */
export function additionText(
  a: string,
  b: string,
  config: AdditionConfig | AdditionFormat,
  hintOffset = 0,
): string {
  const c = asConfig(config);
  for (const [name, operand] of [["a", a], ["b", b]] as const) {
    if (!/^\d+$/.test(operand)) throw new RangeError(`addition: operand ${name} "${operand}" is not digits`);
  }
  const sum = (BigInt(a) + BigInt(b)).toString();
  let offset: number | null = null;
  if (c.indexHints > 0) {
    const places = Math.max(a.length, b.length, sum.length);
    if (!Number.isInteger(hintOffset) || hintOffset < 0 || hintOffset + places > c.indexHints) {
      throw new RangeError(
        `addition: hint offset ${hintOffset} with ${places} places needs hint ids up to ${
          hintOffset + places - 1
        }; the task has indexHints = ${c.indexHints}`,
      );
    }
    offset = hintOffset;
  } else if (hintOffset !== 0) {
    throw new RangeError(`addition: hint offset ${hintOffset} given but the task has no index hints`);
  }
  return `${c.bos ? "^" : ""}${writeNumber(a, c.operandOrder, offset)}+${
    writeNumber(b, c.operandOrder, offset)
  }=${writeNumber(sum, c.format, offset)}$`;
}

/** The prompt of `a+b` in `config`'s format: the example text up to and including `=` (hints at 0). */
export function additionPromptText(a: string, b: string, config: AdditionConfig): string {
  const text = additionText(a, b, config, 0);
  return text.slice(0, text.indexOf("=") + 1);
}

const DEFAULT_CONFIG = additionConfig();

/**
 * Encode an example text in `config`'s vocabulary (default: the default format) and mark what is
 * supervised: every token after `=` except hints (the answer digits and EOS). `places` gives each
 * answer digit its place value (the answer order is `config.format`), every other token -1.
 */
export function additionExample(text: string, config: AdditionConfig = DEFAULT_CONFIG): Example {
  const tokens = encodeAdditionText(text, config);
  const vocab = additionVocabulary(config);
  const eq = tokens.indexOf(EQUALS_ID);
  if (eq < 0) throw new RangeError(`addition: example "${text}" has no "="`);
  const loss = new Uint8Array(tokens.length);
  const places = new Int16Array(tokens.length).fill(-1);
  const digits: number[] = [];
  for (let i = eq + 1; i < tokens.length; i++) {
    if (isHintId(vocab, tokens[i])) continue;
    loss[i] = 1;
    if (tokens[i] <= 9) digits.push(i);
  }
  if (digits.length > 0x8000) {
    throw new RangeError(`addition: an answer of ${digits.length} digits has places beyond 32767`);
  }
  digits.forEach((at, k) => {
    places[at] = config.format === "lsd" ? k : digits.length - 1 - k;
  });
  return { tokens, loss, places };
}

/** Tokens of the longest example whose operands have at most `digits` digits, in `config`'s format. */
export function additionExampleLength(config: AdditionConfig, digits: number = config.maxDigits): number {
  // [BOS] a (d) + b (d) = answer (d + 1) EOS, and a hint before each of the 3d + 1 digits
  return (config.bos ? 1 : 0) + 3 * digits + 4 + (config.indexHints > 0 ? 3 * digits + 1 : 0);
}

/**
 * Throw a RangeError when sums of `digits`-digit operands need more hint ids than `config` has (at
 * offset 0 the answer's places `0..digits` need `digits + 1`; at `hintOffset` h, the ids up to
 * `h + digits`). Without hints every length fits, and a non-zero offset is an error.
 */
export function checkHintRange(config: AdditionConfig, digits: number, hintOffset = 0): void {
  if (hintOffset !== 0 && config.indexHints === 0) {
    throw new RangeError(`addition: hint offset ${hintOffset} given but the task has no index hints`);
  }
  if (!Number.isInteger(hintOffset) || hintOffset < 0) {
    throw new RangeError(`addition: the hint offset must be an integer >= 0, got ${hintOffset}`);
  }
  if (config.indexHints > 0 && hintOffset + digits + 1 > config.indexHints) {
    throw new RangeError(
      `addition: operands of ${digits} digits need ${digits + 1} hint ids (places 0..${digits})` +
        (hintOffset > 0 ? ` from hint id ${hintOffset}` : "") +
        `; the task has indexHints = ${config.indexHints}`,
    );
  }
}

/**
 * Decode a generated answer in `format` order to a number string: hint tokens (`[j]`) are skipped and
 * everything from EOS (`$`) on is dropped.
 */
export function decodeAdditionAnswer(answer: string, format: AdditionFormat): string {
  const digits = answer.replace(/\$.*$/s, "").replace(/\[\d+\]/g, "");
  return format === "lsd" ? [...digits].reverse().join("") : digits;
}
