/**
 * The Transformer baseline's mixer: q, k, v projections (with the short convolution when
 * `shortConv`, shared with the fast-weight mixer in `qkv_projection.ts`), QK normalisation per head
 * (`qkNorm`), causal softmax attention with RoPE (positions restart at sequence starts), output
 * projection. Shapes: `B, T, D = dModel, H, Dk = D/H`.
 *
 *     q, k, v = qkvProjection(x)                    (B, T, H, Dk); silu(conv) on each with shortConv
 *     q, k    = RMSNorm(q), RMSNorm(k)              per head over Dk, no weight (qkNorm "rms")
 *     att     = softmax(rope(q) rope(k)^T / sqrt(Dk) + causal mask) v
 *     out     = att W_out
 *
 * The QK norm is the fast-weight rules' `rms` option (SPEC section 1: `u / sqrt(||u||^2 / Dk +
 * eps_rms)`, `eps_rms` 1e-6), applied before RoPE. It makes `||q||^2 = ||k||^2 ~ Dk`, so the logits
 * `q.k / sqrt(Dk)` have the usual scale (`sqrt(Dk)` at most) whatever the projections' size. The
 * `l2` option (unit vectors, logits bounded by `1 / sqrt(Dk)`) would flatten attention and is
 * refused for the Transformer by `validateModelConfig`; `none` is the plain baseline.
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import { DEFAULT_EPS_RMS } from "../rules/config.ts";
import { headDim } from "./config.ts";
import { linearBackward, linearForward } from "./linear.ts";
import type { Mixer, ParamLookup, StepContext } from "./mixer.ts";
import { QkvProjection } from "./qkv_projection.ts";
import type { ModelConfig, NamedParam } from "./types.ts";

/** Activations of the last forward, kept for backward. */
interface AttentionActs {
  readonly B: number;
  readonly T: number;
  /** (B, T, H, Dk) per-head queries, keys and values from the projections. */
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  /** (B, T, H, Dk) normalised queries and keys given to attention (qkNorm "rms" only). */
  readonly qNorm: Tensor | null;
  readonly kNorm: Tensor | null;
  /** (B*T*H) reciprocal RMS of each query and key head (qkNorm "rms" only). */
  readonly qRstd: Tensor | null;
  readonly kRstd: Tensor | null;
  /** (B, T, H, Dk) attention output. */
  readonly att: Tensor;
  /** (B, T, H) log-sum-exp of the attention scores. */
  readonly lse: Tensor;
  /** (B, T, D) attention output as rows of D: input of out_proj. */
  readonly attFlat: Tensor;
}

/** Softmax attention with RoPE as a {@linkcode Mixer}. */
export class AttentionMixer implements Mixer {
  readonly #be: Backend;
  readonly #config: ModelConfig;
  readonly #qkv: QkvProjection;
  readonly #qkNorm: boolean;
  readonly #out: NamedParam;
  #acts: AttentionActs | null = null;

  /** Bind the parameters `${prefix}.{q,k,v,out}_proj` and, with shortConv, `${prefix}.{q,k,v}_conv`. */
  constructor(backend: Backend, config: ModelConfig, prefix: string, param: ParamLookup) {
    this.#be = backend;
    this.#config = config;
    this.#qkv = new QkvProjection(backend, config, prefix, param);
    this.#qkNorm = config.qkNorm === "rms";
    this.#out = param(`${prefix}.out_proj`);
  }

  #ensure(B: number, T: number): AttentionActs {
    if (this.#acts && this.#acts.B === B && this.#acts.T === T) return this.#acts;
    const be = this.#be;
    if (this.#acts) {
      const { q, k, v, qNorm, kNorm, qRstd, kRstd, att, lse, attFlat } = this.#acts;
      for (const t of [q, k, v, qNorm, kNorm, qRstd, kRstd, att, lse, attFlat]) if (t) be.dispose(t);
    }
    const H = this.#config.heads;
    const Dk = headDim(this.#config);
    const heads = [B, T, H, Dk];
    const norm = this.#qkNorm;
    this.#acts = {
      B,
      T,
      q: be.zeros(heads),
      k: be.zeros(heads),
      v: be.zeros(heads),
      qNorm: norm ? be.zeros(heads) : null,
      kNorm: norm ? be.zeros(heads) : null,
      qRstd: norm ? be.zeros([B * T * H]) : null,
      kRstd: norm ? be.zeros([B * T * H]) : null,
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
    this.#qkv.forward(ctx, x, { q: acts.q, k: acts.k, v: acts.v });
    let { q, k } = acts;
    if (acts.qNorm && acts.kNorm && acts.qRstd && acts.kRstd) {
      be.rmsNormForward(acts.qNorm, acts.qRstd, acts.q, null, DEFAULT_EPS_RMS);
      be.rmsNormForward(acts.kNorm, acts.kRstd, acts.k, null, DEFAULT_EPS_RMS);
      q = acts.qNorm;
      k = acts.kNorm;
    }
    be.attentionForward(acts.att, acts.lse, q, k, acts.v, this.#config.ropeBase, ctx.starts);
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
      acts.qNorm ?? acts.q,
      acts.kNorm ?? acts.k,
      acts.v,
      this.#config.ropeBase,
      ctx.starts,
    );
    if (acts.qNorm && acts.kNorm && acts.qRstd && acts.kRstd) {
      // d now holds the gradients of the normalised q and k: pull them back through the norm
      const dqRaw = ctx.ws.get("attn.dqRaw", acts.q.shape, true);
      const dkRaw = ctx.ws.get("attn.dkRaw", acts.k.shape, true);
      be.rmsNormBackward(dqRaw, null, d.q, acts.q, null, acts.qRstd);
      be.rmsNormBackward(dkRaw, null, d.k, acts.k, null, acts.kRstd);
      this.#qkv.backward(ctx, x, { q: dqRaw, k: dkRaw, v: d.v }, dx);
    } else {
      this.#qkv.backward(ctx, x, d, dx);
    }
  }
}
