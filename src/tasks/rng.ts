/**
 * A seeded, serialisable pseudo-random generator for data streams, and seed derivation by purpose.
 *
 * Every stream of examples is drawn from its own {@linkcode DataRng}, seeded by
 * {@linkcode deriveSeed}`(seed, purpose)`: the training stream uses purpose `"train"`, each test set
 * its own purpose (e.g. `"eval:addition:len=12"`), model initialisation `"init"`. So a training set
 * and a test set never share a seed, and the whole state of a stream is one 32-bit integer that a
 * checkpoint can store.
 *
 * @module
 */

/** mulberry32: a small PRNG whose entire state is one 32-bit word. */
export class DataRng {
  #state: number;

  /** Seed with any 32-bit integer (taken modulo 2^32). */
  constructor(seed: number) {
    if (!Number.isInteger(seed)) throw new RangeError(`DataRng: seed must be an integer, got ${seed}`);
    this.#state = seed >>> 0;
  }

  /** The current state; `new DataRng(rng.state)` continues the same stream. */
  get state(): number {
    return this.#state;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in `[lo, hi]` (both inclusive). */
  int(lo: number, hi: number): number {
    if (!(Number.isInteger(lo) && Number.isInteger(hi) && lo <= hi)) {
      throw new RangeError(`DataRng.int: need integers lo <= hi, got [${lo}, ${hi}]`);
    }
    return lo + Math.floor(this.uniform() * (hi - lo + 1));
  }
}

/**
 * A 32-bit seed for one purpose, derived from a run seed: FNV-1a over the purpose string, mixed
 * with the seed through a murmur3 finaliser. Different purposes give unrelated seeds.
 */
export function deriveSeed(seed: number, purpose: string): number {
  if (!Number.isInteger(seed)) throw new RangeError(`deriveSeed: seed must be an integer, got ${seed}`);
  let h = 0x811c9dc5;
  for (let i = 0; i < purpose.length; i++) {
    h ^= purpose.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= Math.imul(seed >>> 0, 0x9e3779b1);
  h ^= Math.floor(seed / 4294967296) >>> 0; // high bits of seeds above 2^32
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
