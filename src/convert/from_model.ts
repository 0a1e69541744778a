/**
 * The weights of a live model as f32 tensors, ready to export (`encodeHf`) or convert.
 *
 * @module
 */

import type { LanguageModel } from "../model/types.ts";
import type { ModelWeights } from "./hf_export.ts";
import { fromValues, type RawTensor } from "./tensor_set.ts";

/**
 * Read every parameter of `model` back from its backend as f32 (rounded to nearest from a float64
 * backend), in `parameters()` order.
 */
export async function weightsFromModel(
  model: LanguageModel,
  nativeMetadata: Record<string, string> = {},
): Promise<ModelWeights> {
  const weights = new Map<string, RawTensor>();
  for (const p of model.parameters()) {
    const values = await model.backend.read(p.value);
    weights.set(
      p.name,
      fromValues(values instanceof Float32Array ? values : Float32Array.from(values), p.value.shape),
    );
  }
  return { config: model.config, weights, dtype: "f32", nativeMetadata };
}

/**
 * Round every parameter of `model` to f32 in place (a no-op on an f32 backend), so the model
 * computes exactly with the weights an f32 export holds.
 */
export async function roundParametersToF32(model: LanguageModel): Promise<void> {
  const be = model.backend;
  for (const p of model.parameters()) {
    const values = await be.read(p.value);
    const rounded = be.fromArray(Float32Array.from(values), p.value.shape);
    be.copy(p.value, rounded);
    be.dispose(rounded);
  }
}
