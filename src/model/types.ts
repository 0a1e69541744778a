/**
 * What the trainer, evaluation and checkpoint code see of a model. `FalconLM` (SPEC section 7)
 * implements {@linkcode LanguageModel} on any {@linkcode Backend}.
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import type { Alignment, QkNorm, RuleName } from "../rules/config.ts";

/** The sequence mixer of every block: a fast-weight rule, or softmax attention (Transformer baseline). */
export type MixerName = RuleName | "transformer";

/** Architecture hyperparameters (SPEC section 7). Serialised as JSON into checkpoints. */
export interface ModelConfig {
  /** Vocabulary size. */
  readonly vocabSize: number;
  /** Residual width. */
  readonly dModel: number;
  /** Number of blocks. */
  readonly layers: number;
  /** Heads per mixer; `d_k = d_v = dModel / heads`. */
  readonly heads: number;
  /** Hidden width of the SwiGLU MLP. */
  readonly ffnHidden: number;
  /** Mixer of every block. */
  readonly mixer: MixerName;
  /** Pair alignment of fast-weight mixers. */
  readonly alignment: Alignment;
  /**
   * q/k normalisation per head (default: rms; l2 for deltanet and gated_deltanet). The fast-weight
   * kernels apply it; the Transformer applies `rms` before RoPE and refuses `l2`.
   */
  readonly qkNorm: QkNorm;
  /** Causal depthwise short convolution (width 4) with SiLU on q, k, v (every mixer). */
  readonly shortConv: boolean;
  /** SiLU output gate (fast-weight mixers; the Transformer has none). */
  readonly outputGate: boolean;
  /** `token`: data-dependent beta and lambdabar; `const`: learned per-head scalars. */
  readonly parameterisation: "token" | "const";
  /** `beta = betaMax * sigmoid(.)` (default 2). */
  readonly betaMax: number;
  /** Falcon-3/3A window size. */
  readonly window: number;
  /** Chunk size of the chunked form used in training. */
  readonly chunkSize: number;
  /** LM head tied to the embedding. */
  readonly tieEmbeddings: boolean;
  /** RoPE base of the Transformer baseline. */
  readonly ropeBase: number;
}

/** One training or evaluation batch: `B` rows of `T` tokens, packed with sequence-start flags. */
export interface Batch {
  /** Rows. */
  readonly B: number;
  /** Positions per row. */
  readonly T: number;
  /** Input token ids `[B * T]`. */
  readonly ids: Int32Array;
  /** Next-token targets `[B * T]`. */
  readonly targets: Int32Array;
  /** Loss weight per position `[B * T]` (0 = not supervised, e.g. prompt tokens). */
  readonly weights: Float32Array;
  /** Sequence-start flags `[B * T]`. */
  readonly starts: Uint8Array;
  /**
   * Addition: the place value (0 = units) of the answer digit each position predicts, aligned
   * with `targets` `[B * T]`; -1 where the target is not an answer digit (padding, EOS, operands,
   * hints). Absent for tasks without place values. Models ignore it; the per-place metric reads it.
   */
  readonly places?: Int16Array;
}

/** The sum of a batch's loss weights (the supervised positions): the mean loss's denominator. */
export function batchWeight(batch: Pick<Batch, "weights">): number {
  let weight = 0;
  for (const w of batch.weights) weight += w;
  return weight;
}

/** A trainable parameter with its gradient slab. */
export interface NamedParam {
  /** Stable name, used in checkpoints (e.g. `layers.0.mixer.q_proj`). */
  readonly name: string;
  /** Current value. */
  readonly value: Tensor;
  /** Gradient of the last `forwardBackward` (same shape). */
  readonly grad: Tensor;
  /** Whether AdamW applies weight decay (false for norms and biases). */
  readonly decay: boolean;
}

/** A language model on a backend. */
export interface LanguageModel {
  /** Architecture. */
  readonly config: ModelConfig;
  /** The backend every op runs on. */
  readonly backend: Backend;
  /** Every parameter, in a fixed order. */
  parameters(): NamedParam[];
  /**
   * Zero the gradients, run forward and backward; returns the weighted loss sum and the weight sum.
   * Every gradient op is issued before the returned promise first waits (only the loss read is
   * awaited), so a caller may queue reductions of the gradients before awaiting the loss.
   */
  forwardBackward(batch: Batch): Promise<{ loss: number; weight: number }>;
  /**
   * Optional: what `forwardBackward` does, without reading the loss back: returns the per-position
   * weighted losses `[B*T]` on the backend (valid until the next forward), so that a training step can
   * stay on the device (`StepGuard` of the kernel interface).
   */
  recordForwardBackward?(batch: Batch): Tensor;
  /** Logits `[B, T, V]` of a batch (no gradient). */
  logits(batch: Pick<Batch, "B" | "T" | "ids" | "starts">): Promise<Float32Array | Float64Array>;
}
