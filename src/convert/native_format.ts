/**
 * The native checkpoint (`src/checkpoint/checkpoint.ts`) as `falcon convert` reads and writes it:
 * raw tensors (every bit kept), the metadata strings verbatim, older format versions upgraded on
 * load with a note, and the weights checked against the model configuration.
 *
 * Layout (format versions 1 and 2): parameters under their names (`parameterSpecs` order), AdamW moments
 * under `optimizer.m.<name>` and `optimizer.v.<name>`; `__metadata__` holds `format`
 * (`falcon-checkpoint`), `format_version`, `step`, `rng_state`, `model_config`, `task_config`,
 * `train_config` (JSON strings).
 *
 * Version 0 is the layout before `format_version` existed (the same tensors and keys, no version
 * key). No release wrote it; it is the tested entry of the upgrade table. Version 1 differs from 2
 * only in what a Transformer's `model_config` means: version 1 ran every Transformer plain, so the
 * upgrade writes `shortConv: false, qkNorm: "none"` into a Transformer's config
 * (`checkpoint/format_upgrade.ts`) and leaves every other file's metadata as it was.
 *
 * @module
 */

import { CHECKPOINT_FORMAT, CHECKPOINT_FORMAT_VERSION } from "../checkpoint/checkpoint.ts";
import {
  DIGEST_KEY,
  type DigestStatus,
  verifyContentDigest,
  withContentDigest,
} from "../checkpoint/digest.ts";
import { modelConfigTextAsTrained } from "../checkpoint/format_upgrade.ts";
import { validateModelConfig } from "../model/config.ts";
import { parameterSpecs } from "../model/params.ts";
import type { ModelConfig } from "../model/types.ts";
import { asCheckpointError, CheckpointError } from "./errors.ts";
import { decodeSafetensors, encodeSafetensors } from "./safetensors_io.ts";
import type { RawTensor } from "./tensor_set.ts";

/** Prefixes of the optimizer-state tensors. */
export const OPTIMIZER_PREFIXES = ["optimizer.m.", "optimizer.v."] as const;

/** A native checkpoint, decoded. */
export interface NativeContents {
  /** The validated model configuration (parsed from `model_config`). */
  readonly config: ModelConfig;
  /** Parameters by name. */
  readonly weights: Map<string, RawTensor>;
  /** Optimizer state by full tensor name (`optimizer.m.<name>`, `optimizer.v.<name>`). */
  readonly optimizer: Map<string, RawTensor>;
  /** Every metadata string after upgrading (`format`, `format_version`, `model_config`, ...). */
  readonly metadata: Record<string, string>;
  /** The format version the file was written in (before any upgrade). */
  readonly version: number;
  /** One line per upgrade applied on load. */
  readonly notes: string[];
  /** The content digest: verified, or absent (a file written before digests). */
  readonly digest: DigestStatus;
}

/** An upgrade from version `v` to `v + 1` of the raw metadata and tensors; returns its note. */
type Upgrade = (metadata: Record<string, string>, tensors: Map<string, RawTensor>) => string;

/** `UPGRADES[v]` turns a version-`v` file into version `v + 1`. */
const UPGRADES: Readonly<Record<number, Upgrade>> = {
  0: (metadata) => {
    metadata.format_version = "1";
    return "upgraded native format version 0 (no format_version key) to version 1";
  },
  1: (metadata) => {
    metadata.format_version = "2";
    const plain = modelConfigTextAsTrained(metadata.model_config, 1);
    if (plain === null) return "upgraded native format version 1 to version 2";
    metadata.model_config = plain;
    return "upgraded native format version 1 to version 2: a version-1 Transformer ran without short " +
      'convolution and QK norm, so its model_config now says shortConv false, qkNorm "none"';
  },
};

/** The version a file declares: 0 when it has no `format_version` key. */
function declaredVersion(path: string, metadata: Record<string, string>): number {
  const raw = metadata.format_version;
  if (raw === undefined) return 0;
  if (!/^\d+$/.test(raw)) {
    throw new CheckpointError(path, `__metadata__.format_version ${JSON.stringify(raw)} is not an integer`);
  }
  const v = Number(raw);
  if (v > CHECKPOINT_FORMAT_VERSION) {
    throw new CheckpointError(
      path,
      `__metadata__.format_version ${v} is newer than this falcon understands (${CHECKPOINT_FORMAT_VERSION}); upgrade falcon`,
    );
  }
  return v;
}

/**
 * Upgrade a native file's metadata and tensors in place to the current version; returns the
 * version it had and the notes of each step.
 */
export function upgradeNative(
  path: string,
  metadata: Record<string, string>,
  tensors: Map<string, RawTensor>,
): { version: number; notes: string[] } {
  const version = declaredVersion(path, metadata);
  const notes: string[] = [];
  for (let v = version; v < CHECKPOINT_FORMAT_VERSION; v++) {
    const step = UPGRADES[v];
    if (!step) throw new CheckpointError(path, `no upgrade from native format version ${v}`);
    notes.push(step(metadata, tensors));
  }
  return { version, notes };
}

