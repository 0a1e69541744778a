/**
 * `FalconLM`: the reference architecture of SPEC section 7 on any {@linkcode Backend}.
 *
 *     h_0 = embed[ids]
 *     h  += Mixer(RMSNorm(h) * attn_norm)     per block
 *     h  += SwiGLU(RMSNorm(h) * mlp_norm)     per block
 *     logits = (RMSNorm(h) * final_norm) embed^T     (or lm_head `[D, V]` when untied)
 *
 * Loss: the weighted sum over positions of the next-token cross-entropy (`Batch.weights`);
 * gradients are of that sum. Forward and backward are written once against the Backend
 * interface, llm.c style: activations kept for backward live in per-shape slabs.
 * Shape legend: `B, T, D = dModel, V = vocabSize, L = layers`.
 *
 * @module
 */

import {
  addRmsNormForward,
  type Backend,
  crossEntropyForwardBackward,
  type Tensor,
} from "../rules/backend.ts";
import type { Form } from "../rules/config.ts";
import { validateModelConfig } from "./config.ts";
import { createParameters } from "./init.ts";
import { linearBackward, linearForward } from "./linear.ts";
import { createMixer, type Mixer, type StepContext } from "./mixer.ts";
import { SwiGluMlp } from "./mlp.ts";
import { parameterSpecs } from "./params.ts";
import { type Batch, batchWeight, type LanguageModel, type ModelConfig, type NamedParam } from "./types.ts";
import { Workspace } from "./workspace.ts";

/** RMSNorm stabiliser of the block and final norms (SPEC eps_rms). */
const NORM_EPS = 1e-6;

/** Options that are not part of {@linkcode ModelConfig} (and not saved in checkpoints). */
export interface ModelOptions {
  /**
   * Scale-coupled ridge of the Falcon rules (default true, SPEC section 3). Finite-difference checks
   * turn it off: the coupling multiplies by a stop-gradient statistic that backward deliberately
   * does not differentiate.
   */
  readonly coupling?: boolean;
  /** Form of the fast-weight kernel for training and logits (default `chunk`, `config.chunkSize`). */
  readonly form?: Form;
}

/** Activations of the last forward, kept for backward. */
interface ModelActs {
  readonly B: number;
  readonly T: number;
  /** (B*T, 1) ones, for broadcasting biases and constants over rows. */
  readonly ones: Tensor;
  /** L+1 x (B, T, D) residual stream entering block l; hIn[L] is the final state. */
  readonly hIn: Tensor[];
  /** L x (B, T, D) residual stream after the mixer of block l. */
  readonly hMid: Tensor[];
  /** L x (B, T, D) RMSNorm(hIn[l]) * attn_norm: the mixer input. */
  readonly norm1: Tensor[];
  /** L x (B*T) reciprocal RMS of hIn[l]. */
  readonly rstd1: Tensor[];
  /** L x (B, T, D) RMSNorm(hMid[l]) * mlp_norm: the MLP input. */
  readonly norm2: Tensor[];
  /** L x (B*T) reciprocal RMS of hMid[l]. */
  readonly rstd2: Tensor[];
  /** (B, T, D) RMSNorm(hIn[L]) * final_norm. */
  readonly normF: Tensor;
  /** (B*T) reciprocal RMS of hIn[L]. */
  readonly rstdF: Tensor;
  /** (B, T, V) logits. */
  readonly logits: Tensor;
  /** (B*T) weighted per-position losses. */
  readonly losses: Tensor;
}

function checkBatch(config: ModelConfig, batch: Pick<Batch, "B" | "T" | "ids" | "starts">): void {
  const { B, T } = batch;
  if (!Number.isInteger(B) || B < 1 || !Number.isInteger(T) || T < 1) {
    throw new RangeError(`batch B and T must be integers >= 1, got B ${B}, T ${T}`);
  }
  const full = batch as Partial<Batch>;
  const arrays: [string, ArrayLike<number> | undefined][] = [
    ["ids", batch.ids],
    ["starts", batch.starts],
    ["targets", full.targets],
    ["weights", full.weights],
  ];
  for (const [key, a] of arrays) {
    if (a !== undefined && a.length !== B * T) {
      throw new RangeError(`batch ${key} has length ${a.length}, expected B*T = ${B * T}`);
    }
  }
  for (let i = 0; i < batch.ids.length; i++) {
    const id = batch.ids[i];
    if (!(id >= 0 && id < config.vocabSize)) {
      throw new RangeError(`token id ${id} at position ${i} is outside [0, ${config.vocabSize})`);
    }
  }
}

