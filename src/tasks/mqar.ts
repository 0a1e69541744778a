/**
 * Multi-query associative recall (SPEC section 8): `pairs` key-value pairs, then `queries` of those
 * keys (distinct, in random order), each followed by its value. Loss and accuracy fall only on the
 * recalled values.
 *
 * Vocabulary: keys are ids `0..keys-1` (text `k<i>`), values `keys..keys+values-1` (text `v<j>`),
 * PAD is `keys + values` (text `_`). Keys within an example are distinct; values are drawn with
 * replacement.
 *
 * @module
 */

import type { DataRng } from "./rng.ts";
import type { Task } from "./types.ts";

/** Configuration of the MQAR task. */
export interface MqarConfig {
  /** Always `mqar`. */
  readonly task: "mqar";
  /** Key-value pairs per example. */
  readonly pairs: number;
  /** Queries per example (at most `pairs`). */
  readonly queries: number;
  /** Number of distinct key tokens (at least `pairs`). */
  readonly keys: number;
  /** Number of distinct value tokens. */
  readonly values: number;
}

/** Build an {@linkcode MqarConfig}, filling defaults and validating. */
export function mqarConfig(overrides: Partial<Omit<MqarConfig, "task">> = {}): MqarConfig {
  const config: MqarConfig = { task: "mqar", pairs: 8, queries: 8, keys: 32, values: 32, ...overrides };
  for (const field of ["pairs", "queries", "keys", "values"] as const) {
    if (!Number.isInteger(config[field]) || config[field] < 1) {
      throw new RangeError(`mqar: ${field} must be an integer >= 1, got ${config[field]}`);
    }
  }
  if (config.queries > config.pairs) {
    throw new RangeError(`mqar: queries (${config.queries}) must be at most pairs (${config.pairs})`);
  }
  if (config.keys < config.pairs) {
    throw new RangeError(`mqar: keys (${config.keys}) must be at least pairs (${config.pairs})`);
  }
  return config;
}

/** The first `n` entries of a seeded Fisher-Yates shuffle of `0..size-1`. */
function sampleDistinct(rng: DataRng, size: number, n: number): number[] {
  const all = Array.from({ length: size }, (_, i) => i);
  for (let i = 0; i < n; i++) {
    const j = rng.int(i, size - 1);
    [all[i], all[j]] = [all[j], all[i]];
  }
  return all.slice(0, n);
}

/** Create the MQAR task. */
export function createMqarTask(config: MqarConfig): Task<MqarConfig> {
  const { pairs, queries, keys, values } = config;
  const pad = keys + values;
  const encode = (text: string): Int32Array => {
    const words = text.trim().split(/\s+/).filter((w) => w.length > 0);
    return Int32Array.from(words, (w, i) => {
      const m = /^([kv])(\d+)$/.exec(w);
      const n = m ? Number(m[2]) : -1;
      if (m && m[1] === "k" && n < keys) return n;
      if (m && m[1] === "v" && n < values) return keys + n;
      throw new RangeError(
        `mqar: word "${w}" at index ${i} is not a token (k0..k${keys - 1}, v0..v${values - 1})`,
      );
    });
  };
  return {
    config,
    vocabSize: keys + values + 1,
    padId: pad,
    maxExampleLength: 2 * (pairs + queries),
    sample(rng) {
      const ks = sampleDistinct(rng, keys, pairs);
      const vs = ks.map(() => keys + rng.int(0, values - 1));
      const asked = sampleDistinct(rng, pairs, queries);
      const tokens = new Int32Array(2 * (pairs + queries));
      const loss = new Uint8Array(tokens.length);
      for (let i = 0; i < pairs; i++) {
        tokens[2 * i] = ks[i];
        tokens[2 * i + 1] = vs[i];
      }
      for (let j = 0; j < queries; j++) {
        const at = 2 * (pairs + j);
        tokens[at] = ks[asked[j]];
        tokens[at + 1] = vs[asked[j]];
        loss[at + 1] = 1;
      }
      return { tokens, loss };
    },
    encode,
    decode: (tokens) =>
      Array.from(
        tokens,
        (id) => (id < keys ? `k${id}` : id < pad ? `v${id - keys}` : id === pad ? "_" : `<${id}>`),
      )
        .join(" "),
  };
}
