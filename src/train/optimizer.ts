/**
 * AdamW over a model's parameters, with global gradient-norm clipping. Weight decay is decoupled
 * and skipped for parameters with `decay: false` (norms, biases). Moments live on the backend.
 *
 * @module
 */

import type { NamedParam } from "../model/types.ts";
import type { Backend, StepGuard, Tensor } from "../rules/backend.ts";
import type { TrainConfig } from "./config.ts";

/** AdamW moments for a fixed list of parameters. */
export class AdamW {
  /** First moments by parameter name. */
  readonly m: Map<string, Tensor> = new Map();
  /** Second moments by parameter name. */
  readonly v: Map<string, Tensor> = new Map();
  readonly #backend: Backend;
  readonly #params: NamedParam[];

  /** Zero moments for every parameter. */
  constructor(backend: Backend, params: NamedParam[]) {
    this.#backend = backend;
    this.#params = params;
    for (const p of params) {
      this.m.set(p.name, backend.zeros(p.value.shape));
      this.v.set(p.name, backend.zeros(p.value.shape));
    }
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
    for (const p of this.#params) {
      this.#backend.adamw(p.value, p.grad, this.m.get(p.name)!, this.v.get(p.name)!, params, p.decay, guard);
    }
  }
}

/** The factor that scales a gradient of norm `norm` down to `clipNorm` (1 when within bounds or off). */
export function clipFactor(norm: number, clipNorm: number): number {
  return clipNorm > 0 && norm > clipNorm ? clipNorm / norm : 1;
}
