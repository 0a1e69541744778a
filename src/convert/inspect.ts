/**
 * `falcon inspect FILE_OR_DIR [--json]` as plain functions: what a checkpoint holds (format,
 * version, config, parameter count, tensors with dtype and shape, total size) and its text form.
 *
 * @module
 */

import { parameterCount } from "../model/params.ts";
import type { ModelConfig } from "../model/types.ts";
import { CheckpointError } from "./errors.ts";
import { type CheckpointFormat, loadAnyCheckpoint } from "./load.ts";
import { validateOptimizer } from "./native_format.ts";
import { elementCount } from "./tensor_set.ts";
import { refuseNonFinite, validateWeights } from "./validate.ts";

/** One tensor of a checkpoint, as the files name it. */
export interface InspectedTensor {
  /** Name in the file. */
  readonly name: string;
  /** Safetensors dtype tag. */
  readonly dtype: string;
  /** Dimensions. */
  readonly shape: number[];
  /** Bytes of data. */
  readonly bytes: number;
}

/** What `falcon inspect` reports (also its `--json` output). */
export interface InspectReport {
  /** Path inspected. */
  readonly path: string;
  /** Detected format. */
  readonly format: CheckpointFormat;
  /** Format version the files declare. */
  readonly version: number;
  /** Model configuration. */
  readonly config: ModelConfig;
  /** Trainable scalars the config defines (a tied head counts once). */
  readonly parameterCount: number;
  /** Scalars stored in weight tensors (excluding optimizer state). */
  readonly storedParameters: number;
  /** Every weight tensor, then every optimizer tensor, as named in the files. */
  readonly tensors: InspectedTensor[];
  /** Number of optimizer-state tensors. */
  readonly optimizerTensors: number;
  /** Other metadata strings (step, rng_state, task and train config). */
  readonly metadata: Record<string, string>;
  /** Total size of the files in bytes. */
  readonly totalBytes: number;
  /** Notes from loading (format upgrades). */
  readonly notes: string[];
  /** The content digest of a native file (verified: a mismatch is refused on load), or null when it has none. */
  readonly digest: string | null;
  /** Why `falcon convert` would refuse the weights (missing or extra tensors, wrong shapes, NaN/Inf); empty when none. */
  readonly problems: string[];
}

/** The message of each check that fails. */
function problemsOf(checks: (() => void)[]): string[] {
  const problems: string[] = [];
  for (const check of checks) {
    try {
      check();
    } catch (err) {
      if (!(err instanceof CheckpointError)) throw err;
      problems.push(err.message);
    }
  }
  return problems;
}

/**
 * Inspect the checkpoint at `path` (format detected). A container or config that cannot be read
 * throws; weights that `falcon convert` would refuse are listed in `problems`.
 */
export async function inspectCheckpoint(path: string): Promise<InspectReport> {
  const c = await loadAnyCheckpoint(path);
  const tensors: InspectedTensor[] = [];
  let storedParameters = 0;
  for (const [name, t] of c.weights) {
    tensors.push({
      name: c.describe(name),
      dtype: t.dtype,
      shape: c.fileShape(name, t.shape),
      bytes: t.data.length,
    });
    storedParameters += elementCount(t.shape);
  }
  for (const [name, t] of c.optimizer) {
    tensors.push({ name, dtype: t.dtype, shape: [...t.shape], bytes: t.data.length });
  }
  const { model_config: _m, ...metadata } = c.metadata;
  return {
    path,
    format: c.format,
    version: c.version,
    config: c.config,
    parameterCount: parameterCount(c.config),
    storedParameters,
    tensors,
    optimizerTensors: c.optimizer.size,
    metadata,
    totalBytes: c.files.reduce((n, f) => n + f.bytes, 0),
    notes: c.notes,
    digest: c.digest.state === "verified" ? c.digest.digest : null,
    problems: problemsOf([
      () => validateWeights(c.weightsPath, c.config, c.weights, c.describe),
      () => validateOptimizer(c.weightsPath, c.weights, c.optimizer),
      () => refuseNonFinite(c.weightsPath, c.weights, c.describe),
      () => refuseNonFinite(c.weightsPath, c.optimizer),
    ]),
  };
}

/** Human-readable size: bytes with a binary unit. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB"];
  let u = 0;
  let v = n;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]} (${n} bytes)`;
}

/** The text form of an {@linkcode InspectReport}. */
export function formatInspect(r: InspectReport): string {
  const lines = [
    `${r.path}: ${r.format} checkpoint, format version ${r.version}`,
    ...r.notes.map((n) => `note: ${n}`),
    `model: ${r.config.mixer}, ${r.config.alignment} alignment, qkNorm ${r.config.qkNorm}, ` +
    `${r.config.layers} layers, dModel ${r.config.dModel}, ${r.config.heads} heads, vocab ${r.config.vocabSize}`,
    `config: ${JSON.stringify(r.config)}`,
    `parameters: ${r.parameterCount}`,
    r.digest === null
      ? `digest: no digest (${
        r.format === "hf" ? "an hf export" : "written before falcon stored digests"
      }; integrity not checked)`
      : `digest: ${r.digest} (verified)`,
  ];
  for (const [k, v] of Object.entries(r.metadata)) lines.push(`${k}: ${v}`);
  const width = Math.max(...r.tensors.map((t) => t.name.length), 4);
  lines.push(`tensors: ${r.tensors.length} (${r.optimizerTensors} optimizer state)`);
  for (const t of r.tensors) {
    lines.push(`  ${t.name.padEnd(width)}  ${t.dtype.padEnd(4)}  [${t.shape.join(", ")}]`);
  }
  lines.push(`total size: ${formatBytes(r.totalBytes)}`);
  for (const p of r.problems) lines.push(`problem: ${p}`);
  return lines.join("\n");
}
