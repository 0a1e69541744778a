/**
 * The parameters of a {@linkcode ModelConfig}: stable names (they are checkpoint tensor names),
 * shapes, weight-decay flags and initialisers, in one fixed order.
 *
 * Every projection matrix is stored `[in, out]` and applied as `y = x W` (`x` `[B*T, in]`).
 * `D = dModel`, `H = heads`, `Dv = D / H`, `F = ffnHidden`, `V = vocabSize`, `i` the block index.
 *
 * | name | shape | present when |
 * |---|---|---|
 * | `embed` | `[V, D]` | always (also the LM head when tied) |
 * | `layers.{i}.attn_norm` | `[D]` | always (RMSNorm before the mixer) |
 * | `layers.{i}.mixer.q_proj`, `k_proj`, `v_proj` | `[D, D]` | always |
 * | `layers.{i}.mixer.q_conv`, `k_conv`, `v_conv` | `[D, 4]` | `shortConv` (every mixer, the Transformer's too) |
 * | `layers.{i}.mixer.beta_proj` | `[D, H]` (`[D, D]` for falcon2/2a) | rule uses beta, `token` |
 * | `layers.{i}.mixer.beta_bias` | `[H]` | mamba2, `token` |
 * | `layers.{i}.mixer.beta_const` | `[H]` (`[D]`, head-major, for falcon2/2a) | rule uses beta, `const` |
 * | `layers.{i}.mixer.lambda_proj`, `lambda_bias` | `[D, H]`, `[H]` | rule uses lambdabar, `token` |
 * | `layers.{i}.mixer.lambda_const` | `[H]` | rule uses lambdabar, `const` |
 * | `layers.{i}.mixer.o_norm` | `[Dv]` | fast-weight mixer (shared by the heads) |
 * | `layers.{i}.mixer.gate_proj` | `[D, D]` | fast-weight mixer with `outputGate` |
 * | `layers.{i}.mixer.out_proj` | `[D, D]` | always |
 * | `layers.{i}.mlp_norm` | `[D]` | always |
 * | `layers.{i}.mlp.gate_proj`, `up_proj` | `[D, F]` | always |
 * | `layers.{i}.mlp.down_proj` | `[F, D]` | always |
 * | `final_norm` | `[D]` | always |
 * | `lm_head` | `[D, V]` | `tieEmbeddings` false |
 *
 * The Transformer mixer has `q_proj`, `k_proj`, `v_proj`, the convolutions with `shortConv`, and
 * `out_proj` (RoPE attention, `attention_mixer.ts`). It honours `shortConv` and `qkNorm` (`rms`:
 * parameter-free RMS norm of q and k per head; `none`) like the fast-weight mixers; it has no output
 * norm and no gate, and the fields of the fast-weight rules (`outputGate`, `alignment`,
 * `parameterisation`, `betaMax`, `window`, `chunkSize`) do not change it. The plain Transformer
 * baseline is `shortConv: false, qkNorm: "none"`. Checkpoints of format version 1 ran every
 * Transformer plain whatever these two fields said; they load as plain (`checkpoint/format_upgrade.ts`).
 *
 * @module
 */

import { headDim } from "./config.ts";
import { coefficientPlan, type CoefficientStream } from "./coefficients.ts";
import type { ModelConfig } from "./types.ts";

/** Width of the causal depthwise short convolution (SPEC section 7). */
export const SHORT_CONV_WIDTH = 4;

/** How a parameter is initialised (drawn from its own seeded stream, see `init.ts`). */
export type ParamInit =
  | { readonly kind: "normal"; readonly std: number }
  | { readonly kind: "uniform"; readonly bound: number }
  | { readonly kind: "constant"; readonly value: number };

/** Name, shape, decay flag and initialiser of one parameter. */
export interface ParamSpec {
  /** Stable checkpoint name. */
  readonly name: string;
  /** Dimensions. */
  readonly shape: readonly number[];
  /** Whether AdamW applies weight decay (matrices yes; norms, biases and constants no). */
  readonly decay: boolean;
  /** Initialiser. */
  readonly init: ParamInit;
}

