/**
 * Index bookkeeping of the chunk-parallel forms (SPEC sections 2 and 4): sequence starts, which
 * pair `(x_j, y_j)` each step writes, where each pair's feature and target come from, and the
 * segment structure that cuts decay products and windows at a start.
 *
 * Pairs are indexed by position `j` (`x_j` is written at step `j`); the up to `W-1` pairs of a
 * carry get the virtual positions `-P..-1`. A chunk of steps `a..e` reads the pairs
 * `a-W+1..e` (`W` the window, 1 for non-window rules).
 *
 * @module
 */

import { isPerColumnRule, isWindowRule, type RuleConfig } from "../config.ts";
import type { HeadInputs } from "./head.ts";

/** Everything about one head's sequence that does not depend on the chunk size. */
export interface SequencePlan {
  /** Positions. */
  T: number;
  /** Key size. */
  dk: number;
  /** Value size. */
  dv: number;
  /** Window width `B` of Falcon-3/3A, 1 for every other rule. */
  W: number;
  /** Prefix alignment: `x_t = phi(k_{t-1})` and a sentinel at every start. */
  prefix: boolean;
  /** Effective starts `[T]` (position 0 is a start when there is no carry). */
  starts: Uint8Array;
  /** Last start at or before each position, or -1 inside the carried sequence `[T]`. */
  seg: Int32Array;
  /** Carried window pairs used (0..W-1). */
  carryCount: number;
  /** Carried window features `[carryCount, dk]`, oldest first. */
  carryX: Float64Array;
  /** Carried window targets `[carryCount, dv]`. */
  carryY: Float64Array;
  /** Carried last key feature `[dk]` (prefix alignment), or null without carry. */
  lastKey: Float64Array | null;
}

/** Check the input sizes of one head and plan its sequence. */
export function planSequence(config: RuleConfig, inputs: HeadInputs): SequencePlan {
  const { T, dk, dv, carry } = inputs;
  const expect = (name: string, length: number, want: number) => {
    if (length !== want) throw new RangeError(`${name} has length ${length}, expected ${want}`);
  };
  expect("q", inputs.q.length, T * dk);
  expect("k", inputs.k.length, T * dk);
  expect("v", inputs.v.length, T * dv);
  expect("beta", inputs.beta.length, isPerColumnRule(config.rule) ? T * dv : T);
  expect("lambdabar", inputs.lambdabar.length, T);
  expect("starts", inputs.starts.length, T);
  expect("s0", inputs.s0.length, dk * dv);
  const W = isWindowRule(config.rule) ? config.window : 1;
  const starts = inputs.starts.slice();
  if (!carry && T > 0) starts[0] = 1;
  const seg = new Int32Array(T);
  let last = -1;
  for (let t = 0; t < T; t++) {
    if (starts[t]) last = t;
    seg[t] = last;
  }
  let carryCount = 0;
  let carryX = new Float64Array(0);
  let carryY = new Float64Array(0);
  let lastKey: Float64Array | null = null;
  if (carry) {
    expect("carry.state", carry.state.length, dk * dv);
    expect("carry.lastKey", carry.lastKey.length, dk);
    lastKey = carry.lastKey;
    if (W > 1) {
      carryCount = Math.min(carry.count, W - 1);
      const first = carry.count - carryCount;
      carryX = carry.windowX.slice(first * dk, carry.count * dk);
      carryY = carry.windowY.slice(first * dv, carry.count * dv);
      expect("carry.windowX (used rows)", carryX.length, carryCount * dk);
      expect("carry.windowY (used rows)", carryY.length, carryCount * dv);
    }
  }
  return {
    T,
    dk,
    dv,
    W,
    prefix: config.alignment === "prefix",
    starts,
    seg,
    carryCount,
    carryX,
    carryY,
    lastKey,
  };
}

/** First pair index of the window of the sequence holding position `t` (`j0`, SPEC section 3). */
export function firstPair(plan: SequencePlan, t: number): number {
  const s = plan.seg[t];
  return s >= 0 ? s + (plan.prefix ? 1 : 0) : -plan.carryCount;
}

/** Where the feature of pair `j` comes from. */
export type PairSource =
  | { kind: "key"; row: number }
  | { kind: "carry"; row: number }
  | { kind: "lastKey" }
  | { kind: "none" };

