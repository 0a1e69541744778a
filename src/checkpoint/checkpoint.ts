/**
 * The native checkpoint: one safetensors file holding
 * - every model parameter under its own name (e.g. `layers.0.mixer.q_proj`), in the dtype of the
 *   backend that trained it (`F64` on the reference backend, `F32` on the fast backends) so that a
 *   resumed run continues bit-identically;
 * - the AdamW moments under `optimizer.m.<name>` and `optimizer.v.<name>` (same dtype);
 * - in `__metadata__` (all strings): `format` = `falcon-checkpoint`, `format_version` =
 *   {@linkcode CHECKPOINT_FORMAT_VERSION}, `step`, `rng_state` (the data stream's 32-bit state),
 *   and the JSON of the model, task and training configurations (`model_config`, `task_config`,
 *   `train_config`); optionally `elapsed_seconds` (training time up to `step`, summed over
 *   resumes) and `run_config` (JSON: the preset and the overrides the run was started with); and
 *   `content_digest`, the SHA-256 of the header and data (`digest.ts`), checked on every read: a
 *   file edited or corrupted after it was written is refused. A file without a digest (written
 *   before digests existed) still loads.
 *
 * Version 2 (current): every mixer honours `shortConv` and `qkNorm`. Version-1 files still load:
 * a version-1 Transformer ran plain whatever its config said, so its `model_config` is read with
 * `shortConv: false, qkNorm: "none"` (`format_upgrade.ts`); fast-weight configs load unchanged.
 *
 * Reading normalises the task configuration ({@linkcode normalizeTaskConfig}): an addition
 * checkpoint saved before the format options existed loads with the defaults that mean its format
 * (operands msd, no BOS, no index hints, no curriculum).
 *
 * @module
 */

import type { ModelConfig } from "../model/types.ts";
import { normalizeTaskConfig, type TaskConfig } from "../tasks/mod.ts";
import { atomicWriteFile } from "./atomic_write.ts";
import { verifyContentDigest, withContentDigest } from "./digest.ts";
import { modelConfigAsTrained } from "./format_upgrade.ts";
import { readSafetensors, type SafeTensor, SafetensorsError, writeSafetensors } from "./safetensors.ts";

/** Version of the checkpoint layout this code writes (and the newest it reads). */
export const CHECKPOINT_FORMAT_VERSION = 2;

/** The oldest version {@linkcode decodeCheckpoint} reads (`falcon convert` also upgrades version 0). */
export const OLDEST_READABLE_FORMAT_VERSION = 1;

/** Value of the `format` metadata key. */
export const CHECKPOINT_FORMAT = "falcon-checkpoint";

/** A float tensor of a checkpoint: shape and elements. */
export interface FloatTensor {
  /** Dimensions. */
  readonly shape: readonly number[];
  /** Elements (F32 or F64). */
  readonly data: Float32Array | Float64Array;
}

/** Everything a checkpoint holds. */
export interface CheckpointState {
  /** Optimizer steps taken. */
  readonly step: number;
  /** State of the training data stream (`DataRng.state`). */
  readonly rngState: number;
  /** Architecture. */
  readonly model: ModelConfig;
  /** Task configuration. */
  readonly task: TaskConfig;
  /** Training configuration (JSON object; the trainer validates it). */
  readonly train: Record<string, unknown>;
  /** Parameters by name. */
  readonly params: Record<string, FloatTensor>;
  /** AdamW first moments by parameter name (empty before the first step). */
  readonly adamM: Record<string, FloatTensor>;
  /** AdamW second moments by parameter name. */
  readonly adamV: Record<string, FloatTensor>;
  /** Seconds of training up to `step`, summed over resumes (absent in older files). */
  readonly elapsedSeconds?: number;
  /** How the run was configured: the preset and the overrides given (JSON object; absent in older files). */
  readonly runConfig?: Record<string, unknown>;
}

const M_PREFIX = "optimizer.m.";
const V_PREFIX = "optimizer.v.";

function toSafe(t: FloatTensor): SafeTensor {
  return t.data instanceof Float64Array
    ? { dtype: "F64", shape: t.shape, data: t.data }
    : { dtype: "F32", shape: t.shape, data: t.data };
}

/** Serialise a checkpoint to safetensors bytes. */
export function encodeCheckpoint(state: CheckpointState): Uint8Array {
  const tensors: Record<string, SafeTensor> = {};
  for (const [name, t] of Object.entries(state.params)) {
    if (name.startsWith("optimizer.")) {
      throw new RangeError(`parameter name "${name}" collides with optimizer state`);
    }
    tensors[name] = toSafe(t);
  }
  for (const [name, t] of Object.entries(state.adamM)) tensors[M_PREFIX + name] = toSafe(t);
  for (const [name, t] of Object.entries(state.adamV)) tensors[V_PREFIX + name] = toSafe(t);
  const metadata: Record<string, string> = {
    format: CHECKPOINT_FORMAT,
    format_version: String(CHECKPOINT_FORMAT_VERSION),
    step: String(state.step),
    rng_state: String(state.rngState),
    model_config: JSON.stringify(state.model),
    task_config: JSON.stringify(state.task),
    train_config: JSON.stringify(state.train),
  };
  if (state.elapsedSeconds !== undefined) metadata.elapsed_seconds = String(state.elapsedSeconds);
  if (state.runConfig !== undefined) metadata.run_config = JSON.stringify(state.runConfig);
  return withContentDigest(writeSafetensors(tensors, metadata));
}

