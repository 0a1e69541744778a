/**
 * One head of one batch row: the unit every reference form computes. The batched API
 * (`fast_weight.ts`) slices `[B, T, H, D]` tensors into these and scatters results back.
 *
 * Shapes (row-major): `T` positions, `Dk` key size, `Dv` value size, `W` window size.
 *
 * @module
 */

import type { RuleConfig } from "../config.ts";

/** Carried state of one head (SPEC section 2, continuation). */
export interface HeadCarry {
  /** State `[Dk, Dv]`. */
  state: Float64Array;
  /** Prefix alignment: last key feature `phi(k)` `[Dk]` (after normalisation). */
  lastKey: Float64Array;
  /** Window rules: up to `W-1` write features, oldest first, `[count, Dk]`. */
  windowX: Float64Array;
  /** Matching targets `[count, Dv]`. */
  windowY: Float64Array;
  /** Number of real pairs in the window carry (0..W-1). */
  count: number;
}

/** Inputs of one head. q and k are raw: the form applies `config.qkNorm`. */
export interface HeadInputs {
  /** Positions. */
  T: number;
  /** Key size. */
  dk: number;
  /** Value size. */
  dv: number;
  /** `[T, Dk]`. */
  q: Float64Array;
  /** `[T, Dk]`. */
  k: Float64Array;
  /** `[T, Dv]`. */
  v: Float64Array;
  /** `[T]`, or `[T, Dv]` for falcon2/falcon2a. */
  beta: Float64Array;
  /** `[T]`. */
  lambdabar: Float64Array;
  /** `[T]`, 1 where a sequence starts. Position 0 counts as a start when there is no carry. */
  starts: Uint8Array;
  /** Reset state `[Dk, Dv]` (zeros when the caller gave none). */
  s0: Float64Array;
  /** Continue from this carry instead of starting fresh. */
  carry?: HeadCarry;
  /** Mamba-2 `A_h` of this head. */
  mambaA: number;
  /** RetNet decay `g_h` of this head. */
  retnetG: number;
}

/** Outputs of one head. */
export interface HeadForward {
  /** Readout `[T, Dv]`. */
  o: Float64Array;
  /** Carry after position T-1. */
  carry: HeadCarry;
}

/** Gradients of `sum(o * dO)` for one head. */
export interface HeadGrads {
  /** `[T, Dk]` (raw q). */
  dq: Float64Array;
  /** `[T, Dk]` (raw k). */
  dk: Float64Array;
  /** `[T, Dv]`. */
  dv: Float64Array;
  /** Shape of beta. */
  dbeta: Float64Array;
  /** `[T]`. */
  dlambdabar: Float64Array;
  /** `[Dk, Dv]`: summed over every start that reset to S0 (position 0 too when there is no carry). */
  ds0: Float64Array;
  /** `[Dk, Dv]`: with respect to `carry.state` (zeros without carry). */
  dCarryState: Float64Array;
}

/** A reference form of one rule, forward and backward, on one head. */
export interface HeadForm {
  /** Forward pass. */
  forward(config: RuleConfig, inputs: HeadInputs, chunkSize: number): HeadForward;
  /** Backward pass: gradients of `sum(o * dO)`, `dO` `[T, Dv]`. */
  backward(config: RuleConfig, inputs: HeadInputs, dO: Float64Array, chunkSize: number): HeadGrads;
}
