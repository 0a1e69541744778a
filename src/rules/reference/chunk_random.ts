/**
 * Seeded random head inputs for the tests of the chunk-parallel forms: mid-sequence starts, a
 * non-zero `S0`, an optional carry, and an option that makes the positive-decay clamp bind at
 * every step.
 *
 * @module
 */

import { isPerColumnRule, isWindowRule, type RuleConfig } from "../config.ts";
import { Rng } from "../../testing/compare.ts";
import { normalizeRows } from "./qk_norm.ts";
import type { HeadCarry, HeadInputs } from "./head.ts";

/** Options of {@linkcode randomHeadInputs}. */
export interface RandomHeadOptions {
  /** Positions. */
  T: number;
  /** Key size. */
  dk: number;
  /** Value size. */
  dv: number;
  /** Seed of the PRNG. */
  seed: number;
  /** Positions flagged as sequence starts (besides position 0 of a fresh run). */
  starts?: readonly number[];
  /** Draw a non-zero `S0`. */
  s0?: boolean;
  /** Continue from a random carry (with a full window for window rules). */
  carry?: boolean;
  /** Large `beta` and huge `lambdabar`: the clamp binds at every Falcon step. */
  clamp?: boolean;
}

/** Random inputs of one head for `config.rule`. */
export function randomHeadInputs(config: RuleConfig, options: RandomHeadOptions): HeadInputs {
  const { T, dk, dv } = options;
  const rng = new Rng(options.seed);
  const rule = config.rule;
  const betaWidth = isPerColumnRule(rule) ? dv : 1;
  const clamp = options.clamp ?? false;
  let beta: Float64Array;
  let lambdabar: Float64Array;
  if (rule === "mamba2") {
    beta = rng.uniforms(T, 0.05, 0.8);
    lambdabar = rng.uniforms(T, 0, 1);
  } else if (rule === "deltanet" || rule === "gated_deltanet") {
    beta = rng.uniforms(T, 0.1, 0.9);
    lambdabar = clamp ? rng.uniforms(T, 5, 7) : rng.uniforms(T, 0.01, 0.5);
  } else {
    beta = clamp ? rng.uniforms(T * betaWidth, 1.2, 1.9) : rng.uniforms(T * betaWidth, 0.1, 1.9);
    lambdabar = clamp ? rng.uniforms(T, 1e3, 2e3) : rng.uniforms(T, 0.01, 0.3);
  }
  const starts = new Uint8Array(T);
  for (const s of options.starts ?? []) if (s < T) starts[s] = 1;
  let carry: HeadCarry | undefined;
  if (options.carry) {
    const count = isWindowRule(rule) ? config.window - 1 : 0;
    carry = {
      state: rng.normals(dk * dv, 0.3),
      lastKey: normalizeRows(rng.normals(dk), 1, dk, config.qkNorm, config.epsRms),
      windowX: normalizeRows(rng.normals(count * dk), count, dk, config.qkNorm, config.epsRms),
      windowY: rng.normals(count * dv),
      count,
    };
  }
  return {
    T,
    dk,
    dv,
    q: rng.normals(T * dk),
    k: rng.normals(T * dk),
    v: rng.normals(T * dv),
    beta,
    lambdabar,
    starts,
    s0: options.s0 ? rng.normals(dk * dv, 0.3) : new Float64Array(dk * dv),
    carry,
    mambaA: 0.7,
    retnetG: 1 - Math.pow(2, -6),
  };
}

/** The first `T1` positions of `inputs` (no carry change) and the rest continuing from `carry`. */
export function splitHeadInputs(
  config: RuleConfig,
  inputs: HeadInputs,
  T1: number,
): [HeadInputs, (carry: HeadCarry) => HeadInputs] {
  const { T, dk, dv } = inputs;
  const bw = isPerColumnRule(config.rule) ? dv : 1;
  const part = (lo: number, hi: number, carry: HeadCarry | undefined): HeadInputs => ({
    ...inputs,
    T: hi - lo,
    q: inputs.q.slice(lo * dk, hi * dk),
    k: inputs.k.slice(lo * dk, hi * dk),
    v: inputs.v.slice(lo * dv, hi * dv),
    beta: inputs.beta.slice(lo * bw, hi * bw),
    lambdabar: inputs.lambdabar.slice(lo, hi),
    starts: inputs.starts.slice(lo, hi),
    carry,
  });
  return [part(0, T1, inputs.carry), (carry) => part(T1, T, carry)];
}
