/**
 * The rule catalog: every fast-weight rule stated once (SPEC sections 3 and 6). `RULES`, the rule
 * predicates, the WASM rule ids (generated into `assembly/fw_rules.ts` by `scripts/build_wasm.ts`),
 * the model's coefficient streams and every backend's per-rule switch derive from this table.
 *
 * A rule's chunk-kernel family names the files that implement its chunk form in every backend
 * ({@linkcode FAMILY_FILES}; `docs/adding-a-rule.md` lists every file a new rule touches).
 *
 * @module
 */

/**
 * Chunk-kernel family of a rule (one file per family in every backend): `additive` (scalar
 * coefficients, `a = 0`, no solve), `delta` (scalar coefficients, `a != 0`: the `(I + A)^-1`
 * solve), `per-column` (Falcon-2/2A: one sub-problem per value column) or `window` (Falcon-3/3A:
 * `B_t` pairs per step).
 */
export type RuleFamily = "additive" | "delta" | "per-column" | "window";

/** Every family. */
export const RULE_FAMILIES: readonly RuleFamily[] = ["additive", "delta", "per-column", "window"];

/** The files of one family's chunk form in each backend (paths from the repository root). */
export interface FamilyFiles {
  /** The float64 reference (`src/rules/reference/`). */
  readonly reference: readonly string[];
  /** The WASM kernels (`assembly/`, AssemblyScript). */
  readonly wasm: readonly string[];
  /** The WebGPU kernels (`wgpu/shaders/`, WGSL). */
  readonly webgpu: readonly string[];
}

/**
 * Where each family's chunk form lives: catalog -> family -> file in one step. The reference splits
 * by write only (its per-column and window forms are the additive and delta chunks over pair
 * instances); WASM's additive and delta families share one segment kernel that skips the solve when
 * `a = 0`; WebGPU runs falcon3a (window, additive write) through the additive passes with `B_t`
 * pairs per step. The recurrent forms are one file per backend for every rule
 * (`reference/recurrent.ts`, `assembly/fw_recurrent.ts` and `fw_window.ts`,
 * `wgpu/shaders/fast_weight_recurrent.ts`), the per-step coefficients one function per backend
 * (`reference/coefficients.ts`, `assembly/fw_common.ts` `coefs()`, `wgpu/shaders/fast_weight_coef.ts`).
 */
export const FAMILY_FILES: Record<RuleFamily, FamilyFiles> = {
  additive: {
    reference: ["src/rules/reference/chunk_additive.ts"],
    wasm: ["assembly/fw_chunk_additive_delta.ts"],
    webgpu: ["wgpu/shaders/fast_weight_chunk_additive.ts"],
  },
  delta: {
    reference: ["src/rules/reference/chunk_delta.ts"],
    wasm: ["assembly/fw_chunk_additive_delta.ts"],
    webgpu: ["wgpu/shaders/fast_weight_chunk_delta.ts"],
  },
  "per-column": {
    reference: ["src/rules/reference/chunk_additive.ts", "src/rules/reference/chunk_delta.ts"],
    wasm: ["assembly/fw_chunk_per_column.ts"],
    webgpu: ["wgpu/shaders/fast_weight_chunk_per_column.ts"],
  },
  window: {
    reference: ["src/rules/reference/chunk_additive.ts", "src/rules/reference/chunk_delta.ts"],
    wasm: ["assembly/fw_chunk_window_additive.ts", "assembly/fw_chunk_window_delta.ts"],
    webgpu: ["wgpu/shaders/fast_weight_chunk_additive.ts", "wgpu/shaders/fast_weight_chunk_window_delta.ts"],
  },
};

/**
 * Write statistic of a rule's step size (SPEC section 3): `E` (`||x_t||^2`), `Ebar` (the window
 * average of `E`), `mu` (the top eigenvalue of the window's Gram matrix over `B_t`), or `none`
 * (baselines: no normalised step).
 */
export type WriteStatistic = "E" | "Ebar" | "mu" | "none";

/** Coefficient shape: one `gamma, a, b` per step (`scalar`) or one per value column (`per-column`). */
export type CoefficientShape = "scalar" | "per-column";

/** How a rule writes: `additive` (`a = 0`: the state gains `x (b y)^T`) or `delta` (the residual). */
export type WriteKind = "additive" | "delta";

/**
 * What the model's mixer feeds into a kernel slot (SPEC section 7; `src/model/coefficients.ts`):
 * `step-gate` (`betaMax * sigmoid(z)`, Falcon's `beta`), `unit-gate` (`sigmoid(z)`, the
 * deltanets' `b`), `dt` (`softplus(z)` with a bias, Mamba-2's `dt`), `ridge` (`softplus(z)` with
 * a bias: Falcon's `lambdabar`, gated_deltanet's `-log a`), or `none` (the slot is unused: zeros).
 */
