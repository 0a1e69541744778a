/**
 * `config.json` of an `hf` export: every {@linkcode ModelConfig} field under a flash-linear-attention
 * style name, the constants the model uses that are not in `ModelConfig` (norm and rule epsilons,
 * Mamba-2 `A`, RetNet decays), the tensor dtype, and the native checkpoint's other metadata
 * (task and train config) verbatim, so `native -> hf -> native` loses nothing.
 *
 * @module
 */

import { headDim, validateModelConfig } from "../model/config.ts";
import { SHORT_CONV_WIDTH } from "../model/params.ts";
import type { ModelConfig } from "../model/types.ts";
import { retnetDecay } from "../rules/config.ts";
import { modelConfigAsTrained } from "../checkpoint/format_upgrade.ts";
import type { WeightDtype } from "./dtype.ts";
import { CheckpointError } from "./errors.ts";

/** `model_type` of an hf export. */
export const HF_MODEL_TYPE = "falcon_fast_weight";

/**
 * Version of the hf export layout (`falcon_format_version` in `config.json`) this code writes.
 * Version 2: the Transformer honours `use_short_conv` and `qk_norm` (its `{q,k,v}_conv1d` tensors
 * exist with `use_short_conv`). Version 1 exports still load: their Transformer ran plain, so it is
 * read with `use_short_conv` false and `qk_norm` `none`, as the native format's version 1.
 */
export const HF_FORMAT_VERSION = 2;

/** The oldest hf layout version {@linkcode parseHfConfig} reads. */
export const OLDEST_HF_FORMAT_VERSION = 1;

/** Constants of the model that `ModelConfig` does not hold; an hf export states them for PyTorch. */
export interface ModelConstants {
  /** RMSNorm epsilon of attn_norm, mlp_norm, o_norm and the final norm. */
  readonly normEps: number;
  /** Scale-coupled ridge of the Falcon rules. */
  readonly coupling: boolean;
  /** Step-denominator stabiliser. */
  readonly eps: number;
  /** Positive-decay floor. */
  readonly epsGamma: number;
  /** QK-RMSNorm stabiliser. */
  readonly epsRms: number;
  /** Mamba-2 `A_h` (the same for every head). */
  readonly mambaA: number;
}

/** The constants the TypeScript model uses (SPEC defaults). */
export const MODEL_CONSTANTS: ModelConstants = {
  normEps: 1e-6,
  coupling: true,
  eps: 1e-6,
  epsGamma: 1e-3,
  epsRms: 1e-6,
  mambaA: 1,
};

/** `ModelConfig` field to `config.json` key. */
const KEYS: Readonly<Record<keyof ModelConfig, string>> = {
  vocabSize: "vocab_size",
  dModel: "hidden_size",
  layers: "num_hidden_layers",
  heads: "num_heads",
  ffnHidden: "intermediate_size",
  mixer: "rule",
  alignment: "alignment",
  qkNorm: "qk_norm",
  shortConv: "use_short_conv",
  outputGate: "use_output_gate",
  parameterisation: "parameterisation",
  betaMax: "beta_max",
  window: "window",
  chunkSize: "chunk_size",
  tieEmbeddings: "tie_word_embeddings",
  ropeBase: "rope_theta",
};

const CONSTANT_KEYS: Readonly<Record<keyof ModelConstants, string>> = {
  normEps: "norm_eps",
  coupling: "coupling",
  eps: "eps",
  epsGamma: "eps_gamma",
  epsRms: "eps_rms",
  mambaA: "mamba_A",
};

/** `torch_dtype` of each weight dtype. */
export const TORCH_DTYPE: Readonly<Record<WeightDtype, string>> = {
  f64: "float64",
  f32: "float32",
  f16: "float16",
  bf16: "bfloat16",
};

/** Build `config.json` for `config`, tensors of `dtype`, and the native checkpoint's other metadata. */
export function toHfConfig(
  config: ModelConfig,
  dtype: WeightDtype,
  nativeMetadata: Readonly<Record<string, string>>,
): Record<string, unknown> {
  const json: Record<string, unknown> = {
    model_type: HF_MODEL_TYPE,
    architectures: ["FalconForCausalLM"],
    falcon_format_version: HF_FORMAT_VERSION,
    torch_dtype: TORCH_DTYPE[dtype],
    head_dim: headDim(config),
    conv_size: SHORT_CONV_WIDTH,
    attn_mode: "recurrent",
  };
  for (const [field, key] of Object.entries(KEYS)) json[key] = config[field as keyof ModelConfig];
  for (const [field, key] of Object.entries(CONSTANT_KEYS)) {
    json[key] = MODEL_CONSTANTS[field as keyof ModelConstants];
  }
  json.retnet_decay = Array.from({ length: config.heads }, (_, h) => retnetDecay(h));
  json.falcon_metadata = { ...nativeMetadata };
  return json;
}

