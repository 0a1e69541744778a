/**
 * AdamW over a model's parameters, with global gradient-norm clipping. Weight decay is decoupled
 * and skipped for parameters with `decay: false` (norms, biases). Moments live on the backend.
 *
 * @module
 */

import type { NamedParam } from "../model/types.ts";
import type { AdamWSlot, Backend, StepGuard, Tensor } from "../rules/backend.ts";
import type { TrainConfig } from "./config.ts";

/** AdamW moments for a fixed list of parameters. */
export class AdamW {
  /** First moments by parameter name. */
  readonly m: Map<string, Tensor> = new Map();
  /** Second moments by parameter name. */
  readonly v: Map<string, Tensor> = new Map();
  readonly #backend: Backend;
  readonly #params: NamedParam[];
  /** Every parameter with its moments, in parameter order (for `adamwMany`). */
  readonly #slots: AdamWSlot[];

  /**
   * Zero moments for every parameter: two blocks (`zerosBlock`, in parameter order) where the backend
   * has them, so that with parameters and gradients in blocks too an update is one pass.
   */
  constructor(backend: Backend, params: NamedParam[]) {
    this.#backend = backend;
    this.#params = params;
    const shapes = params.map((p) => p.value.shape);
    const ms = backend.zerosBlock ? backend.zerosBlock(shapes) : shapes.map((s) => backend.zeros(s));
    const vs = backend.zerosBlock ? backend.zerosBlock(shapes) : shapes.map((s) => backend.zeros(s));
    params.forEach((p, i) => {
      this.m.set(p.name, ms[i]);
      this.v.set(p.name, vs[i]);
    });
    this.#slots = params.map((p, i) => ({
      param: p.value,
      grad: p.grad,
      m: ms[i],
      v: vs[i],
      decay: p.decay,
    }));
  }

  /** L2 norm of all gradients together, each multiplied by `scale`. */
  async gradNorm(scale: number): Promise<number> {
    // queue every reduction before waiting for any (one GPU round trip instead of one per
    // parameter), then add in parameter order so the result does not depend on timing
    const parts = await Promise.all(this.#params.map((p) => this.#backend.sumSquares(p.grad)));
    let sum = 0;
    for (const part of parts) sum += part;
    return Math.sqrt(sum) * Math.abs(scale);
  }

  /**
   * One update with learning rate `lr` at the 1-based `step`; gradients are multiplied by
   * `gradScale` first (mean-loss normalisation times the clipping factor). With a `guard` the
   * clipping factor comes from the device's statistics instead (`StepGuard` of the kernel interface).
   */
  step(
    config: Pick<TrainConfig, "beta1" | "beta2" | "eps" | "weightDecay">,
    lr: number,
    step: number,
    gradScale: number,
    guard?: StepGuard,
  ): void {
    const params = {
      lr,
      beta1: config.beta1,
      beta2: config.beta2,
      eps: config.eps,
      weightDecay: config.weightDecay,
      step,
      gradScale,
    };
    if (this.#backend.adamwMany) {
      this.#backend.adamwMany(this.#slots, params, guard);
      return;
    }
    for (const s of this.#slots) this.#backend.adamw(s.param, s.grad, s.m, s.v, params, s.decay, guard);
  }
}

/** The factor that scales a gradient of norm `norm` down to `clipNorm` (1 when within bounds or off). */
export function clipFactor(norm: number, clipNorm: number): number {
  return clipNorm > 0 && norm > clipNorm ? clipNorm / norm : 1;
}
