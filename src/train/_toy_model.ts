/**
 * A bigram language model built from backend dense ops, for testing the trainer without the full
 * model: `logits = embed[ids] @ head`. Private to tests (the `_` prefix).
 *
 * @module
 */

import {
  type Batch,
  batchWeight,
  type LanguageModel,
  type ModelConfig,
  type NamedParam,
} from "../model/types.ts";
import type { Backend } from "../rules/backend.ts";
import { DataRng } from "../tasks/rng.ts";

/** Options of {@linkcode createToyModel}. */
export interface ToyOptions {
  /** Make the gradient of `head` NaN on this 1-based `forwardBackward` call. */
  readonly nanGradAtCall?: number;
  /** Make the loss infinite on this 1-based `forwardBackward` call. */
  readonly infLossAtCall?: number;
}

/** A bigram model with `embed` `[V, D]` (decayed), `head` `[D, V]` (decayed) and `scale` `[V]` (not decayed). */
export function createToyModel(
  backend: Backend,
  config: ModelConfig,
  seed: number,
  options: ToyOptions = {},
): LanguageModel {
  const V = config.vocabSize;
  const D = config.dModel;
  const rng = new DataRng(seed);
  const init = (n: number, s: number) => Array.from({ length: n }, () => s * (rng.uniform() * 2 - 1));
  const param = (name: string, shape: number[], values: number[], decay: boolean): NamedParam => ({
    name,
    value: backend.fromArray(values, shape),
    grad: backend.zeros(shape),
    decay,
  });
  const params = [
    param("embed", [V, D], init(V * D, 0.5), true),
    param("head", [D, V], init(D * V, 0.5), true),
    param("scale", [V], new Array(V).fill(1), false),
  ];
  const [embed, head, scale] = params;
  let calls = 0;
  const forward = (B: number, T: number, ids: Int32Array) => {
    const h = backend.zeros([B * T, D]);
    backend.embeddingForward(h, embed.value, ids);
    const raw = backend.zeros([B * T, V]);
    backend.matmul(raw, h, head.value);
    // logits = raw * scale (broadcast over rows) via a ones column: scaleRows [N, V]
    const ones = backend.fromArray(new Array(B * T).fill(1), [B * T, 1]);
    const scaleRows = backend.zeros([B * T, V]);
    backend.matmul(scaleRows, ones, scale.value);
    const logits = backend.zeros([B * T, V]);
    backend.mul(logits, raw, scaleRows);
    return { h, raw, ones, scaleRows, logits };
  };
  return {
    config,
    backend,
    parameters: () => params,
    async forwardBackward(batch: Batch) {
      calls++;
      for (const p of params) backend.fill(p.grad, 0);
      const { B, T } = batch;
      const a = forward(B, T, batch.ids);
      const losses = backend.zeros([B * T]);
      backend.crossEntropyForward(losses, a.logits, batch.targets, batch.weights);
      const dLogits = backend.zeros([B * T, V]);
      backend.crossEntropyBackward(dLogits, a.logits, batch.targets, batch.weights);
      const dRaw = backend.zeros([B * T, V]);
      backend.mul(dRaw, dLogits, a.scaleRows);
      const dScaleRows = backend.zeros([B * T, V]);
      backend.mul(dScaleRows, dLogits, a.raw);
      backend.matmul(scale.grad, a.ones, dScaleRows, { transA: true, accumulate: true });
      backend.matmul(head.grad, a.h, dRaw, { transA: true, accumulate: true });
      const dh = backend.zeros([B * T, D]);
      backend.matmul(dh, dRaw, head.value, { transB: true });
      backend.embeddingBackward(embed.grad, dh, batch.ids);
      if (calls === options.nanGradAtCall) backend.fill(head.grad, NaN);
      let loss = 0;
      for (const x of await backend.read(losses)) loss += x;
      if (calls === options.infLossAtCall) loss = Infinity;
      return { loss, weight: batchWeight(batch) };
    },
    async logits(batch) {
      return await backend.read(forward(batch.B, batch.T, batch.ids).logits);
    },
  };
}