export type StreamKind = "step-gate" | "unit-gate" | "dt" | "ridge" | "none";

/** The q/k normalisations (SPEC section 1), repeated from `config.ts` to keep this file a leaf. */
export type QkNormName = "rms" | "l2" | "none";

/** One rule, stated once. */
export interface RuleEntry {
  /** One line for a newcomer: what the rule is, with its SPEC section. */
  readonly summary: string;
  /** Chunk-kernel family (names the files in every backend). */
  readonly family: RuleFamily;
  /** Additive write (`a = 0`) or delta write (residual correction). */
  readonly write: WriteKind;
  /** Coefficient shape; `per-column` rules take `beta` of shape `[B, T, H, Dv]`. */
  readonly coefficients: CoefficientShape;
  /** Whether the rule writes a sliding window of `B_t` pairs per step. */
  readonly window: boolean;
  /** Statistic of the normalised step size; `none` for the baselines. */
  readonly statistic: WriteStatistic;
  /** The SPEC default of `RuleConfig.qkNorm`. */
  readonly defaultQkNorm: QkNormName;
  /** The model's `beta` slot stream. */
  readonly betaStream: StreamKind;
  /** The model's `lambdabar` slot stream. */
  readonly lambdaStream: StreamKind;
}

/**
 * The catalog, in the order of the WASM rule ids (falcon1 = 0 ... gated_deltanet = 10). Add a rule
 * here first; the type checker then lists every per-rule table that lacks it.
 */
export const CATALOG = {
  falcon1: {
    summary: "Falcon-1, scalar NLMS (SPEC 3, regression family)",
    family: "delta",
    write: "delta",
    coefficients: "scalar",
    window: false,
    statistic: "E",
    defaultQkNorm: "rms",
    betaStream: "step-gate",
    lambdaStream: "ridge",
  },
  falcon2: {
    summary: "Falcon-2, per-column NLMS (SPEC 3, regression family)",
    family: "per-column",
    write: "delta",
    coefficients: "per-column",
    window: false,
    statistic: "E",
    defaultQkNorm: "rms",
    betaStream: "step-gate",
    lambdaStream: "ridge",
  },
  falcon3: {
    summary: "Falcon-3, sliding-window NLMS with the top-eigenvalue step (SPEC 3, regression family)",
    family: "window",
    write: "delta",
    coefficients: "scalar",
    window: true,
    statistic: "mu",
    defaultQkNorm: "rms",
    betaStream: "step-gate",
    lambdaStream: "ridge",
  },
  falcon1a: {
    summary: "Falcon-1A, scalar normalised additive write (SPEC 3, inner-product family)",
    family: "additive",
    write: "additive",
    coefficients: "scalar",
    window: false,
    statistic: "E",
    defaultQkNorm: "rms",
    betaStream: "step-gate",
    lambdaStream: "ridge",
  },
  falcon2a: {
    summary: "Falcon-2A, per-column normalised additive write (SPEC 3, inner-product family)",
    family: "per-column",
    write: "additive",
    coefficients: "per-column",
    window: false,
    statistic: "E",
    defaultQkNorm: "rms",
    betaStream: "step-gate",
    lambdaStream: "ridge",
  },
  falcon3a: {
    summary: "Falcon-3A, sliding-window additive write with the window-average step (SPEC 3)",
    family: "window",
    write: "additive",
    coefficients: "scalar",
    window: true,
    statistic: "Ebar",
    defaultQkNorm: "rms",
    betaStream: "step-gate",
    lambdaStream: "ridge",
  },
  linear: {
    summary: "linear attention, S_t = S_{t-1} + x v^T (SPEC 6)",
    family: "additive",
    write: "additive",
    coefficients: "scalar",
    window: false,
    statistic: "none",
    defaultQkNorm: "rms",
    betaStream: "none",
    lambdaStream: "none",
  },
  retnet: {
    summary: "RetNet, fixed per-head decay g_h = 1 - 2^(-5-h) (SPEC 6)",
    family: "additive",
    write: "additive",
    coefficients: "scalar",
    window: false,
    statistic: "none",
    defaultQkNorm: "rms",
    betaStream: "none",
    lambdaStream: "none",
  },
  mamba2: {
    summary: "Mamba-2 (SSD), decay exp(-dt A_h) and write dt (SPEC 6)",
    family: "additive",
    write: "additive",
    coefficients: "scalar",
    window: false,
    statistic: "none",
    defaultQkNorm: "rms",
    betaStream: "dt",
    lambdaStream: "none",
  },
  deltanet: {
    summary: "DeltaNet, the delta rule with gain b (SPEC 6)",
    family: "delta",
    write: "delta",
    coefficients: "scalar",
    window: false,
    statistic: "none",
    defaultQkNorm: "l2",
    betaStream: "unit-gate",
    lambdaStream: "none",
  },
  gated_deltanet: {
    summary: "Gated DeltaNet, the delta rule with decay a = exp(-lambdabar) (SPEC 6)",
    family: "delta",
    write: "delta",
    coefficients: "scalar",
    window: false,
    statistic: "none",
    defaultQkNorm: "l2",
    betaStream: "unit-gate",
    lambdaStream: "ridge",
  },
} as const satisfies Record<string, RuleEntry>;

