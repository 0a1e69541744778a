/**
 * Test helpers: small native checkpoints written by the real checkpoint writer from seeded models
 * (deterministic bytes).
 *
 * @module
 */

import { type CheckpointState, encodeCheckpoint, type FloatTensor } from "../checkpoint/checkpoint.ts";
import { readSafetensors, writeSafetensors } from "../checkpoint/safetensors.ts";
import { modelConfig } from "../model/config.ts";
import { createModel } from "../model/falcon_lm.ts";
import type { ModelConfig } from "../model/types.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { additionConfig } from "../tasks/addition.ts";

/** A tiny model configuration (2 heads, 2 layers) with overrides. */
export function tinyConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  return modelConfig({ vocabSize: 14, dModel: 8, heads: 2, layers: 2, ffnHidden: 16, ...overrides });
}

/** Options of {@linkcode tinyCheckpointState}. */
export interface TinyCheckpointOptions {
  /** Parameter dtype (`f64` as the reference backend trains, `f32` as the fast backends). */
  readonly dtype?: "f32" | "f64";
  /** Include AdamW moments. */
  readonly optimizer?: boolean;
  /** Model seed. */
  readonly seed?: number;
}

/** The state of a freshly initialised, seeded model with `config` (deterministic). */
export async function tinyCheckpointState(
  config: ModelConfig,
  options: TinyCheckpointOptions = {},
): Promise<CheckpointState> {
  const model = createModel(createRefBackend(), config, options.seed ?? 7);
  const params: Record<string, FloatTensor> = {};
  const adamM: Record<string, FloatTensor> = {};
  const adamV: Record<string, FloatTensor> = {};
  for (const p of model.parameters()) {
    const values = await model.backend.read(p.value);
    const data = options.dtype === "f32" ? Float32Array.from(values) : Float64Array.from(values);
    params[p.name] = { shape: p.value.shape, data };
    if (options.optimizer) {
      adamM[p.name] = { shape: p.value.shape, data: data.map((x) => x * 0.01) };
      adamV[p.name] = { shape: p.value.shape, data: data.map((x) => x * x * 1e-4) };
    }
  }
  return {
    step: options.optimizer ? 12 : 0,
    rngState: 123456789,
    model: config,
    task: additionConfig({ maxDigits: 3 }),
    train: { lr: 0.003, steps: 12 },
    params,
    adamM,
    adamV,
  };
}

/** The bytes of {@linkcode tinyCheckpointState} as the native checkpoint writer encodes it. */
export async function tinyCheckpointBytes(
  config: ModelConfig = tinyConfig(),
  options: TinyCheckpointOptions = {},
): Promise<Uint8Array> {
  return encodeCheckpoint(await tinyCheckpointState(config, options));
}

/**
 * A Transformer checkpoint as format version 1 wrote it: `format_version` 1, the config it was
 * built from (the defaults `shortConv: true, qkNorm: "rms"`, which version 1 ignored for the
 * Transformer) and the tensors of the plain model version 1 ran (no convolutions). Also returns
 * the state of that plain model (`shortConv: false, qkNorm: "none"`).
 */
export async function versionOneTransformer(
  overrides: Partial<ModelConfig> = {},
): Promise<{ bytes: Uint8Array; plain: CheckpointState }> {
  const plain = await tinyCheckpointState(
    tinyConfig({ mixer: "transformer", ...overrides, shortConv: false, qkNorm: "none" }),
    { dtype: "f32", optimizer: true },
  );
  const asWritten = { ...plain, model: { ...plain.model, shortConv: true, qkNorm: "rms" as const } };
  // version 1 stored no content digest
  const { tensors, metadata: { content_digest: _, ...metadata } } = readSafetensors(
    encodeCheckpoint(asWritten),
    "v2",
  );
  return { bytes: writeSafetensors(tensors, { ...metadata, format_version: "1" }), plain };
}

/** Names of the entries of a directory, sorted. */
export async function listDir(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  return names.sort();
}