function matrix(name: string, rows: number, cols: number, gain = 1): ParamSpec {
  return { name, shape: [rows, cols], decay: true, init: { kind: "normal", std: gain / Math.sqrt(rows) } };
}

function vector(name: string, size: number, value: number): ParamSpec {
  return { name, shape: [size], decay: false, init: { kind: "constant", value } };
}

function streamSpecs(
  prefix: string,
  key: "beta" | "lambda",
  stream: CoefficientStream | null,
  config: ModelConfig,
): ParamSpec[] {
  if (!stream) return [];
  const width = stream.perColumn ? config.dModel : config.heads;
  if (config.parameterisation === "const") return [vector(`${prefix}.${key}_const`, width, stream.init)];
  const specs = [matrix(`${prefix}.${key}_proj`, config.dModel, width)];
  if (stream.bias) specs.push(vector(`${prefix}.${key}_bias`, width, stream.init));
  return specs;
}

/** `q_proj`, `k_proj`, `v_proj` and, with `shortConv`, `q_conv`, `k_conv`, `v_conv` (`qkv_projection.ts`). */
function qkvSpecs(config: ModelConfig, prefix: string): ParamSpec[] {
  const D = config.dModel;
  const specs = ["q_proj", "k_proj", "v_proj"].map((p) => matrix(`${prefix}.${p}`, D, D));
  if (config.shortConv) {
    for (const p of ["q_conv", "k_conv", "v_conv"]) {
      specs.push({
        name: `${prefix}.${p}`,
        shape: [D, SHORT_CONV_WIDTH],
        decay: true,
        init: { kind: "uniform", bound: 1 / Math.sqrt(SHORT_CONV_WIDTH) },
      });
    }
  }
  return specs;
}

function mixerSpecs(config: ModelConfig, prefix: string, residualGain: number): ParamSpec[] {
  const D = config.dModel;
  const specs = qkvSpecs(config, prefix);
  if (config.mixer === "transformer") return [...specs, matrix(`${prefix}.out_proj`, D, D, residualGain)];
  const plan = coefficientPlan(config.mixer, config.betaMax);
  specs.push(...streamSpecs(prefix, "beta", plan.beta, config));
  specs.push(...streamSpecs(prefix, "lambda", plan.lambda, config));
  specs.push(vector(`${prefix}.o_norm`, headDim(config), 1));
  if (config.outputGate) specs.push(matrix(`${prefix}.gate_proj`, D, D));
  specs.push(matrix(`${prefix}.out_proj`, D, D, residualGain));
  return specs;
}

/** Every parameter of a model with `config`, in the fixed order of {@linkcode LanguageModel.parameters}. */
export function parameterSpecs(config: ModelConfig): ParamSpec[] {
  const { dModel: D, ffnHidden: F, vocabSize: V } = config;
  // outputs that add into the residual stream are scaled by 1/sqrt(2 layers) (GPT-2)
  const residualGain = 1 / Math.sqrt(2 * config.layers);
  // embedding rows of RMS ~ 1/sqrt(D): tied logits of a normalised state start at unit scale
  const specs: ParamSpec[] = [{
    name: "embed",
    shape: [V, D],
    decay: true,
    init: { kind: "normal", std: 1 / Math.sqrt(D) },
  }];
  for (let i = 0; i < config.layers; i++) {
    const p = `layers.${i}`;
    specs.push(vector(`${p}.attn_norm`, D, 1));
    specs.push(...mixerSpecs(config, `${p}.mixer`, residualGain));
    specs.push(vector(`${p}.mlp_norm`, D, 1));
    specs.push(matrix(`${p}.mlp.gate_proj`, D, F), matrix(`${p}.mlp.up_proj`, D, F));
    specs.push(matrix(`${p}.mlp.down_proj`, F, D, residualGain));
  }
  specs.push(vector("final_norm", D, 1));
  if (!config.tieEmbeddings) specs.push(matrix("lm_head", D, V));
  return specs;
}

/** Number of trainable scalars of a model with `config` (a tied LM head counts once). */
export function parameterCount(config: ModelConfig): number {
  return parameterSpecs(config).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}
