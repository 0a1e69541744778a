/**
 * Random fast-weight problems for the parity tests of the `webgpu` backend against the float64
 * reference backend: the same inputs on both backends, then every output compared.
 *
 * @module
 */

import type { Backend, Carry, FastWeightInputs, Tensor } from "../src/rules/backend.ts";
import { isPerColumnRule, retnetDecay, type RuleConfig, type RuleName } from "../src/rules/config.ts";
import type { HeadInputs } from "../src/rules/reference/head.ts";
import { Rng } from "../src/testing/compare.ts";

/** Every rule the chunk-parallel WebGPU kernels run, in the order the chunk tests take them. */
export const CHUNK_RULES: readonly RuleName[] = [
  "falcon1a",
  "falcon3a",
  "linear",
  "retnet",
  "mamba2",
  "falcon1",
  "deltanet",
  "gated_deltanet",
  "falcon2",
  "falcon2a",
  "falcon3",
];

/** Sizes and options of a random problem. */
export interface CaseSpec {
  /** Batch rows. */
  B: number;
  /** Positions. */
  T: number;
  /** Heads. */
  H: number;
  /** Key size. */
  dk: number;
  /** Value size. */
  dv: number;
  /** Seed of the data. */
  seed: number;
  /** Pack several sequences per row (random starts). */
  packed?: boolean;
  /** Give a random S0. */
  s0?: boolean;
  /** Scale of lambdabar (large values make the clamp bind at every step). */
  lambdaScale?: number;
  /** Lower end of the Falcon rules' beta range (default 0.1). */
  betaLo?: number;
}

/** Host data of a random problem. */
export interface CaseData {
  /** `[B, T, H, Dk]`. */
  q: Float64Array;
  /** `[B, T, H, Dk]`. */
  k: Float64Array;
  /** `[B, T, H, Dv]`. */
  v: Float64Array;
  /** `[B, T, H]` or `[B, T, H, Dv]`. */
  beta: Float64Array;
  /** `[B, T, H]`. */
  lambdabar: Float64Array;
  /** `[B, H, Dk, Dv]` or absent. */
  s0?: Float64Array;
  /** `[B, T]` or absent. */
  starts?: Uint8Array;
  /** Output gradient `[B, T, H, Dv]`. */
  dO: Float64Array;
}

/** Draw a random problem for `config`. */
export function randomCase(config: RuleConfig, spec: CaseSpec): CaseData {
  const { B, T, H, dk, dv } = spec;
  const rng = new Rng(spec.seed);
  const betaWidth = isPerColumnRule(config.rule) ? dv : 1;
  const n = B * T * H;
  // beta: (0, 2) for Falcon rules, (0, 1) for deltanets, a dt in (0.05, 1) for mamba2
  const betaHi = config.rule.startsWith("falcon") ? 1.9 : config.rule.includes("delta") ? 0.9 : 1;
  let starts: Uint8Array | undefined;
  if (spec.packed) {
    starts = new Uint8Array(B * T);
    for (let i = 0; i < B * T; i++) starts[i] = rng.uniform() < 0.15 ? 1 : 0;
  }
  return {
    q: rng.normals(n * dk),
    k: rng.normals(n * dk),
    v: rng.normals(n * dv),
    beta: rng.uniforms(n * betaWidth, spec.betaLo ?? 0.1, betaHi),
    lambdabar: rng.uniforms(n, 0, spec.lambdaScale ?? 0.5),
    s0: spec.s0 ? rng.normals(B * H * dk * dv, 0.3) : undefined,
    starts,
    dO: rng.normals(n * dv),
  };
}

/** Upload a problem (positions `[from, to)`) to a backend. */
export function uploadCase(
  backend: Backend,
  config: RuleConfig,
  spec: CaseSpec,
  data: CaseData,
  from = 0,
  to = spec.T,
  carry?: Carry,
): { inputs: FastWeightInputs; dO: Tensor } {
  const { B, T, H, dk, dv } = spec;
  const L = to - from;
  const betaWidth = isPerColumnRule(config.rule) ? dv : 1;
  const slice = (src: Float64Array, width: number) => {
    const out = new Float64Array(B * L * H * width);
    for (let b = 0; b < B; b++) {
      const s = ((b * T + from) * H) * width;
      out.set(src.subarray(s, s + L * H * width), b * L * H * width);
    }
    return out;
  };
  let starts: Uint8Array | undefined;
  if (data.starts) {
    starts = new Uint8Array(B * L);
    for (let b = 0; b < B; b++) starts.set(data.starts.subarray(b * T + from, b * T + to), b * L);
  }
  const betaShape = betaWidth > 1 ? [B, L, H, dv] : [B, L, H];
  return {
    inputs: {
      q: backend.fromArray(slice(data.q, dk), [B, L, H, dk]),
      k: backend.fromArray(slice(data.k, dk), [B, L, H, dk]),
      v: backend.fromArray(slice(data.v, dv), [B, L, H, dv]),
      beta: backend.fromArray(slice(data.beta, betaWidth), betaShape),
      lambdabar: backend.fromArray(slice(data.lambdabar, 1), [B, L, H]),
      s0: data.s0 ? backend.fromArray(data.s0, [B, H, dk, dv]) : undefined,
      starts,
      carry,
    },
    dO: backend.fromArray(slice(data.dO, dv), [B, L, H, dv]),
  };
}

/** Copy a carry of one backend to another. */
export async function transferCarry(from: Backend, to: Backend, carry: Carry): Promise<Carry> {
  const t = async (x: Tensor) => to.fromArray(await from.read(x), x.shape);
  return {
    state: await t(carry.state),
    lastKey: await t(carry.lastKey),
    windowX: await t(carry.windowX),
    windowY: await t(carry.windowY),
    windowCount: carry.windowCount.slice(),
  };
}

/** Head `(b, h)` of a fresh (carry-free) problem as reference {@linkcode HeadInputs}. */
export function headOf(config: RuleConfig, spec: CaseSpec, data: CaseData, b: number, h: number): HeadInputs {
  const { T, H, dk, dv } = spec;
  const bw = isPerColumnRule(config.rule) ? dv : 1;
  const rows = (src: Float64Array, D: number) => {
    const out = new Float64Array(T * D);
    for (let t = 0; t < T; t++) {
      out.set(src.subarray(((b * T + t) * H + h) * D, ((b * T + t) * H + h + 1) * D), t * D);
    }
    return out;
  };
  const bh = b * H + h;
  return {
    T,
    dk,
    dv,
    q: rows(data.q, dk),
    k: rows(data.k, dk),
    v: rows(data.v, dv),
    beta: rows(data.beta, bw),
    lambdabar: rows(data.lambdabar, 1),
    starts: data.starts ? data.starts.slice(b * T, b * T + T) : new Uint8Array(T),
    s0: data.s0 ? data.s0.slice(bh * dk * dv, (bh + 1) * dk * dv) : new Float64Array(dk * dv),
    mambaA: config.mambaA?.[h] ?? 1,
    retnetG: retnetDecay(config.retnetHeads?.[h] ?? h),
  };
}