/** Source of the feature `x_j` (and, for `key` / `lastKey` / `carry`, of the target). */
export function pairSource(plan: SequencePlan, j: number): PairSource {
  if (j < 0) return j >= -plan.carryCount ? { kind: "carry", row: plan.carryCount + j } : { kind: "none" };
  if (!plan.prefix) return { kind: "key", row: j };
  if (plan.starts[j]) return { kind: "none" }; // the sentinel holds no pair
  return j === 0 ? { kind: "lastKey" } : { kind: "key", row: j - 1 };
}

/** Layout of one chunk of steps `a..a+n-1` and the pairs `pairLo..pairLo+np-1` it reads. */
export interface ChunkLayout {
  /** First step. */
  a: number;
  /** Steps. */
  n: number;
  /** First pair index (`a - W + 1`, may be negative). */
  pairLo: number;
  /** Pairs read (`n + W - 1`). */
  np: number;
  /** Raw key rows `kLo..kLo+kN-1` used for features. */
  kLo: number;
  /** Number of raw key rows used. */
  kN: number;
  /** Raw value rows `vLo..vLo+vN-1` used as targets. */
  vLo: number;
  /** Number of raw value rows used. */
  vN: number;
  /**
   * Feature row of each pair in the stack `[normalised keys (kN); carryX (P); lastKey (1 if carry)]`,
   * or -1 for a zero row `[np]`.
   */
  pairX: Int32Array;
  /** Target row of each pair in the stack `[values (vN); carryY (P)]`, or -1 `[np]`. */
  pairY: Int32Array;
  /** `H[i, p] = 1` where step `a+i` writes pair `pairLo+p` (it is in the window `I_t`) `[n, np]`. */
  H: Float64Array;
  /** Window count `B_t` per step `[n]`. */
  Bt: Int32Array;
  /** Segment id per step (the absolute start position, -1 for the carried sequence) `[n]`. */
  segId: Int32Array;
  /** Local index of the first step of each step's segment inside the chunk `[n]`. */
  segFirst: Int32Array;
  /** 1 where the step's segment started inside the chunk, so its base state is `S0` `[n]`. */
  base0: Uint8Array;
  /** 1 at a prefix-alignment sentinel step (writes and decays nothing) `[n]`. */
  sentinel: Uint8Array;
}

/** Lay out the chunk of steps `a..a+n-1`. */
export function chunkLayout(plan: SequencePlan, a: number, n: number): ChunkLayout {
  const { W, prefix, carryCount: P } = plan;
  const e = a + n - 1;
  const pairLo = a - W + 1;
  const np = n + W - 1;
  const kLo = Math.max(0, pairLo - (prefix ? 1 : 0));
  const kN = Math.max(0, (prefix ? e - 1 : e) - kLo + 1);
  const vLo = Math.max(0, pairLo);
  const vN = e - vLo + 1;
  const pairX = new Int32Array(np).fill(-1);
  const pairY = new Int32Array(np).fill(-1);
  for (let p = 0; p < np; p++) {
    const j = pairLo + p;
    const src = pairSource(plan, j);
    if (src.kind === "key") pairX[p] = src.row - kLo;
    else if (src.kind === "carry") pairX[p] = kN + src.row;
    else if (src.kind === "lastKey") pairX[p] = kN + P;
    if (src.kind === "carry") pairY[p] = vN + src.row;
    else if (src.kind !== "none") pairY[p] = j - vLo;
  }
  const H = new Float64Array(n * np);
  const Bt = new Int32Array(n);
  const segId = new Int32Array(n);
  const segFirst = new Int32Array(n);
  const base0 = new Uint8Array(n);
  const sentinel = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const j0 = firstPair(plan, t);
    for (let j = Math.max(j0, t - W + 1); j <= t; j++) {
      if (pairX[j - pairLo] < 0) continue;
      H[i * np + (j - pairLo)] = 1;
      Bt[i]++;
    }
    segId[i] = plan.seg[t];
    segFirst[i] = Math.max(plan.seg[t], a) - a;
    base0[i] = plan.seg[t] >= a ? 1 : 0;
    sentinel[i] = prefix && plan.starts[t] ? 1 : 0;
  }
  return { a, n, pairLo, np, kLo, kN, vLo, vN, pairX, pairY, H, Bt, segId, segFirst, base0, sentinel };
}
