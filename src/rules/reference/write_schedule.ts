/**
 * Which pairs each step writes (SPEC section 2): alignment, sequence starts, the Falcon-3/3A
 * sliding window and continuation from a carry.
 *
 * - prefix: step `t` writes `(phi(k_{t-1}), v_t)`; at a start it is the sentinel (no pair).
 * - same-step: step `t` writes `(phi(k_t), v_t)`.
 * - A start resets the state to `S0` and empties the window. Position 0 is a start unless the
 *   run continues from a carry (then it is a start only when flagged).
 * - Window rules write the last up to `W` pairs of the current sequence (`B_t` of them); other
 *   rules write just the step's own pair (a window of 1).
 *
 * @module
 */

import { type Alignment, isWindowRule, type RuleConfig } from "../config.ts";
import type { HeadCarry, HeadInputs } from "./head.ts";

/** One written pair. `xPos`/`yPos` name the position it came from, or -1 for carried values. */
export interface WritePair {
  /** Write feature `x` `[Dk]` (a normalised key). */
  x: Float64Array;
  /** Target `y` `[Dv]` (a value). */
  y: Float64Array;
  /** Position whose normalised key is `x`, or -1 when it came from the carry. */
  xPos: number;
  /** Position whose value is `y`, or -1 when it came from the carry. */
  yPos: number;
}

/** What one step does. */
export interface WriteStep {
  /** The state resets to `S0` before this step. */
  reset: boolean;
  /** Prefix-alignment sentinel: the step writes and decays nothing. */
  sentinel: boolean;
  /** Pairs written at this step, oldest first (`B_t` of them; empty at the sentinel). */
  pairs: WritePair[];
}

/** The steps of a run and what a later run needs to continue it. */
export interface WriteSchedule {
  /** One entry per position. */
  steps: WriteStep[];
  /** The last key feature `phi(k_{T-1})` `[Dk]` (the carried one when `T = 0`). */
  lastKey: Float64Array;
  /** The last up to `W-1` pairs of the current sequence, oldest first (window rules only). */
  window: WritePair[];
}

/** Window size of a rule: `config.window` for Falcon-3/3A, 1 otherwise. */
export function windowSize(config: RuleConfig): number {
  return isWindowRule(config.rule) ? config.window : 1;
}

/** Build the write schedule of one head from its normalised keys `kn` `[T, Dk]`. */
export function writeSchedule(
  config: RuleConfig,
  inputs: HeadInputs,
  kn: Float64Array,
): WriteSchedule {
  const { T, dk, dv, v, starts, carry } = inputs;
  const W = windowSize(config);
  const alignment: Alignment = config.alignment;
  const keyAt = (t: number) => kn.subarray(t * dk, (t + 1) * dk);
  let window = carry ? carriedPairs(carry, dk, dv, W - 1) : [];
  let previous: { x: Float64Array; pos: number } | undefined = carry
    ? { x: carry.lastKey, pos: -1 }
    : undefined;
  const steps: WriteStep[] = [];
  for (let t = 0; t < T; t++) {
    const reset = starts[t] !== 0 || (t === 0 && !carry);
    if (reset) window = [];
    const sentinel = reset && alignment === "prefix";
    if (!sentinel) {
      const y = v.subarray(t * dv, (t + 1) * dv);
      let pair: WritePair;
      if (alignment === "prefix") {
        if (!previous) throw new Error(`position ${t}: prefix alignment has no previous key`);
        pair = { x: previous.x, xPos: previous.pos, y, yPos: t };
      } else {
        pair = { x: keyAt(t), xPos: t, y, yPos: t };
      }
      window = [...window, pair].slice(-W);
    }
    steps.push({ reset, sentinel, pairs: sentinel ? [] : window });
    previous = { x: keyAt(t), pos: t };
  }
  const lastKey = T > 0 ? keyAt(T - 1).slice() : carry ? carry.lastKey.slice() : new Float64Array(dk);
  return { steps, lastKey, window: W > 1 ? window.slice(-(W - 1)) : [] };
}

/** The carry's window pairs (the newest `slots` of them), as constants. */
function carriedPairs(carry: HeadCarry, dk: number, dv: number, slots: number): WritePair[] {
  const pairs: WritePair[] = [];
  for (let i = Math.max(0, carry.count - slots); i < carry.count; i++) {
    pairs.push({
      x: carry.windowX.subarray(i * dk, (i + 1) * dk),
      y: carry.windowY.subarray(i * dv, (i + 1) * dv),
      xPos: -1,
      yPos: -1,
    });
  }
  return pairs;
}