/** A fast-weight rule name (SPEC sections 3 and 6): a key of {@linkcode CATALOG}. */
export type RuleName = keyof typeof CATALOG;

/** The Falcon rules: those with a write statistic (a normalised step size). */
export type FalconRuleName = {
  [K in RuleName]: typeof CATALOG[K]["statistic"] extends "none" ? never : K;
}[RuleName];

/** The SPEC section 6 baselines: the rules without a write statistic. */
export type BaselineRuleName = Exclude<RuleName, FalconRuleName>;

/** Every fast-weight rule, in catalog order (the six Falcon rules, then the SPEC section 6 baselines). */
export const RULES: readonly RuleName[] = Object.keys(CATALOG) as RuleName[];

/** An unknown rule name at a boundary (config, vector file, WASM call, shader build). */
export class UnknownRuleError extends RangeError {
  /** Always `UnknownRuleError`. */
  override name = "UnknownRuleError";
  /**
   * An error naming `value` and where it was received, listing the catalog's rules.
   *
   * @param value the name that is not in the catalog
   * @param where the field or call that received it (e.g. `rule`, `--rules`, `vector.rule`)
   */
  constructor(value: unknown, where = "rule") {
    super(`unknown ${where} ${JSON.stringify(value)}; expected one of ${RULES.join(", ")}`);
  }
}

/** Whether `value` names a rule of the catalog. */
export function isRuleName(value: unknown): value is RuleName {
  return typeof value === "string" && Object.hasOwn(CATALOG, value);
}

/** `value` as a rule name; throws {@linkcode UnknownRuleError} naming `where` otherwise. */
export function ruleName(value: unknown, where = "rule"): RuleName {
  if (!isRuleName(value)) throw new UnknownRuleError(value, where);
  return value;
}

/** The catalog entry of `rule`; throws {@linkcode UnknownRuleError} for a name outside the catalog. */
export function ruleEntry(rule: RuleName): RuleEntry {
  if (!isRuleName(rule)) throw new UnknownRuleError(rule);
  return CATALOG[rule];
}

/** The chunk-kernel family of `rule`. */
export function ruleFamily(rule: RuleName): RuleFamily {
  return ruleEntry(rule).family;
}

/** The rules of `family`, in catalog order. */
export function rulesOfFamily(family: RuleFamily): RuleName[] {
  return RULES.filter((rule) => CATALOG[rule].family === family);
}

/** WASM rule id of `rule`: its index in {@linkcode RULES} (the ids of `assembly/fw_rules.ts`). */
export function wasmRuleId(rule: RuleName): number {
  ruleEntry(rule);
  return RULES.indexOf(rule);
}

/** Rules with a per-value-column `beta` of shape `[B, T, H, Dv]` (Falcon-2 and Falcon-2A). */
export function isPerColumnRule(rule: RuleName): boolean {
  return ruleEntry(rule).coefficients === "per-column";
}

/** Rules with a sliding window of `B` pairs (Falcon-3 and Falcon-3A). */
export function isWindowRule(rule: RuleName): boolean {
  return ruleEntry(rule).window;
}

/** Rules of the Falcon family: a normalised step size over a write statistic, the clamp, the coupled ridge. */
export function isFalconRule(rule: RuleName): rule is FalconRuleName {
  return ruleEntry(rule).statistic !== "none";
}

/** Rules whose write corrects by the current prediction (`a != 0`: Falcon-1/2/3, the deltanets). */
export function isDeltaRule(rule: RuleName): boolean {
  return ruleEntry(rule).write === "delta";
}

/** The write statistic of `rule`'s step size (`none` for the baselines). */
export function writeStatistic(rule: RuleName): WriteStatistic {
  return ruleEntry(rule).statistic;
}

/**
 * The catalog as plain JSON rows (one per rule, with its WASM id), for tools outside TypeScript
 * (the Python bridge checks its copies against this).
 */
export function catalogTable(): Array<RuleEntry & { rule: RuleName; id: number }> {
  return RULES.map((rule, id) => ({ rule, id, ...CATALOG[rule] }));
}