/** What an hf `config.json` says. */
export interface ParsedHfConfig {
  /** The validated model configuration. */
  readonly config: ModelConfig;
  /** The tensor dtype it declares. */
  readonly dtype: WeightDtype;
  /** The native checkpoint metadata it carried (`falcon_metadata`), verbatim. */
  readonly nativeMetadata: Record<string, string>;
  /** The layout version it declares (`falcon_format_version`, before any upgrade). */
  readonly version: number;
  /** One line per upgrade applied on load (a version-1 Transformer read as plain). */
  readonly notes: string[];
}

/**
 * Parse and validate `config.json` text from `path`. Throws a {@linkcode CheckpointError} naming
 * the field for anything missing, mistyped, out of range, or a constant the TypeScript model does
 * not use (it could not compute the same function).
 */
export function parseHfConfig(text: string, path: string): ParsedHfConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(path, `not JSON (${(err as Error).message})`);
  }
  if (!json || typeof json !== "object" || Array.isArray(json)) {
    throw new CheckpointError(path, "not a JSON object");
  }
  const obj = json as Record<string, unknown>;
  if (obj.model_type !== HF_MODEL_TYPE) {
    throw new CheckpointError(
      path,
      `model_type is ${JSON.stringify(obj.model_type)}, expected "${HF_MODEL_TYPE}"`,
    );
  }
  const version = obj.falcon_format_version;
  if (
    typeof version !== "number" || !Number.isInteger(version) || version < OLDEST_HF_FORMAT_VERSION ||
    version > HF_FORMAT_VERSION
  ) {
    throw new CheckpointError(
      path,
      `falcon_format_version ${
        JSON.stringify(version)
      } is not supported (expected ${OLDEST_HF_FORMAT_VERSION} ` +
        `to ${HF_FORMAT_VERSION})`,
    );
  }
  const given: Record<string, unknown> = {};
  for (const [field, key] of Object.entries(KEYS)) {
    if (!(key in obj)) throw new CheckpointError(path, `missing field ${key}`);
    given[field] = obj[key];
  }
  // a version-1 Transformer ran plain whatever use_short_conv and qk_norm said
  const fields = modelConfigAsTrained(given, version);
  const notes = fields === given ? [] : [
    `upgraded hf layout version 1 to version 2: a version-1 Transformer ran without short convolution ` +
    `and QK norm, so it is read with use_short_conv false, qk_norm "none"`,
  ];
  const config = fields as unknown as ModelConfig;
  try {
    validateModelConfig(config);
  } catch (err) {
    const message = (err as Error).message;
    const field = Object.entries(KEYS).find(([f]) => message.includes(f));
    throw new CheckpointError(path, `${field ? `field ${field[1]}: ` : ""}${message}`);
  }
  for (const [field, key] of Object.entries(CONSTANT_KEYS)) {
    const want = MODEL_CONSTANTS[field as keyof ModelConstants];
    if (key in obj && obj[key] !== want) {
      throw new CheckpointError(
        path,
        `field ${key} is ${
          JSON.stringify(obj[key])
        }; the TypeScript model uses ${want} and cannot load other values`,
      );
    }
  }
  const dtypeEntry = Object.entries(TORCH_DTYPE).find(([, t]) => t === obj.torch_dtype);
  if (!dtypeEntry) {
    throw new CheckpointError(
      path,
      `field torch_dtype ${JSON.stringify(obj.torch_dtype)} is not float64, float32, float16 or bfloat16`,
    );
  }
  const meta = obj.falcon_metadata ?? {};
  if (!meta || typeof meta !== "object" || Array.isArray(meta)) {
    throw new CheckpointError(path, "field falcon_metadata must be an object of strings");
  }
  const nativeMetadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(meta)) {
    if (typeof v !== "string") throw new CheckpointError(path, `field falcon_metadata.${k} must be a string`);
    nativeMetadata[k] = v;
  }
  // copy field by field: no key of the file reaches the config object but the known ones
  const clean = Object.fromEntries(Object.keys(KEYS).map((f) => [f, fields[f]])) as unknown as ModelConfig;
  return { config: clean, dtype: dtypeEntry[0] as WeightDtype, nativeMetadata, version, notes };
}
