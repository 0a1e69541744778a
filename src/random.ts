/**
 * A small seeded pseudo-random generator for initialisation and test data.
 *
 * @module
 */

/** A seeded PRNG (mulberry32) with uniform and normal draws. */
export class Rng {
  #state: number;
  /** Seed with any 32-bit integer. */
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  uniform(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = Math.max(this.uniform(), 1e-300);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.uniform());
  }
  /** `n` standard normal draws times `scale`. */
  normals(n: number, scale = 1): Float64Array {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = scale * this.normal();
    return out;
  }
  /** `n` uniform draws in [lo, hi). */
  uniforms(n: number, lo: number, hi: number): Float64Array {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * this.uniform();
    return out;
  }
}
