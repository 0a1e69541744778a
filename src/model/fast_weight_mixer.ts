/**
 * The fast-weight mixer (SPEC section 7), per layer with `H` heads and `Dk = Dv = D / H`:
 *
 *     q, k, v = x Wq, x Wk, x Wv              then, with shortConv, silu(causal depthwise conv, width 4)
 *                                              (qkv_projection.ts, shared with the attention mixer)
 *     beta      = plan.beta(x)                 (coefficients.ts: betaMax*sigmoid, softplus dt, sigmoid b)
 *     lambdabar = plan.lambda(x)               (softplus(x W_lambda + b_lambda), or a learned constant)
 *     o         = rule(q, k, v, beta, lambdabar)  via backend.fastWeightForward; the kernel applies the
 *                                              QK normalisation (RuleConfig.qkNorm) itself
 *     y         = RMSNorm_per_head(o) * o_norm   (o_norm `[Dv]`, shared by the heads)
 *     y         = silu(x W_gate) * y           (outputGate)
 *     out       = y W_out
 *
 * Shape legend: `B, T, D = dModel, H, Dk = Dv = D / H`. Backends have no views: `(B, T, D)` rows
 * and `(B, T, H, Dk)` heads are the same memory order, and switching between them is a copy.
 *
 * Memory: per layer the activations kept for backward are `O(B T D)`; the kernel keeps nothing
 * between forward and backward (its backward recomputes from q, k, v, beta, lambdabar).
 *
 * @module
 */

import {
  type Backend,
  type FastWeightInputs,
  type FormOptions,
  type ForwardSaved,
  matmulSwigluForward,
  type Tensor,
} from "../rules/backend.ts";
import { type RuleConfig, ruleConfig, type RuleName } from "../rules/config.ts";
import { coefficientPlan, type CoefficientStream } from "./coefficients.ts";
import { headDim } from "./config.ts";
import { broadcastBackward, broadcastForward, linearBackward, linearForward, reshaped } from "./linear.ts";
import type { Mixer, MixerOptions, ParamLookup, StepContext } from "./mixer.ts";
import { type Qkv, QkvProjection } from "./qkv_projection.ts";
import type { ModelConfig, NamedParam } from "./types.ts";

/** RMSNorm stabiliser of the per-head output norm (SPEC eps_rms). */
const NORM_EPS = 1e-6;

/** Parameters of one coefficient stream: a projection (+ bias) for `token`, a constant for `const`. */
interface StreamParams {
  readonly stream: CoefficientStream;
  readonly proj: NamedParam | null;
  readonly bias: NamedParam | null;
  readonly constant: NamedParam | null;
}

/** Activations of the last forward, kept for backward. */
interface FastWeightActs {
  readonly B: number;
  readonly T: number;
  /** (B, T, H, Dk) raw q, k, v given to the kernel. */
  readonly heads: Record<Qkv, Tensor>;
  /** (B, T, H), or (B, T, H, Dv) for falcon2/2a: beta pre-activation (null when the rule has no beta). */
  readonly betaPre: Tensor | null;
  /** Same shape: the kernel's beta slot (zeros when unused). */
  readonly beta: Tensor;
  /** (B, T, H) lambdabar pre-activation (null when unused). */
  readonly lambdaPre: Tensor | null;
  /** (B, T, H) the kernel's lambdabar slot (zeros when unused). */
  readonly lambdabar: Tensor;
  /** (B, T, H, Dv) kernel readout (allocated by the kernel each forward). */
  o: Tensor | null;
  /** (B*T*H) reciprocal RMS of each head's readout. */
  readonly oRstd: Tensor;
  /** (B, T, D) normalised readout as rows of D. */
  readonly oFlat: Tensor;
  /** (B, T, D) gate projection (outputGate only). */
  readonly gatePre: Tensor | null;
  /** (B, T, D) silu(gatePre) * oFlat, the input of out_proj (outputGate only). */
  readonly gated: Tensor | null;
  /** What the kernel's last training forward kept for its backward (the backward consumes it). */
  saved: ForwardSaved | undefined;
}

/** The kernel's {@linkcode RuleConfig} for a model: its alignment, window and qkNorm, plus `coupling`. */
export function modelRuleConfig(config: ModelConfig, coupling: boolean): RuleConfig {
  return ruleConfig(config.mixer as RuleName, {
    alignment: config.alignment,
    window: config.window,
    qkNorm: config.qkNorm,
    coupling,
  });
}

/** A fast-weight rule as a {@linkcode Mixer}. */
export class FastWeightMixer implements Mixer {
  readonly #be: Backend;
  readonly #config: ModelConfig;
  readonly #rule: RuleConfig;
  readonly #form: FormOptions;
  readonly #qkv: QkvProjection;
  readonly #beta: StreamParams | null;
  readonly #lambda: StreamParams | null;
  readonly #oNorm: NamedParam;
  readonly #gate: NamedParam | null;
  readonly #out: NamedParam;
  #acts: FastWeightActs | null = null;