/** The SPEC section 7 language model (see the module doc). Build one with {@linkcode createModel}. */
export class FalconLM implements LanguageModel {
  /** Architecture. */
  readonly config: ModelConfig;
  /** The backend every op runs on. */
  readonly backend: Backend;
  readonly #params: NamedParam[];
  readonly #byName: Map<string, NamedParam>;
  readonly #mixers: Mixer[];
  readonly #mlps: SwiGluMlp[];
  readonly #ws: Workspace;
  #acts: ModelActs | null = null;

  /** A model with freshly initialised parameters (seeded, deterministic). */
  constructor(backend: Backend, config: ModelConfig, seed: number, options: ModelOptions = {}) {
    validateModelConfig(config);
    this.config = config;
    this.backend = backend;
    this.#params = createParameters(backend, parameterSpecs(config), seed);
    this.#byName = new Map(this.#params.map((p) => [p.name, p]));
    const mixerOptions = { coupling: options.coupling ?? true, form: options.form ?? "chunk" };
    this.#mixers = [];
    this.#mlps = [];
    for (let l = 0; l < config.layers; l++) {
      this.#mixers.push(createMixer(backend, config, l, (n) => this.#param(n), mixerOptions));
      this.#mlps.push(new SwiGluMlp(backend, config, `layers.${l}.mlp`, (n) => this.#param(n)));
    }
    this.#ws = new Workspace(backend);
  }

