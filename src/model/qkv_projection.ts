/**
 * The q, k, v inputs of every mixer (SPEC section 7): three projections of the block's normalised
 * input, each followed, with `shortConv`, by the causal depthwise convolution of width 4 and SiLU.
 * The fast-weight mixer and the attention mixer both build their q, k, v here.
 *
 *     u = x W_u                      for u in q, k, v          (B, T, D)
 *     u = silu(conv_u(x W_u))        with shortConv: weight `[D, 4]`, taps cut at sequence starts
 *
 * Shape legend: `B, T, D = dModel, H, Dk = D / H`. The outputs are written as heads `(B, T, H, Dk)`,
 * the same memory order as `(B, T, D)` rows (backends have no views, so the switch is a copy).
 * Parameters: `${prefix}.{q,k,v}_proj` `[D, D]`, and `${prefix}.{q,k,v}_conv` `[D, 4]` with shortConv
 * (`params.ts`). Memory kept for backward: the three `(B, T, D)` conv inputs (shortConv only).
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import { linearBackward, linearForward } from "./linear.ts";
import type { ParamLookup, StepContext } from "./mixer.ts";
import type { ModelConfig, NamedParam } from "./types.ts";

/** The three projected streams. */
export const QKV = ["q", "k", "v"] as const;

/** One of `q`, `k`, `v`. */
export type Qkv = (typeof QKV)[number];

/** Activations of the last forward, kept for backward. */
interface ProjectionActs {
  readonly B: number;
  readonly T: number;
  /** (B, T, D) projections before the short convolution: the conv's input. */
  readonly pre: Record<Qkv, Tensor>;
}

/** q, k, v projections with the optional short convolution, forward and backward. */
export class QkvProjection {
  readonly #be: Backend;
  readonly #dModel: number;
  readonly #proj: Record<Qkv, NamedParam>;
  readonly #conv: Record<Qkv, NamedParam> | null;
  #acts: ProjectionActs | null = null;

  /** Bind `${prefix}.{q,k,v}_proj` and, with `config.shortConv`, `${prefix}.{q,k,v}_conv`. */
  constructor(backend: Backend, config: ModelConfig, prefix: string, param: ParamLookup) {
    this.#be = backend;
    this.#dModel = config.dModel;
    this.#proj = { q: param(`${prefix}.q_proj`), k: param(`${prefix}.k_proj`), v: param(`${prefix}.v_proj`) };
    this.#conv = config.shortConv
      ? { q: param(`${prefix}.q_conv`), k: param(`${prefix}.k_conv`), v: param(`${prefix}.v_conv`) }
      : null;
  }

  #ensure(B: number, T: number): ProjectionActs | null {
    if (!this.#conv) return null;
    if (this.#acts && this.#acts.B === B && this.#acts.T === T) return this.#acts;
    this.dispose();
    const flat = [B, T, this.#dModel];
    const be = this.#be;
    this.#acts = { B, T, pre: { q: be.zeros(flat), k: be.zeros(flat), v: be.zeros(flat) } };
    return this.#acts;
  }

  /** Write q, k, v of `x` `(B, T, D)` into `heads` (each `(B, T, H, Dk)`). */
  forward(ctx: StepContext, x: Tensor, heads: Record<Qkv, Tensor>): void {
    const be = this.#be;
    const acts = this.#ensure(ctx.B, ctx.T);
    for (const n of QKV) {
      if (acts && this.#conv) {
        // the convolution writes the heads directly (same memory order, and it checks sizes only)
        linearForward(be, acts.pre[n], x, this.#proj[n]);
        be.shortConvForward(heads[n], acts.pre[n], this.#conv[n].value, ctx.starts);
      } else {
        // a matmul takes its output width from the last dimension, so it writes rows of D first
        const flat = ctx.ws.get("qkv.flat", [ctx.B, ctx.T, this.#dModel]);
        linearForward(be, flat, x, this.#proj[n]);
        be.copy(heads[n], flat);
      }
    }
  }

  /**
   * Accumulate `dx` `(B, T, D)` and the projection and conv gradients from the gradients of the
   * heads `dHeads` (each `(B, T, H, Dk)`); `x` as given to forward.
   */
  backward(ctx: StepContext, x: Tensor, dHeads: Record<Qkv, Tensor>, dx: Tensor): void {
    const be = this.#be;
    const acts = this.#acts;
    if (this.#conv && (!acts || acts.B !== ctx.B || acts.T !== ctx.T)) {
      throw new Error("q/k/v projection: backward before forward");
    }
    const flatShape = [ctx.B, ctx.T, this.#dModel];
    for (const n of QKV) {
      if (acts && this.#conv) {
        // the convolution backward reads the heads' gradient directly (it checks sizes only)
        const dPre = ctx.ws.get("qkv.dPre", flatShape, true);
        be.shortConvBackward(
          dPre,
          this.#conv[n].grad,
          dHeads[n],
          acts.pre[n],
          this.#conv[n].value,
          ctx.starts,
        );
        linearBackward(be, dx, dPre, x, this.#proj[n]);
      } else {
        const dFlat = ctx.ws.get("qkv.dFlat", flatShape);
        be.copy(dFlat, dHeads[n]);
        linearBackward(be, dx, dFlat, x, this.#proj[n]);
      }
    }
  }

  /** Release the activations kept for backward. */
  dispose(): void {
    if (!this.#acts) return;
    for (const t of Object.values(this.#acts.pre)) this.#be.dispose(t);
    this.#acts = null;
  }
}