  /** Bind the parameters `${prefix}.*` (names in params.ts). */
  constructor(
    backend: Backend,
    config: ModelConfig,
    prefix: string,
    param: ParamLookup,
    options: MixerOptions,
  ) {
    this.#be = backend;
    this.#config = config;
    this.#rule = modelRuleConfig(config, options.coupling);
    this.#form = { form: options.form, chunkSize: config.chunkSize };
    this.#qkv = new QkvProjection(backend, config, prefix, param);
    const plan = coefficientPlan(this.#rule.rule, config.betaMax);
    const streamParams = (key: string, stream: CoefficientStream | null): StreamParams | null => {
      if (!stream) return null;
      const token = config.parameterisation === "token";
      return {
        stream,
        proj: token ? param(`${prefix}.${key}_proj`) : null,
        bias: token && stream.bias ? param(`${prefix}.${key}_bias`) : null,
        constant: token ? null : param(`${prefix}.${key}_const`),
      };
    };
    this.#beta = streamParams("beta", plan.beta);
    this.#lambda = streamParams("lambda", plan.lambda);
    this.#oNorm = param(`${prefix}.o_norm`);
    this.#gate = config.outputGate ? param(`${prefix}.gate_proj`) : null;
    this.#out = param(`${prefix}.out_proj`);
  }

  #betaShape(B: number, T: number): number[] {
    const { heads: H } = this.#config;
    return this.#beta?.stream.perColumn ? [B, T, H, headDim(this.#config)] : [B, T, H];
  }

  #ensure(B: number, T: number): FastWeightActs {
    if (this.#acts && this.#acts.B === B && this.#acts.T === T) return this.#acts;
    const be = this.#be;
    if (this.#acts) this.#disposeActs(this.#acts);
    const { dModel: D, heads: H } = this.#config;
    const flat = [B, T, D];
    const heads = [B, T, H, headDim(this.#config)];
    this.#acts = {
      B,
      T,
      heads: { q: be.zeros(heads), k: be.zeros(heads), v: be.zeros(heads) },
      betaPre: this.#beta ? be.zeros(this.#betaShape(B, T)) : null,
      beta: be.zeros(this.#betaShape(B, T)),
      lambdaPre: this.#lambda ? be.zeros([B, T, H]) : null,
      lambdabar: be.zeros([B, T, H]),
      o: null,
      oRstd: be.zeros([B * T * H]),
      oFlat: be.zeros(flat),
      gatePre: this.#gate ? be.zeros(flat) : null,
      gated: this.#gate ? be.zeros(flat) : null,
      saved: undefined,
    };
    return this.#acts;
  }

  #disposeActs(acts: FastWeightActs): void {
    const all = [
      ...Object.values(acts.heads),
      acts.betaPre,
      acts.beta,
      acts.lambdaPre,
      acts.lambdabar,
      acts.o,
      acts.oRstd,
      acts.oFlat,
      acts.gatePre,
      acts.gated,
    ];
    for (const t of all) if (t) this.#be.dispose(t);
    acts.saved?.dispose();
  }

  #inputs(ctx: StepContext, acts: FastWeightActs): FastWeightInputs {
    const { q, k, v } = acts.heads;
    return { q, k, v, beta: acts.beta, lambdabar: acts.lambdabar, starts: ctx.starts };
  }

  /**
   * `pre = z(x)` of one coefficient stream, computed in `(B, T, width)` rows and reshaped into `pre`,
   * and the kernel slot `slot = scale * activation(pre)` (projection, bias and activation one op where
   * the backend fuses them).
   */
  #streamForward(
    ctx: StepContext,
    x: Tensor,
    p: StreamParams,
    pre: Tensor,
    slot: Tensor,
    name: string,
  ): void {
    const be = this.#be;
    const rows = [ctx.B, ctx.T, p.constant?.value.size ?? p.proj!.value.shape[1]];
    const sameShape = rows.length === pre.shape.length && rows.every((d, i) => d === pre.shape[i]);
    const { activation, scale } = p.stream;
    if (p.proj && sameShape && be.matmulActivationForward) {
      be.matmulActivationForward(slot, pre, x, p.proj.value, p.bias?.value ?? null, activation, scale);
      return;
    }
    const z = sameShape ? pre : ctx.ws.get(`mixer.${name}Rows`, rows);
    if (p.constant) broadcastForward(be, z, ctx.ones, p.constant);
    else linearForward(be, z, x, p.proj!, p.bias ? { param: p.bias, ones: ctx.ones } : undefined);
    if (z !== pre) be.copy(pre, z);
    be.activationForward(activation, slot, pre, scale);
  }

