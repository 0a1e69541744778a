/**
 * Model configuration: defaults and validation of {@linkcode ModelConfig} (SPEC section 7).
 *
 * @module
 */

import { ALIGNMENTS, QK_NORMS, RULES } from "../rules/config.ts";
import type { MixerName, ModelConfig } from "./types.ts";

/** Every mixer a block can use: the eleven fast-weight rules and the Transformer baseline. */
export const MIXERS: readonly MixerName[] = [...RULES, "transformer"];

/** Default hidden width of the SwiGLU MLP: `8/3 * dModel` rounded up to a multiple of 8. */
export function defaultFfnHidden(dModel: number): number {
  return Math.ceil((8 * dModel) / 3 / 8) * 8;
}

/**
 * A complete, validated {@linkcode ModelConfig}: SPEC defaults for everything not overridden.
 *
 * Defaults: vocabSize 256, dModel 128, layers 2, heads 4, ffnHidden `defaultFfnHidden(dModel)`,
 * mixer falcon1, alignment prefix, qkNorm rms (l2 for deltanet and gated_deltanet), shortConv on
 * (every mixer, the Transformer included: the plain Transformer is `shortConv: false, qkNorm: "none"`),
 * outputGate on, parameterisation token, betaMax 2, window 4, chunkSize 64, tied embeddings,
 * ropeBase 10000.
 *
 * @example
 * ```ts
 * import { modelConfig } from "./config.ts";
 * const config = modelConfig({ mixer: "deltanet", dModel: 64 });
 * if (config.qkNorm !== "l2" || config.ffnHidden !== 176) throw new Error("unexpected defaults");
 * ```
 */
export function modelConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  const mixer = overrides.mixer ?? "falcon1";
  const dModel = overrides.dModel ?? 128;
  const config: ModelConfig = {
    vocabSize: 256,
    dModel,
    layers: 2,
    heads: 4,
    ffnHidden: defaultFfnHidden(dModel),
    mixer,
    alignment: "prefix",
    qkNorm: mixer === "deltanet" || mixer === "gated_deltanet" ? "l2" : "rms",
    shortConv: true,
    outputGate: true,
    parameterisation: "token",
    betaMax: 2,
    window: 4,
    chunkSize: 64,
    tieEmbeddings: true,
    ropeBase: 10000,
    ...overrides,
  };
  validateModelConfig(config);
  return config;
}

function positiveInt(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${name} must be an integer >= 1, got ${value}`);
  }
}

function oneOf(name: string, value: unknown, allowed: readonly unknown[]): void {
  if (!allowed.includes(value)) {
    throw new RangeError(`unknown ${name} "${value}"; expected one of ${allowed.join(", ")}`);
  }
}

/** Throw a RangeError naming the first invalid field of `config` (e.g. a config read from a checkpoint). */
export function validateModelConfig(config: ModelConfig): void {
  for (const key of ["vocabSize", "dModel", "layers", "heads", "ffnHidden", "window", "chunkSize"] as const) {
    positiveInt(key, config[key]);
  }
  oneOf("mixer", config.mixer, MIXERS);
  oneOf("alignment", config.alignment, ALIGNMENTS);
  oneOf("qkNorm", config.qkNorm, QK_NORMS);
  oneOf("parameterisation", config.parameterisation, ["token", "const"]);
  for (const key of ["shortConv", "outputGate", "tieEmbeddings"] as const) {
    if (typeof config[key] !== "boolean") throw new TypeError(`${key} must be a boolean, got ${config[key]}`);
  }
  if (config.dModel % config.heads !== 0) {
    throw new RangeError(`dModel ${config.dModel} is not divisible by heads ${config.heads}`);
  }
  if (config.mixer === "transformer" && config.qkNorm === "l2") {
    throw new RangeError(
      `the transformer takes qkNorm "rms" or "none", got "l2" (unit-norm q and k would bound its ` +
        `attention logits by 1/sqrt(head size))`,
    );
  }
  if (config.mixer === "transformer" && headDim(config) % 2 !== 0) {
    throw new RangeError(
      `the transformer needs an even head size for RoPE, got dModel/heads = ${headDim(config)}`,
    );
  }
  if (!(config.betaMax > 0 && Number.isFinite(config.betaMax))) {
    throw new RangeError(`betaMax must be a finite number > 0, got ${config.betaMax}`);
  }
  if (!(config.ropeBase > 1 && Number.isFinite(config.ropeBase))) {
    throw new RangeError(`ropeBase must be a finite number > 1, got ${config.ropeBase}`);
  }
}

/** Head size `d_k = d_v = dModel / heads`. */
export function headDim(config: ModelConfig): number {
  return config.dModel / config.heads;
}
