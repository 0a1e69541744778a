/**
 * Test helpers for the model: a tiny configuration, a packed batch, the loss recomputed on the
 * host from logits, and a finite-difference gradient check over random parameter coordinates.
 * Float64 reference backend only (parameters are perturbed in place).
 *
 * @module
 */

import { refData } from "../rules/reference/tensor.ts";
import { Rng } from "../testing/compare.ts";
import { modelConfig } from "./config.ts";
import type { Batch, LanguageModel, MixerName, ModelConfig } from "./types.ts";

/** vocab 7, dModel 8, 2 heads, 2 layers, ffnHidden 12, chunkSize 4 (so T = 6 spans two chunks). */
export function tinyConfig(mixer: MixerName, overrides: Partial<ModelConfig> = {}): ModelConfig {
  return modelConfig({
    mixer,
    vocabSize: 7,
    dModel: 8,
    heads: 2,
    layers: 2,
    ffnHidden: 12,
    chunkSize: 4,
    window: 3,
    ...overrides,
  });
}

/** A seeded batch of `B` rows and `T` positions; row 0 packs two sequences (a start at `T/2`). */
export function packedBatch(seed: number, vocab: number, B = 2, T = 6): Batch {
  const rng = new Rng(seed);
  const draw = () => Math.floor(rng.uniform() * vocab);
  const ids = Int32Array.from({ length: B * T }, draw);
  const targets = Int32Array.from({ length: B * T }, draw);
  const weights = Float32Array.from({ length: B * T }, (_, i) => (i % 5 === 3 ? 0 : 0.5 + rng.uniform()));
  const starts = new Uint8Array(B * T);
  for (let b = 0; b < B; b++) starts[b * T] = 1;
  starts[Math.floor(T / 2)] = 1;
  return { B, T, ids, targets, weights, starts };
}

/** `sum_n weights[n] * -log softmax(logits[n])[targets[n]]`, on the host. */
export async function hostLoss(model: LanguageModel, batch: Batch): Promise<number> {
  const logits = await model.logits(batch);
  const V = model.config.vocabSize;
  let loss = 0;
  for (let n = 0; n < batch.B * batch.T; n++) {
    if (batch.weights[n] === 0) continue;
    let max = -Infinity;
    for (let v = 0; v < V; v++) max = Math.max(max, logits[n * V + v]);
    let sum = 0;
    for (let v = 0; v < V; v++) sum += Math.exp(logits[n * V + v] - max);
    loss += batch.weights[n] * (max + Math.log(sum) - logits[n * V + batch.targets[n]]);
  }
  return loss;
}

/** One compared coordinate. */
export interface GradSample {
  /** Parameter name and flat index. */
  readonly where: string;
  /** Backward's gradient. */
  readonly analytic: number;
  /** Central finite difference. */
  readonly numeric: number;
}

/**
 * Compare `forwardBackward`'s gradients with central differences of the host loss at `perParam`
 * random coordinates of every parameter. Returns every sample; throws on the first that differs
 * by more than `atol + rtol * |numeric|`.
 */
export async function checkModelGradients(
  model: LanguageModel,
  batch: Batch,
  options: { seed: number; perParam: number; step?: number; rtol?: number; atol?: number },
): Promise<GradSample[]> {
  const { step = 1e-6, rtol = 1e-5, atol = 1e-7 } = options;
  const rng = new Rng(options.seed);
  await model.forwardBackward(batch);
  const grads = new Map<string, Float64Array>();
  for (const p of model.parameters()) grads.set(p.name, Float64Array.from(await model.backend.read(p.grad)));
  const samples: GradSample[] = [];
  for (const p of model.parameters()) {
    const value = refData(p.value, p.name);
    for (let s = 0; s < options.perParam; s++) {
      const i = Math.floor(rng.uniform() * value.length);
      const keep = value[i];
      value[i] = keep + step;
      const up = await hostLoss(model, batch);
      value[i] = keep - step;
      const down = await hostLoss(model, batch);
      value[i] = keep;
      const sample = {
        where: `${p.name}[${i}]`,
        analytic: grads.get(p.name)![i],
        numeric: (up - down) / (2 * step),
      };
      samples.push(sample);
      if (!(Math.abs(sample.analytic - sample.numeric) <= atol + rtol * Math.abs(sample.numeric))) {
        throw new Error(
          `${model.config.mixer}: gradient of ${sample.where} is ${sample.analytic}, finite difference ${sample.numeric}`,
        );
      }
    }
  }
  return samples;
}
