/**
 * Rule names (from the catalog, `catalog.ts`), alignments and the per-call configuration of a
 * fast-weight rule (SPEC sections 1-3, 6).
 *
 * @module
 */

export * from "./catalog.ts";
import { ruleEntry, type RuleName } from "./catalog.ts";

/** Which pair is written at step t (SPEC section 2). */
export const ALIGNMENTS = ["prefix", "same-step"] as const;

/** `prefix`: write `(phi(k_{t-1}), v_t)`; `same-step`: write `(phi(k_t), v_t)`. */
export type Alignment = typeof ALIGNMENTS[number];

/** Normalisation of q and k before the feature map (SPEC section 1). */
export const QK_NORMS = ["rms", "l2", "none"] as const;

/** `rms` (default), `l2` (default for deltanet and gated_deltanet) or `none`. */
export type QkNorm = typeof QK_NORMS[number];

/** Default RMSNorm stabiliser `eps_rms` of the `rms` q/k normalisation (SPEC section 1). */
export const DEFAULT_EPS_RMS = 1e-6;

/** The three equivalent forms of SPEC section 4. */
export const FORMS = ["recurrent", "chunk", "parallel"] as const;

/** `recurrent` (the oracle), `chunk` (chunk-parallel) or `parallel` (masked parallel, one chunk). */
export type Form = typeof FORMS[number];

/** Configuration of one fast-weight rule call. Every field has the SPEC default (see {@linkcode ruleConfig}). */
export interface RuleConfig {
  /** The update rule. */
  readonly rule: RuleName;
  /** Pair alignment (SPEC section 2). */
  readonly alignment: Alignment;
  /** Normalisation applied inside the kernel to q and k of each head. */
  readonly qkNorm: QkNorm;
  /** Scale-coupled ridge: `lambda_t = lambdabar_t * sg(E*_t)` (default true). */
  readonly coupling: boolean;
  /** Nominal window size `B` of Falcon-3/3A (default 4); ignored by other rules. */
  readonly window: number;
  /** Step-denominator stabiliser (default 1e-6). */
  readonly eps: number;
  /** Positive-decay floor (default 1e-3). */
  readonly epsGamma: number;
  /** RMSNorm stabiliser (default 1e-6). */
  readonly epsRms: number;
  /** Mamba-2 `A_h > 0` per head (default 1 for every head). */
  readonly mambaA?: readonly number[];
  /** RetNet head index per head, giving `g_h = 1 - 2^(-5-h)` (default `0..H-1`). */
  readonly retnetHeads?: readonly number[];
}

/** Build a {@linkcode RuleConfig} from a rule name and overrides, filling SPEC defaults. */
export function ruleConfig(
  rule: RuleName,
  overrides: Partial<Omit<RuleConfig, "rule">> = {},
): RuleConfig {
  const defaultNorm: QkNorm = ruleEntry(rule).defaultQkNorm;
  const config: RuleConfig = {
    rule,
    alignment: "prefix",
    qkNorm: defaultNorm,
    coupling: true,
    window: 4,
    eps: 1e-6,
    epsGamma: 1e-3,
    epsRms: DEFAULT_EPS_RMS,
    ...overrides,
  };
  if (!Number.isInteger(config.window) || config.window < 1) {
    throw new RangeError(`window must be an integer >= 1, got ${config.window}`);
  }
  if (!(config.epsGamma > 0 && config.epsGamma < 1)) {
    throw new RangeError(`epsGamma must be in (0, 1), got ${config.epsGamma}`);
  }
  if (!(config.eps > 0)) throw new RangeError(`eps must be > 0, got ${config.eps}`);
  if (!(ALIGNMENTS as readonly string[]).includes(config.alignment)) {
    throw new RangeError(`unknown alignment "${config.alignment}"; expected prefix or same-step`);
  }
  if (!(QK_NORMS as readonly string[]).includes(config.qkNorm)) {
    throw new RangeError(`unknown qkNorm "${config.qkNorm}"; expected rms, l2 or none`);
  }
  return config;
}

/** RetNet decay of head index `h` (0-based): `1 - 2^(-5-h)`. */
export function retnetDecay(h: number): number {
  return 1 - Math.pow(2, -5 - h);
}