/** Parse `model_config` JSON and validate it; errors name the file and the field. */
export function parseModelConfigField(path: string, text: string | undefined, field: string): ModelConfig {
  if (text === undefined) throw new CheckpointError(path, `missing ${field}`);
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(path, `${field} is not JSON (${(err as Error).message})`);
  }
  if (!config || typeof config !== "object" || Array.isArray(config)) {
    throw new CheckpointError(path, `${field} is not a JSON object`);
  }
  try {
    validateModelConfig(config as ModelConfig);
  } catch (err) {
    throw new CheckpointError(path, `${field}: ${(err as Error).message}`);
  }
  return config as ModelConfig;
}

/**
 * Decode a native checkpoint read from `path`: the container is validated by the safetensors
 * reader, the format is checked, older versions are upgraded (with a note), `model_config` is
 * parsed and validated. The caller checks the weights against the config (`validateWeights`).
 */
export function decodeNative(bytes: Uint8Array, path: string): NativeContents {
  const { tensors, metadata } = decodeSafetensors(bytes, path);
  if (metadata.format !== CHECKPOINT_FORMAT) {
    throw new CheckpointError(
      path,
      `__metadata__.format is ${JSON.stringify(metadata.format)}, expected "${CHECKPOINT_FORMAT}" ` +
        `(not a falcon checkpoint${
          metadata.format === "pt" ? "; an hf export is read as its directory" : ""
        })`,
    );
  }
  const { version, notes } = upgradeNative(path, metadata, tensors);
  // after the version check: a file from a newer falcon is refused as such
  const digest = asCheckpointError(path, () => verifyContentDigest(bytes, path));
  delete metadata[DIGEST_KEY]; // it describes these bytes only; a writer computes its own
  const config = parseModelConfigField(path, metadata.model_config, "__metadata__.model_config");
  const weights = new Map<string, RawTensor>();
  const optimizer = new Map<string, RawTensor>();
  for (const [name, t] of tensors) {
    if (OPTIMIZER_PREFIXES.some((p) => name.startsWith(p))) optimizer.set(name, t);
    else weights.set(name, t);
  }
  return { config, weights, optimizer, metadata, version, notes, digest };
}

/** Metadata keys the native writer puts first, in its order. */
const METADATA_ORDER = [
  "format",
  "format_version",
  "step",
  "rng_state",
  "model_config",
  "task_config",
  "train_config",
];

/**
 * Encode a native checkpoint in the layout of `src/checkpoint/checkpoint.ts`: parameters in
 * `parameterSpecs` order, then `optimizer.m.*` and `optimizer.v.*` in the same order; metadata in
 * the writer's key order (any other keys after), `format` and `format_version` set to current,
 * and a fresh content digest (any digest in `metadata` is dropped).
 */
export function encodeNative(
  config: ModelConfig,
  weights: ReadonlyMap<string, RawTensor>,
  optimizer: ReadonlyMap<string, RawTensor>,
  metadata: Readonly<Record<string, string>>,
): Uint8Array {
  const names = parameterSpecs(config).map((s) => s.name);
  const entries: [string, RawTensor][] = [];
  for (const name of names) {
    const t = weights.get(name);
    if (!t) throw new RangeError(`no weight for parameter ${name}`);
    entries.push([name, t]);
  }
  for (const prefix of OPTIMIZER_PREFIXES) {
    for (const name of names) {
      const t = optimizer.get(prefix + name);
      if (t) entries.push([prefix + name, t]);
    }
  }
  const known = new Set(entries.map(([n]) => n));
  for (const name of optimizer.keys()) {
    if (!known.has(name)) throw new RangeError(`optimizer tensor ${name} belongs to no parameter`);
  }
  const { [DIGEST_KEY]: _stale, ...carried } = metadata;
  const meta: Record<string, string> = {
    ...carried,
    format: CHECKPOINT_FORMAT,
    format_version: String(CHECKPOINT_FORMAT_VERSION),
  };
  const ordered: Record<string, string> = {};
  for (const key of METADATA_ORDER) if (key in meta) ordered[key] = meta[key];
  for (const [key, value] of Object.entries(meta)) if (!(key in ordered)) ordered[key] = value;
  return withContentDigest(encodeSafetensors(entries, ordered));
}

/** Check the optimizer tensors: each belongs to a parameter and has its shape. */
export function validateOptimizer(
  path: string,
  weights: ReadonlyMap<string, RawTensor>,
  optimizer: ReadonlyMap<string, RawTensor>,
): void {
  for (const [name, t] of optimizer) {
    const prefix = OPTIMIZER_PREFIXES.find((p) => name.startsWith(p))!;
    const param = weights.get(name.slice(prefix.length));
    if (!param) throw new CheckpointError(path, `optimizer tensor ${name} belongs to no parameter`);
    if (param.shape.length !== t.shape.length || param.shape.some((d, i) => d !== t.shape[i])) {
      throw new CheckpointError(
        path,
        `optimizer tensor ${name} has shape [${t.shape}], its parameter has [${param.shape}]`,
      );
    }
  }
}
