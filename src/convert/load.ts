/**
 * Detect a checkpoint's format and load it into one shape, whatever it is: a file is a native
 * checkpoint, a directory an hf export (`config.json` + `model.safetensors`). Everything read is
 * validated; nothing in a file is evaluated as code.
 *
 * @module
 */

import type { DigestStatus } from "../checkpoint/digest.ts";
import type { ModelConfig } from "../model/types.ts";
import { CheckpointError } from "./errors.ts";
import { decodeHf, HF_FILES, hfName } from "./hf_export.ts";
import { hfPlacement, hfShape } from "./hf_layout.ts";
import { decodeNative, parseModelConfigField } from "./native_format.ts";
import type { RawTensor } from "./tensor_set.ts";

/** The two checkpoint formats. */
export const FORMATS = ["native", "hf"] as const;

/** `native` (one safetensors file) or `hf` (a directory). */
export type CheckpointFormat = typeof FORMATS[number];

/** Largest `config.json` read (a config is a few kB; this bounds memory on a hostile file). */
export const MAX_CONFIG_BYTES = 10_000_000;

/** A loaded checkpoint of either format, in native names and layouts. */
export interface LoadedCheckpoint {
  /** Where it came from. */
  readonly format: CheckpointFormat;
  /** Format version the files declare (before any upgrade). */
  readonly version: number;
  /** The validated model configuration. */
  readonly config: ModelConfig;
  /** Parameters by native name. */
  readonly weights: Map<string, RawTensor>;
  /** Optimizer state by full native tensor name (empty for hf). */
  readonly optimizer: Map<string, RawTensor>;
  /** Native metadata strings other than `format` and `format_version` (step, configs, ...). */
  readonly metadata: Record<string, string>;
  /** Notes from loading (format upgrades). */
  readonly notes: string[];
  /** The native file's content digest (verified on load), or absent (older files, hf exports). */
  readonly digest: DigestStatus;
  /** The files read, with their sizes in bytes. */
  readonly files: { path: string; bytes: number }[];
  /** The file that holds the tensors (named in weight errors). */
  readonly weightsPath: string;
  /** The name a native parameter has in this format's files (for error messages). */
  readonly describe: (nativeName: string) => string;
  /** The shape a native parameter of native shape `shape` has in this format's files. */
  readonly fileShape: (nativeName: string, shape: readonly number[]) => number[];
}

/** Detect the format of `path`: a directory is `hf`, a file `native`. Throws a CheckpointError when it does not exist. */
export async function detectFormat(path: string): Promise<CheckpointFormat> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw new CheckpointError(path, "no such file or directory");
    throw new CheckpointError(path, `cannot read (${(err as Error).message})`);
  }
  return info.isDirectory ? "hf" : "native";
}

async function readBytes(path: string, limit?: number): Promise<Uint8Array> {
  try {
    if (limit !== undefined) {
      const size = (await Deno.stat(path)).size;
      if (size > limit) {
        throw new CheckpointError(path, `file is ${size} bytes, above the ${limit}-byte limit`);
      }
    }
    return await Deno.readFile(path);
  } catch (err) {
    if (err instanceof CheckpointError) throw err;
    if (err instanceof Deno.errors.NotFound) throw new CheckpointError(path, "no such file");
    throw new CheckpointError(path, `cannot read (${(err as Error).message})`);
  }
}

/** Deep equality of two model configurations over the fields of `a`. */
function sameConfig(a: ModelConfig, b: ModelConfig): boolean {
  const keys = Object.keys(a) as (keyof ModelConfig)[];
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

async function loadNative(path: string): Promise<LoadedCheckpoint> {
  const bytes = await readBytes(path);
  const native = decodeNative(bytes, path);
  const { format: _f, format_version: _v, ...metadata } = native.metadata;
  return {
    format: "native",
    version: native.version,
    config: native.config,
    weights: native.weights,
    optimizer: native.optimizer,
    metadata,
    notes: native.notes,
    digest: native.digest,
    files: [{ path, bytes: bytes.length }],
    weightsPath: path,
    describe: (n) => n,
    fileShape: (_, shape) => [...shape],
  };
}

async function loadHf(dir: string): Promise<LoadedCheckpoint> {
  const base = dir.replace(/\/+$/, "");
  const paths = { config: `${base}/${HF_FILES.config}`, weights: `${base}/${HF_FILES.weights}` };
  const configBytes = await readBytes(paths.config, MAX_CONFIG_BYTES);
  const weightBytes = await readBytes(paths.weights);
  let configText: string;
  try {
    configText = new TextDecoder("utf-8", { fatal: true }).decode(configBytes);
  } catch {
    throw new CheckpointError(paths.config, "not UTF-8 text");
  }
  const hf = decodeHf(configText, weightBytes, paths);
  const metadata = { ...hf.nativeMetadata };
  // the hf fields rule; the carried native model_config is kept verbatim only when it agrees
  const carried = metadata.model_config;
  let keep = false;
  if (carried !== undefined) {
    try {
      keep = sameConfig(
        hf.config,
        parseModelConfigField(paths.config, carried, "falcon_metadata.model_config"),
      );
    } catch {
      keep = false;
    }
  }
  if (!keep) metadata.model_config = JSON.stringify(hf.config);
  return {
    format: "hf",
    version: hf.version,
    config: hf.config,
    weights: hf.weights,
    optimizer: new Map(),
    metadata,
    notes: hf.notes,
    digest: { state: "absent" },
    files: [{ path: paths.config, bytes: configBytes.length }, {
      path: paths.weights,
      bytes: weightBytes.length,
    }],
    weightsPath: paths.weights,
    describe: hfName,
    fileShape: (name, shape) => {
      try {
        return hfShape(shape, hfPlacement(name).change);
      } catch {
        return [...shape];
      }
    },
  };
}

/** Load a checkpoint of either format (detected). Throws CheckpointError or SafetensorsError for bad input. */
export async function loadAnyCheckpoint(path: string): Promise<LoadedCheckpoint> {
  return (await detectFormat(path)) === "hf" ? await loadHf(path) : await loadNative(path);
}
