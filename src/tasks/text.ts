/**
 * Byte-level language modelling (SPEC section 8) on a corpus the caller passes in as bytes
 * (the CLI reads the user's file; the default corpus is {@linkcode DEFAULT_CORPUS}). The first 90%
 * of the bytes are the training split, the last 10% the held-out eval split. An example is a
 * window of `seqLen` consecutive bytes at a random offset inside its split; every byte after the
 * first is a target. Vocabulary: the 256 byte values; PAD is byte 0 (never supervised).
 *
 * @module
 */

import type { Task } from "./types.ts";

/** Configuration of the text task. The corpus itself is not stored, only its name, size and hash. */
export interface TextConfig {
  /** Always `text`. */
  readonly task: "text";
  /** Bytes per example. */
  readonly seqLen: number;
  /** Where the corpus came from (a file name, or `default`). */
  readonly corpusName: string;
  /** Corpus size in bytes. */
  readonly corpusBytes: number;
  /** FNV-1a hash of the corpus bytes, hex. */
  readonly corpusHash: string;
}

/** FNV-1a 32-bit hash of bytes, as 8 hex digits. */
export function fnv1aHex(bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i];
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** Fraction of the corpus used for training; the rest is the eval split. */
export const TEXT_TRAIN_FRACTION = 0.9;

/** Build a {@linkcode TextConfig} for a corpus, validating sizes (each split must hold one example). */
export function textConfig(corpus: Uint8Array, corpusName: string, seqLen = 64): TextConfig {
  if (!Number.isInteger(seqLen) || seqLen < 2) {
    throw new RangeError(`text: seqLen must be an integer >= 2, got ${seqLen}`);
  }
  if (corpus.length === 0) throw new RangeError(`text: corpus "${corpusName}" is empty`);
  const evalBytes = corpus.length - Math.floor(corpus.length * TEXT_TRAIN_FRACTION);
  if (evalBytes < seqLen) {
    throw new RangeError(
      `text: corpus "${corpusName}" has ${corpus.length} bytes; its 10% eval split (${evalBytes} bytes) ` +
        `is shorter than seqLen ${seqLen} (need at least ${
          Math.round(seqLen / (1 - TEXT_TRAIN_FRACTION))
        } bytes)`,
    );
  }
  return { task: "text", seqLen, corpusName, corpusBytes: corpus.length, corpusHash: fnv1aHex(corpus) };
}

/**
 * Create the text task over `corpus`. Without a corpus (e.g. for prediction from a checkpoint)
 * the codec works and `sample` throws.
 */
export function createTextTask(config: TextConfig, corpus?: Uint8Array): Task<TextConfig> {
  if (corpus && corpus.length !== config.corpusBytes) {
    throw new RangeError(
      `text: corpus "${config.corpusName}" has ${corpus.length} bytes, the config says ${config.corpusBytes}`,
    );
  }
  const split = Math.floor(config.corpusBytes * TEXT_TRAIN_FRACTION);
  return {
    config,
    vocabSize: 256,
    padId: 0,
    maxExampleLength: config.seqLen,
    sample(rng, part) {
      if (!corpus) throw new Error(`text: no corpus bytes were given for "${config.corpusName}"`);
      const [lo, hi] = part === "train" ? [0, split] : [split, corpus.length];
      const start = lo + rng.int(0, hi - lo - config.seqLen);
      const tokens = Int32Array.from(corpus.subarray(start, start + config.seqLen));
      const loss = new Uint8Array(tokens.length).fill(1);
      loss[0] = 0;
      return { tokens, loss };
    },
    encode: (text) => Int32Array.from(new TextEncoder().encode(text)),
    decode: (tokens) => new TextDecoder().decode(Uint8Array.from(tokens)),
  };
}
