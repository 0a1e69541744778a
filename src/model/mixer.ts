/**
 * The sequence mixer of a block (SPEC section 7): the interface every mixer implements, the
 * per-call context, and the factory that picks the fast-weight or the attention mixer.
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import type { Form } from "../rules/config.ts";
import { AttentionMixer } from "./attention_mixer.ts";
import { FastWeightMixer } from "./fast_weight_mixer.ts";
import type { ModelConfig, NamedParam } from "./types.ts";
import type { Workspace } from "./workspace.ts";

/** What every op of one forward/backward call shares. */
export interface StepContext {
  /** Batch rows. */
  readonly B: number;
  /** Positions per row. */
  readonly T: number;
  /** Sequence-start flags `[B * T]`. */
  readonly starts: Uint8Array;
  /** A column of ones `(B*T, 1)`, for broadcasting biases and per-head constants over rows. */
  readonly ones: Tensor;
  /** Scratch tensors shared by every layer. */
  readonly ws: Workspace;
  /** Whether a backward of this forward follows (a training step): a mixer may then keep more for it. */
  readonly training: boolean;
}

/** A mixer: `out = Mixer(x)` on `(B, T, D)`, with a backward that accumulates. */
export interface Mixer {
  /** Compute `out` `(B, T, D)` from the normalised input `x` `(B, T, D)`; keeps what backward needs. */
  forward(ctx: StepContext, x: Tensor, out: Tensor): void;
  /** Accumulate `dx` `(B, T, D)` and the parameter gradients from `dOut`; `x` as given to forward. */
  backward(ctx: StepContext, x: Tensor, dOut: Tensor, dx: Tensor): void;
}

/** Options of the model that are not part of {@linkcode ModelConfig} (not saved in checkpoints). */
export interface MixerOptions {
  /** Scale-coupled ridge of the Falcon rules (default true; gradient checks turn it off). */
  readonly coupling: boolean;
  /** Form of the fast-weight kernel (default `chunk`, with `config.chunkSize`). */
  readonly form: Form;
}

/** Look up a parameter by name; throws when the model has none of that name. */
export type ParamLookup = (name: string) => NamedParam;

/** Build the mixer of block `layer`. */
export function createMixer(
  backend: Backend,
  config: ModelConfig,
  layer: number,
  param: ParamLookup,
  options: MixerOptions,
): Mixer {
  const prefix = `layers.${layer}.mixer`;
  return config.mixer === "transformer"
    ? new AttentionMixer(backend, config, prefix, param)
    : new FastWeightMixer(backend, config, prefix, param, options);
}
