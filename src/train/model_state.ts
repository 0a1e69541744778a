/**
 * Moving parameters and optimizer moments between backend tensors and host arrays (for checkpoints).
 *
 * @module
 */

import type { FloatTensor } from "../checkpoint/checkpoint.ts";
import type { Backend, Tensor } from "../rules/backend.ts";

/** Copy named backend tensors to host arrays (in the backend's dtype). */
export async function readTensors(
  backend: Backend,
  tensors: ReadonlyMap<string, Tensor>,
): Promise<Record<string, FloatTensor>> {
  // every read is issued before any is awaited: a GPU backend maps them together (one round trip)
  const entries = [...tensors];
  const data = await Promise.all(entries.map(([, t]) => backend.read(t)));
  const out: Record<string, FloatTensor> = {};
  entries.forEach(([name, t], i) => out[name] = { shape: [...t.shape], data: data[i] });
  return out;
}

/**
 * Copy host arrays into named backend tensors. The names must match exactly and every shape must
 * agree; errors name `source` (e.g. the checkpoint file) and the tensor.
 */
export function writeTensors(
  backend: Backend,
  targets: ReadonlyMap<string, Tensor>,
  values: Record<string, FloatTensor>,
  source: string,
): void {
  for (const name of Object.keys(values)) {
    if (!targets.has(name)) {
      throw new RangeError(`${source}: tensor "${name}" is not a parameter of this model`);
    }
  }
  for (const [name, t] of targets) {
    const v = values[name];
    if (!v) throw new RangeError(`${source}: parameter "${name}" is missing`);
    if (v.shape.length !== t.shape.length || v.shape.some((d, i) => d !== t.shape[i])) {
      throw new RangeError(
        `${source}: parameter "${name}" has shape [${v.shape}], the model needs [${t.shape}]`,
      );
    }
    const host = backend.fromArray(v.data, t.shape);
    backend.copy(t, host);
    backend.dispose(host);
  }
}