/**
 * Parse and validate a checkpoint of format version 1 or 2; errors name `fileName` and the field.
 * The model config of an older version is read as that version ran it (see the module doc).
 */
export function decodeCheckpoint(bytes: Uint8Array, fileName: string): CheckpointState {
  const { tensors, metadata } = readSafetensors(bytes, fileName);
  const fail = (msg: string): never => {
    throw new SafetensorsError(`${fileName}: ${msg}`);
  };
  if (metadata.format !== CHECKPOINT_FORMAT) {
    fail(
      `__metadata__.format is ${
        JSON.stringify(metadata.format)
      }, expected "${CHECKPOINT_FORMAT}" (not a falcon checkpoint)`,
    );
  }
  const version = Number(metadata.format_version);
  if (
    !/^\d+$/.test(metadata.format_version ?? "") || version < OLDEST_READABLE_FORMAT_VERSION ||
    version > CHECKPOINT_FORMAT_VERSION
  ) {
    fail(
      `__metadata__.format_version ${
        JSON.stringify(metadata.format_version)
      } is not supported (expected ${OLDEST_READABLE_FORMAT_VERSION} to ${CHECKPOINT_FORMAT_VERSION})`,
    );
  }
  verifyContentDigest(bytes, fileName); // after the version check: a newer file is refused as such
  const integer = (key: string): number => {
    const v = Number(metadata[key]);
    if (!/^\d+$/.test(metadata[key] ?? "") || !Number.isSafeInteger(v)) {
      fail(`__metadata__.${key} ${JSON.stringify(metadata[key])} is not a non-negative integer`);
    }
    return v;
  };
  const json = (key: string): Record<string, unknown> => {
    let v: unknown;
    try {
      v = JSON.parse(metadata[key] ?? "");
    } catch {
      fail(`__metadata__.${key} is missing or not JSON`);
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      fail(`__metadata__.${key} is not a JSON object`);
    }
    return v as Record<string, unknown>;
  };
  // entry lists, turned into objects by fromEntries: even a tensor named "__proto__" stays an entry
  const params: [string, FloatTensor][] = [];
  const adamM: [string, FloatTensor][] = [];
  const adamV: [string, FloatTensor][] = [];
  for (const [name, t] of Object.entries(tensors)) {
    if (t.dtype !== "F32" && t.dtype !== "F64") {
      fail(`tensor "${name}": dtype ${t.dtype}, expected F32 or F64`);
    }
    const ft: FloatTensor = { shape: t.shape, data: t.data as Float32Array | Float64Array };
    if (name.startsWith(M_PREFIX)) adamM.push([name.slice(M_PREFIX.length), ft]);
    else if (name.startsWith(V_PREFIX)) adamV.push([name.slice(V_PREFIX.length), ft]);
    else params.push([name, ft]);
  }
  const step = integer("step");
  const rngState = integer("rng_state");
  const task = json("task_config");
  if (typeof task.task !== "string") fail(`__metadata__.task_config has no "task" name`);
  let taskConfig: TaskConfig;
  try {
    taskConfig = normalizeTaskConfig(task as unknown as TaskConfig);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    fail(`__metadata__.task_config: ${err.message}`);
  }
  let elapsedSeconds: number | undefined;
  if (metadata.elapsed_seconds !== undefined) {
    elapsedSeconds = Number(metadata.elapsed_seconds);
    if (!(Number.isFinite(elapsedSeconds) && elapsedSeconds >= 0)) {
      fail(`__metadata__.elapsed_seconds ${JSON.stringify(metadata.elapsed_seconds)} is not a number >= 0`);
    }
  }
  const runConfig = metadata.run_config === undefined ? undefined : json("run_config");
  return {
    step,
    rngState,
    // the config of the model as the file's version ran it (a version-1 Transformer is plain)
    model: modelConfigAsTrained(json("model_config"), version) as unknown as ModelConfig,
    task: taskConfig!,
    train: json("train_config"),
    params: Object.fromEntries(params),
    adamM: Object.fromEntries(adamM),
    adamV: Object.fromEntries(adamV),
    ...(elapsedSeconds === undefined ? {} : { elapsedSeconds }),
    ...(runConfig === undefined ? {} : { runConfig }),
  };
}

/** Write a checkpoint atomically (temporary file in the same directory, then rename). */
export async function saveCheckpoint(path: string, state: CheckpointState): Promise<void> {
  await atomicWriteFile(path, encodeCheckpoint(state));
}

/** Read and validate a checkpoint file. */
export async function loadCheckpoint(path: string): Promise<CheckpointState> {
  return decodeCheckpoint(await Deno.readFile(path), path);
}
