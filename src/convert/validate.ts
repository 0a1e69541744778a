/**
 * Checks of a checkpoint's weights against its model configuration: every parameter the config
 * needs is present with its shape and a float dtype, nothing else is there, and (unless allowed)
 * every value is finite.
 *
 * @module
 */

import { parameterSpecs } from "../model/params.ts";
import type { ModelConfig } from "../model/types.ts";
import { CheckpointError } from "./errors.ts";
import { firstNonFinite, type RawTensor, weightDtypeOf } from "./tensor_set.ts";

/**
 * Throw a {@linkcode CheckpointError} for `path` unless `weights` (native parameter names) are
 * exactly the parameters of `config`: the message lists every missing and unexpected name, or the
 * first tensor with a wrong shape or a non-float dtype. `describe` maps a native name to the name
 * used in the file (hf names for an hf export).
 */
export function validateWeights(
  path: string,
  config: ModelConfig,
  weights: ReadonlyMap<string, RawTensor>,
  describe: (nativeName: string) => string = (n) => n,
): void {
  const specs = parameterSpecs(config);
  const wanted = new Set(specs.map((s) => s.name));
  const missing = specs.filter((s) => !weights.has(s.name)).map((s) => describe(s.name));
  const unexpected = [...weights.keys()].filter((n) => !wanted.has(n)).map(describe);
  if (missing.length > 0 || unexpected.length > 0) {
    const parts = [];
    if (missing.length > 0) {
      parts.push(`missing tensors for the config (mixer ${config.mixer}): ${missing.join(", ")}`);
    }
    if (unexpected.length > 0) parts.push(`tensors the config does not use: ${unexpected.join(", ")}`);
    throw new CheckpointError(path, parts.join("; "));
  }
  for (const spec of specs) {
    const t = weights.get(spec.name)!;
    if (t.shape.length !== spec.shape.length || t.shape.some((d, i) => d !== spec.shape[i])) {
      throw new CheckpointError(
        path,
        `tensor ${describe(spec.name)} has shape [${t.shape}], the config needs [${spec.shape}]`,
      );
    }
    if (weightDtypeOf(t.dtype) === null) {
      throw new CheckpointError(
        path,
        `tensor ${describe(spec.name)} has dtype ${t.dtype}; weights must be F64, F32, F16 or BF16`,
      );
    }
  }
}

/** Throw a {@linkcode CheckpointError} naming the first tensor and index holding NaN or infinity. */
export function refuseNonFinite(
  path: string,
  weights: ReadonlyMap<string, RawTensor>,
  describe: (nativeName: string) => string = (n) => n,
): void {
  for (const [name, t] of weights) {
    const i = firstNonFinite(name, t);
    if (i >= 0) {
      throw new CheckpointError(
        path,
        `tensor ${
          describe(name)
        } holds a non-finite value at flat index ${i}; pass --allow-nonfinite to convert it anyway`,
      );
    }
  }
}