  /** Pull `dSlot` (gradient of the kernel slot) back through the activation into the parameters and `dx`. */
  #streamBackward(
    ctx: StepContext,
    x: Tensor,
    dx: Tensor,
    p: StreamParams,
    pre: Tensor,
    dSlot: Tensor,
    name: string,
  ): void {
    const be = this.#be;
    const dPre = ctx.ws.get(`mixer.d${name}Pre`, pre.shape, true);
    be.activationBackward(p.stream.activation, dPre, dSlot, pre, p.stream.scale);
    const rows = [ctx.B, ctx.T, p.constant?.value.size ?? p.proj!.value.shape[1]];
    const dz = reshaped(be, dPre, ctx.ws.get(`mixer.d${name}Rows`, rows));
    if (p.constant) broadcastBackward(be, dz, ctx.ones, p.constant);
    else linearBackward(be, dx, dz, x, p.proj!, p.bias ? { param: p.bias, ones: ctx.ones } : undefined);
  }

  /** Fast-weight mixer forward. */
  forward(ctx: StepContext, x: Tensor, out: Tensor): void {
    const be = this.#be;
    const acts = this.#ensure(ctx.B, ctx.T);
    this.#qkv.forward(ctx, x, acts.heads);
    if (this.#beta && acts.betaPre) this.#streamForward(ctx, x, this.#beta, acts.betaPre, acts.beta, "beta");
    if (this.#lambda && acts.lambdaPre) {
      this.#streamForward(ctx, x, this.#lambda, acts.lambdaPre, acts.lambdabar, "lambda");
    }
    acts.saved?.dispose();
    const result = be.fastWeightForward(this.#rule, this.#inputs(ctx, acts), {
      ...this.#form,
      keepForBackward: ctx.training,
    });
    acts.saved = result.saved;
    for (const t of [result.carry.state, result.carry.lastKey, result.carry.windowX, result.carry.windowY]) {
      be.dispose(t);
    }
    if (acts.o) be.dispose(acts.o);
    acts.o = result.o;
    // per-head norm (rows of Dv) written as rows of D: the same memory, and the op checks sizes only
    be.rmsNormForward(acts.oFlat, acts.oRstd, result.o, this.#oNorm.value, NORM_EPS);
    let y = acts.oFlat;
    if (this.#gate && acts.gatePre && acts.gated) {
      // the gate projection and silu(gate) * y: one op where the backend fuses them
      matmulSwigluForward(be, acts.gated, acts.gatePre, x, this.#gate.value, acts.oFlat, "gate");
      y = acts.gated;
    }
    linearForward(be, out, y, this.#out);
  }

  /** Fast-weight mixer backward (accumulates into `dx` and the parameter gradients). */
  backward(ctx: StepContext, x: Tensor, dOut: Tensor, dx: Tensor): void {
    const be = this.#be;
    const acts = this.#acts;
    if (!acts || !acts.o || acts.B !== ctx.B || acts.T !== ctx.T) {
      throw new Error("fast-weight mixer: backward before forward");
    }
    const flatShape = [ctx.B, ctx.T, this.#config.dModel];
    const gated = this.#gate && acts.gatePre && acts.gated;
    let dOFlat: Tensor;
    if (gated && be.matmulSwigluBackward) {
      // out_proj's weight gradient, then dY = dOut out_proj^T and the gate's SwiGLU backward in one op
      linearBackward(be, null, dOut, acts.gated!, this.#out);
      const dGatePre = ctx.ws.get("mixer.dGatePre", flatShape, true);
      dOFlat = ctx.ws.get("mixer.dOFlat", flatShape, true);
      be.matmulSwigluBackward(dGatePre, dOFlat, dOut, this.#out.value, acts.gatePre!, acts.oFlat);
      linearBackward(be, dx, dGatePre, x, this.#gate!);
    } else {
      const dY = ctx.ws.get("mixer.dY", flatShape, true);
      linearBackward(be, dY, dOut, acts.gated ?? acts.oFlat, this.#out);
      dOFlat = dY;
      if (gated) {
        const dGatePre = ctx.ws.get("mixer.dGatePre", flatShape, true);
        dOFlat = ctx.ws.get("mixer.dOFlat", flatShape, true);
        be.swigluBackward(dGatePre, dOFlat, dY, acts.gatePre!, acts.oFlat);
        linearBackward(be, dx, dGatePre, x, this.#gate!);
      }
    }
    const dO = ctx.ws.get("mixer.dO", acts.o.shape, true);
    be.rmsNormBackward(dO, this.#oNorm.grad, dOFlat, acts.o, this.#oNorm.value, acts.oRstd);
    const saved = acts.saved;
    acts.saved = undefined;
    // S0 is no parameter of the model: the backward skips its gradient
    const g = be.fastWeightBackward(this.#rule, this.#inputs(ctx, acts), dO, {
      ...this.#form,
      saved,
      s0Grad: false,
    });
    if (this.#beta && acts.betaPre) {
      this.#streamBackward(ctx, x, dx, this.#beta, acts.betaPre, g.dbeta, "beta");
    }
    if (this.#lambda && acts.lambdaPre) {
      this.#streamBackward(ctx, x, dx, this.#lambda, acts.lambdaPre, g.dlambdabar, "lambda");
    }
    const dHeads: Record<Qkv, Tensor> = { q: g.dq, k: g.dk, v: g.dv };
    this.#qkv.backward(ctx, x, dHeads, dx);
    for (const t of [g.dq, g.dk, g.dv, g.dbeta, g.dlambdabar, g.dCarryState]) be.dispose(t);
  }
}
