/**
 * The `hf` export (a directory with `config.json` and `model.safetensors`, see
 * `docs/checkpoint-format.md`): build its files from native weights, and read one back into
 * native weights. Layout changes are byte copies, so no value is altered.
 *
 * @module
 */

import { parameterSpecs } from "../model/params.ts";
import type { ModelConfig } from "../model/types.ts";
import type { WeightDtype } from "./dtype.ts";
import { CheckpointError } from "./errors.ts";
import { parseHfConfig, toHfConfig } from "./hf_config.ts";
import { hfPlacement, hfShape, nativePlacement, nativeShape, transposeBytes } from "./hf_layout.ts";
import { decodeSafetensors, ELEMENT_BYTES, encodeSafetensors } from "./safetensors_io.ts";
import type { RawTensor } from "./tensor_set.ts";

/** File names inside an hf export directory. */
export const HF_FILES = { config: "config.json", weights: "model.safetensors" } as const;

/** What a checkpoint holds, in native names and layouts, whatever its format. */
export interface ModelWeights {
  /** The model architecture. */
  readonly config: ModelConfig;
  /** Weights by native parameter name, in `parameterSpecs(config)` order. */
  readonly weights: Map<string, RawTensor>;
  /** The dtype label of the weights (`torch_dtype`): the embedding's dtype. */
  readonly dtype: WeightDtype;
  /** Other native metadata (task and train config, ...), verbatim. */
  readonly nativeMetadata: Record<string, string>;
}

/** A native tensor in the hf layout (or the reverse with `toNative`). */
function relayout(t: RawTensor, change: "same" | "transpose" | "conv", toNative: boolean): RawTensor {
  const shape = toNative ? nativeShape(t.shape, change) : hfShape(t.shape, change);
  if (change !== "transpose") return { dtype: t.dtype, shape, data: t.data };
  return {
    dtype: t.dtype,
    shape,
    data: transposeBytes(t.data, t.shape[0], t.shape[1], ELEMENT_BYTES[t.dtype]),
  };
}

/** The two files of an hf export of `model`: `config.json` text and `model.safetensors` bytes. */
export function encodeHf(model: ModelWeights): { config: string; weights: Uint8Array } {
  const entries: [string, RawTensor][] = [];
  for (const spec of parameterSpecs(model.config)) {
    const t = model.weights.get(spec.name);
    if (!t) throw new RangeError(`no weight for parameter ${spec.name}`);
    const place = hfPlacement(spec.name);
    entries.push([place.name, relayout(t, place.change, false)]);
  }
  const config = JSON.stringify(toHfConfig(model.config, model.dtype, model.nativeMetadata), null, 2) + "\n";
  return { config, weights: encodeSafetensors(entries, { format: "pt" }) };
}

/**
 * Read an hf export from its two files. Validates the container and `config.json` (an older layout
 * version is upgraded, with notes); maps every tensor to its native name and layout (an unknown
 * tensor name is refused). The caller checks the
 * weights against the config (`validateWeights`).
 */
export function decodeHf(
  configText: string,
  weightBytes: Uint8Array,
  paths: { config: string; weights: string },
): ModelWeights & { readonly version: number; readonly notes: string[] } {
  const parsed = parseHfConfig(configText, paths.config);
  const { tensors } = decodeSafetensors(weightBytes, paths.weights);
  const weights = new Map<string, RawTensor>();
  for (const [name, t] of tensors) {
    let place;
    try {
      place = nativePlacement(name);
    } catch {
      throw new CheckpointError(paths.weights, `tensor ${name} is not part of the hf layout`);
    }
    try {
      weights.set(place.name, relayout(t, place.change, true));
    } catch (err) {
      throw new CheckpointError(paths.weights, `tensor ${name}: ${(err as Error).message}`);
    }
  }
  // parameterSpecs order, then anything else (refused later by validateWeights, with its name)
  const ordered = new Map<string, RawTensor>();
  for (const spec of parameterSpecs(parsed.config)) {
    const t = weights.get(spec.name);
    if (t) ordered.set(spec.name, t);
  }
  for (const [name, t] of weights) if (!ordered.has(name)) ordered.set(name, t);
  return {
    config: parsed.config,
    weights: ordered,
    dtype: parsed.dtype,
    nativeMetadata: parsed.nativeMetadata,
    version: parsed.version,
    notes: parsed.notes,
  };
}

/** The hf name of a native parameter (for error messages about an hf file). */
export function hfName(nativeName: string): string {
  try {
    return hfPlacement(nativeName).name;
  } catch {
    return nativeName;
  }
}