  #param(name: string): NamedParam {
    const p = this.#byName.get(name);
    if (!p) throw new Error(`model has no parameter "${name}"`);
    return p;
  }

  /** Every parameter, in the order of `parameterSpecs(config)`. */
  parameters(): NamedParam[] {
    return [...this.#params];
  }

  #ensure(B: number, T: number): ModelActs {
    if (this.#acts && this.#acts.B === B && this.#acts.T === T) return this.#acts;
    const be = this.backend;
    if (this.#acts) {
      const a = this.#acts;
      for (const t of [...a.hIn, ...a.hMid, ...a.norm1, ...a.rstd1, ...a.norm2, ...a.rstd2]) be.dispose(t);
      for (const t of [a.ones, a.normF, a.rstdF, a.logits, a.losses]) be.dispose(t);
    }
    const { dModel: D, layers: L, vocabSize: V } = this.config;
    const flat = [B, T, D];
    const perLayer = (n: number, shape: number[]) => Array.from({ length: n }, () => be.zeros(shape));
    this.#acts = {
      B,
      T,
      ones: be.fromArray(new Float64Array(B * T).fill(1), [B * T, 1]),
      hIn: perLayer(L + 1, flat),
      hMid: perLayer(L, flat),
      norm1: perLayer(L, flat),
      rstd1: perLayer(L, [B * T]),
      norm2: perLayer(L, flat),
      rstd2: perLayer(L, [B * T]),
      normF: be.zeros(flat),
      rstdF: be.zeros([B * T]),
      logits: be.zeros([B, T, V]),
      losses: be.zeros([B * T]),
    };
    return this.#acts;
  }

  #context(batch: Pick<Batch, "B" | "T" | "starts">, acts: ModelActs, training: boolean): StepContext {
    return { B: batch.B, T: batch.T, starts: batch.starts, ones: acts.ones, ws: this.#ws, training };
  }

  /** Forward to logits, keeping every activation backward needs (and what it would recompute, when `training`). */
  #forward(batch: Pick<Batch, "B" | "T" | "ids" | "starts">, training: boolean): ModelActs {
    checkBatch(this.config, batch);
    const be = this.backend;
    const acts = this.#ensure(batch.B, batch.T);
    const ctx = this.#context(batch, acts, training);
    const flat = [batch.B, batch.T, this.config.dModel];
    const blockOut = this.#ws.get("model.blockOut", flat);
    const L = this.config.layers;
    be.embeddingForward(acts.hIn[0], this.#param("embed").value, batch.ids);
    // each residual add and the norm after it are one op (addRmsNormForward)
    const firstNorm = L > 0 ? this.#param("layers.0.attn_norm") : this.#param("final_norm");
    be.rmsNormForward(
      L > 0 ? acts.norm1[0] : acts.normF,
      L > 0 ? acts.rstd1[0] : acts.rstdF,
      acts.hIn[0],
      firstNorm.value,
      NORM_EPS,
    );
    for (let l = 0; l < L; l++) {
      this.#mixers[l].forward(ctx, acts.norm1[l], blockOut);
      const mlpNorm = this.#param(`layers.${l}.mlp_norm`).value;
      addRmsNormForward(
        be,
        acts.hMid[l],
        acts.norm2[l],
        acts.rstd2[l],
        acts.hIn[l],
        blockOut,
        mlpNorm,
        NORM_EPS,
      );
      this.#mlps[l].forward(ctx, acts.norm2[l], blockOut);
      const last = l + 1 === L;
      const nextNorm = this.#param(last ? "final_norm" : `layers.${l + 1}.attn_norm`).value;
      const [norm, rstd] = last ? [acts.normF, acts.rstdF] : [acts.norm1[l + 1], acts.rstd1[l + 1]];
      addRmsNormForward(be, acts.hIn[l + 1], norm, rstd, acts.hMid[l], blockOut, nextNorm, NORM_EPS);
    }
    if (this.config.tieEmbeddings) {
      be.matmul(acts.logits, acts.normF, this.#param("embed").value, { transB: true });
    } else linearForward(be, acts.logits, acts.normF, this.#param("lm_head"));
    return acts;
  }

  /** Logits `[B, T, V]` of a batch (no gradient). */
  async logits(batch: Pick<Batch, "B" | "T" | "ids" | "starts">): Promise<Float32Array | Float64Array> {
    return await this.backend.read(this.#forward(batch, false).logits);
  }

  /** Zero the gradients, run forward and backward; returns the weighted loss sum and the weight sum. */
  async forwardBackward(batch: Batch): Promise<{ loss: number; weight: number }> {
    const losses = await this.backend.read(this.recordForwardBackward(batch));
    let loss = 0;
    for (const x of losses) loss += x;
    return { loss, weight: batchWeight(batch) };
  }

  /**
   * Zero the gradients and record forward and backward without reading anything back; returns the
   * per-position weighted losses `[B*T]` (valid until the next forward), for a caller that keeps the
   * step on the device.
   */
  recordForwardBackward(batch: Batch): Tensor {
    const be = this.backend;
    for (const p of this.#params) be.fill(p.grad, 0);
    const acts = this.#forward(batch, true);
    const ctx = this.#context(batch, acts, true);
    const { dModel: D, layers: L, vocabSize: V } = this.config;
    const flat = [batch.B, batch.T, D];
    const dLogits = this.#ws.get("model.dLogits", [batch.B, batch.T, V], true);
    crossEntropyForwardBackward(be, acts.losses, dLogits, acts.logits, batch.targets, batch.weights);
    const embed = this.#param("embed");
    const dNormF = this.#ws.get("model.dNorm", flat, true);
    if (this.config.tieEmbeddings) {
      be.matmul(dNormF, dLogits, embed.value);
      be.matmul(embed.grad, dLogits, acts.normF, { transA: true, accumulate: true });
    } else {
      linearBackward(be, dNormF, dLogits, acts.normF, this.#param("lm_head"));
    }
    const dh = this.#ws.get("model.dh", flat, true);
    const finalNorm = this.#param("final_norm");
    be.rmsNormBackward(dh, finalNorm.grad, dNormF, acts.hIn[L], finalNorm.value, acts.rstdF);
    for (let l = L - 1; l >= 0; l--) {
      const mlpNorm = this.#param(`layers.${l}.mlp_norm`);
      const dNorm2 = this.#ws.get("model.dNorm", flat, true);
      this.#mlps[l].backward(ctx, acts.norm2[l], dh, dNorm2);
      be.rmsNormBackward(dh, mlpNorm.grad, dNorm2, acts.hMid[l], mlpNorm.value, acts.rstd2[l]);
      const attnNorm = this.#param(`layers.${l}.attn_norm`);
      const dNorm1 = this.#ws.get("model.dNorm", flat, true);
      this.#mixers[l].backward(ctx, acts.norm1[l], dh, dNorm1);
      be.rmsNormBackward(dh, attnNorm.grad, dNorm1, acts.hIn[l], attnNorm.value, acts.rstd1[l]);
    }
    be.embeddingBackward(embed.grad, dh, batch.ids);
    return acts.losses;
  }
}

/**
 * Build a {@linkcode FalconLM} on `backend` with parameters drawn from `seed`.
 *
 * @example
 * ```ts
 * import { createRefBackend } from "../rules/reference/backend.ts";
 * import { modelConfig } from "./config.ts";
 * import { createModel } from "./falcon_lm.ts";
 * const model = createModel(createRefBackend(), modelConfig({ mixer: "transformer", vocabSize: 5, dModel: 8, heads: 2, layers: 1 }), 1);
 * const logits = await model.logits({ B: 1, T: 3, ids: Int32Array.from([0, 1, 2]), starts: new Uint8Array(3) });
 * if (logits.length !== 15) throw new Error("expected B*T*V logits");
 * ```
 */
export function createModel(
  backend: Backend,
  config: ModelConfig,
  seed: number,
  options: ModelOptions = {},
): FalconLM {
  return new FalconLM(backend, config, seed, options);
}
