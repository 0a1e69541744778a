/**
 * The Transformer baseline's mixer: q, k, v projections, causal softmax attention with RoPE
 * (positions restart at sequence starts), output projection. Shapes: `B, T, D = dModel, H, Dk = D/H`.
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import { headDim } from "./config.ts";
import { linearBackward, linearForward } from "./linear.ts";
import type { Mixer, ParamLookup, StepContext } from "./mixer.ts";
import type { ModelConfig, NamedParam } from "./types.ts";

/** Activations of the last forward, kept for backward. */
interface AttentionActs {
  readonly B: number;
  readonly T: number;
  /** (B, T, H, Dk) per-head queries, keys and values. */
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  /** (B, T, H, Dk) attention output. */
  readonly att: Tensor;
  /** (B, T, H) log-sum-exp of the attention scores. */
  readonly lse: Tensor;
  /** (B, T, D) attention output as rows of D: input of out_proj. */
  readonly attFlat: Tensor;
}

const QKV = ["q", "k", "v"] as const;

/** Softmax attention with RoPE as a {@linkcode Mixer}. */
export class AttentionMixer implements Mixer {
  readonly #be: Backend;
  readonly #config: ModelConfig;
  readonly #proj: Record<(typeof QKV)[number], NamedParam>;
  readonly #out: NamedParam;
  #acts: AttentionActs | null = null;

  /** Bind the parameters `${prefix}.{q,k,v,out}_proj`. */
  constructor(backend: Backend, config: ModelConfig, prefix: string, param: ParamLookup) {
    this.#be = backend;
    this.#config = config;
    this.#proj = { q: param(`${prefix}.q_proj`), k: param(`${prefix}.k_proj`), v: param(`${prefix}.v_proj`) };
    this.#out = param(`${prefix}.out_proj`);
  }

  #ensure(B: number, T: number): AttentionActs {
    if (this.#acts && this.#acts.B === B && this.#acts.T === T) return this.#acts;
    const be = this.#be;
    if (this.#acts) {
      const { q, k, v, att, lse, attFlat } = this.#acts;
      for (const t of [q, k, v, att, lse, attFlat]) be.dispose(t);
    }
    const H = this.#config.heads;
    const Dk = headDim(this.#config);
    const heads = [B, T, H, Dk];
    this.#acts = {
      B,
      T,
      q: be.zeros(heads),
      k: be.zeros(heads),
      v: be.zeros(heads),
      att: be.zeros(heads),
      lse: be.zeros([B, T, H]),
      attFlat: be.zeros([B, T, this.#config.dModel]),
    };
    return this.#acts;
  }

  /** Attention forward. */
  forward(ctx: StepContext, x: Tensor, out: Tensor): void {
    const be = this.#be;
    const acts = this.#ensure(ctx.B, ctx.T);
    const flat = ctx.ws.get("attn.flat", [ctx.B, ctx.T, this.#config.dModel]);
    for (const n of QKV) {
      linearForward(be, flat, x, this.#proj[n]);
      be.copy(acts[n], flat);
    }
    be.attentionForward(acts.att, acts.lse, acts.q, acts.k, acts.v, this.#config.ropeBase, ctx.starts);
    be.copy(acts.attFlat, acts.att);
    linearForward(be, out, acts.attFlat, this.#out);
  }

  /** Attention backward (accumulates into `dx` and the parameter gradients). */
  backward(ctx: StepContext, x: Tensor, dOut: Tensor, dx: Tensor): void {
    const be = this.#be;
    const acts = this.#acts;
    if (!acts || acts.B !== ctx.B || acts.T !== ctx.T) {
      throw new Error("attention mixer: backward before forward");
    }
    const flatShape = [ctx.B, ctx.T, this.#config.dModel];
    const dFlat = ctx.ws.get("attn.dFlat", flatShape, true);
    linearBackward(be, dFlat, dOut, acts.attFlat, this.#out);
    const dAtt = ctx.ws.get("attn.dAtt", acts.att.shape);
    be.copy(dAtt, dFlat);
    const d = {
      q: ctx.ws.get("attn.dq", acts.q.shape, true),
      k: ctx.ws.get("attn.dk", acts.k.shape, true),
      v: ctx.ws.get("attn.dv", acts.v.shape, true),
    };
    be.attentionBackward(
      d.q,
      d.k,
      d.v,
      dAtt,
      acts.att,
      acts.lse,
      acts.q,
      acts.k,
      acts.v,
      this.#config.ropeBase,
      ctx.starts,
    );
    for (const n of QKV) {
      be.copy(dFlat, d[n]);
      linearBackward(be, dx, dFlat, x, this.#proj[n]);
    }
  }
}
