/**
 * The SwiGLU MLP of a block: `down_proj(silu(x gate_proj) * (x up_proj))`.
 * Shapes: `B, T, D = dModel, F = ffnHidden`.
 *
 * @module
 */

import { type Backend, matmulSwigluForward, type Tensor } from "../rules/backend.ts";
import { linearBackward, linearForward } from "./linear.ts";
import type { ParamLookup, StepContext } from "./mixer.ts";
import type { ModelConfig, NamedParam } from "./types.ts";

/** Activations of the last forward, kept for backward. */
interface MlpActs {
  readonly B: number;
  readonly T: number;
  /** (B, T, F) gate projection. */
  readonly gate: Tensor;
  /** (B, T, F) up projection. */
  readonly up: Tensor;
  /** (B, T, F) silu(gate) * up: input of down_proj. */
  readonly hidden: Tensor;
}

/** SwiGLU MLP with weights `${prefix}.{gate,up,down}_proj`. */
export class SwiGluMlp {
  readonly #be: Backend;
  readonly #config: ModelConfig;
  readonly #gate: NamedParam;
  readonly #up: NamedParam;
  readonly #down: NamedParam;
  #acts: MlpActs | null = null;

  /** Bind the parameters of block `prefix` (e.g. `layers.0.mlp`). */
  constructor(backend: Backend, config: ModelConfig, prefix: string, param: ParamLookup) {
    this.#be = backend;
    this.#config = config;
    this.#gate = param(`${prefix}.gate_proj`);
    this.#up = param(`${prefix}.up_proj`);
    this.#down = param(`${prefix}.down_proj`);
  }

  #ensure(B: number, T: number): MlpActs {
    if (this.#acts && this.#acts.B === B && this.#acts.T === T) return this.#acts;
    const be = this.#be;
    if (this.#acts) { for (const t of [this.#acts.gate, this.#acts.up, this.#acts.hidden]) be.dispose(t); }
    const shape = [B, T, this.#config.ffnHidden];
    this.#acts = { B, T, gate: be.zeros(shape), up: be.zeros(shape), hidden: be.zeros(shape) };
    return this.#acts;
  }

  /** `out` `(B, T, D)` from `x` `(B, T, D)`. */
  forward(ctx: StepContext, x: Tensor, out: Tensor): void {
    const be = this.#be;
    const acts = this.#ensure(ctx.B, ctx.T);
    linearForward(be, acts.gate, x, this.#gate);
    // up projection and silu(gate) * up: one op where the backend fuses them
    matmulSwigluForward(be, acts.hidden, acts.up, x, this.#up.value, acts.gate, "up");
    linearForward(be, out, acts.hidden, this.#down);
  }

  /** Accumulate `dx` and the parameter gradients from `dOut`. */
  backward(ctx: StepContext, x: Tensor, dOut: Tensor, dx: Tensor): void {
    const be = this.#be;
    const acts = this.#acts;
    if (!acts || acts.B !== ctx.B || acts.T !== ctx.T) throw new Error("mlp: backward before forward");
    const shape = acts.gate.shape;
    const dGate = ctx.ws.get("mlp.dGate", shape, true);
    const dUp = ctx.ws.get("mlp.dUp", shape, true);
    if (be.matmulSwigluBackward) {
      // the down projection's weight gradient, then dHidden = dOut down^T and SwiGLU's backward in one op
      linearBackward(be, null, dOut, acts.hidden, this.#down);
      be.matmulSwigluBackward(dGate, dUp, dOut, this.#down.value, acts.gate, acts.up);
    } else {
      const dHidden = ctx.ws.get("mlp.dHidden", shape, true);
      linearBackward(be, dHidden, dOut, acts.hidden, this.#down);
      be.swigluBackward(dGate, dUp, dHidden, acts.gate, acts.up);
    }
    linearBackward(be, dx, dGate, x, this.#gate);
    linearBackward(be, dx, dUp, x, this.#up);
  }
}
