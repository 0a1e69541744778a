/**
 * A checkpoint of either format as the trainer's {@linkcode CheckpointState}, for the commands
 * that run a trained model (`falcon predict`, `falcon eval`): a native file is read as it is; an
 * hf export directory is read, its weights checked against its config and widened from f16/bf16
 * to f32, and rebuilt as the native checkpoint `falcon convert --to native` would write. An hf
 * export carries the task configuration (`falcon_metadata`) only when it was made from a native
 * checkpoint; one without it is refused, naming the file.
 *
 * @module
 */

import { type CheckpointState, decodeCheckpoint, loadCheckpoint } from "../checkpoint/checkpoint.ts";
import { CheckpointError } from "./errors.ts";
import { loadAnyCheckpoint } from "./load.ts";
import { encodeNative } from "./native_format.ts";
import { convertTensor, type RawTensor, weightDtypeOf } from "./tensor_set.ts";
import { validateWeights } from "./validate.ts";

/**
 * Read the checkpoint at `path`, a native file or an hf export directory (detected). A missing
 * path throws `Deno.errors.NotFound` as reading a file does.
 */
export async function loadCheckpointState(path: string): Promise<CheckpointState> {
  if (!(await Deno.stat(path)).isDirectory) return await loadCheckpoint(path);
  const hf = await loadAnyCheckpoint(path);
  validateWeights(hf.weightsPath, hf.config, hf.weights, hf.describe);
  for (const key of ["task_config", "step", "rng_state", "train_config"]) {
    if (hf.metadata[key] === undefined) {
      throw new CheckpointError(
        hf.files[0].path,
        `falcon_metadata has no ${key}: predict and eval need the task of an export made from a falcon checkpoint`,
      );
    }
  }
  const weights = new Map<string, RawTensor>();
  for (const [name, t] of hf.weights) {
    const dtype = weightDtypeOf(t.dtype);
    weights.set(name, dtype === "f16" || dtype === "bf16" ? convertTensor(name, t, "f32").tensor : t);
  }
  return decodeCheckpoint(encodeNative(hf.config, weights, new Map(), hf.metadata), path);
}
