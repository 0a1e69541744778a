/**
 * How a fast-weight mixer fills the kernel's `beta` and `lambdabar` slots, per rule (SPEC sections
 * 6 and 7). With `z` the pre-activation (`W u (+ b)` for the `token` parameterisation, a learned
 * per-head scalar for `const`):
 *
 * | rule | beta slot | lambdabar slot |
 * |---|---|---|
 * | falcon1/3/1a/3a | `betaMax * sigmoid(z)` per head | `softplus(z)` per head |
 * | falcon2/2a | `betaMax * sigmoid(z)` per head and value column | `softplus(z)` per head |
 * | linear, retnet | unused (zeros) | unused (zeros) |
 * | mamba2 | `dt = softplus(z)` per head, with a bias (`A_h` fixed: RuleConfig default 1) | unused |
 * | deltanet | `b = sigmoid(z)` per head | unused |
 * | gated_deltanet | `b = sigmoid(z)` per head | `softplus(z) = -log a` per head |
 *
 * Unused slots get no parameters. `lambdabar` always has a bias in the `token` form
 * (`softplus(W_lambda u + b_lambda)`); `beta` has one only for mamba2 (Mamba's `dt` bias).
 *
 * @module
 */

import type { Activation } from "../rules/backend.ts";
import { isPerColumnRule, ruleEntry, type RuleName, type StreamKind } from "../rules/catalog.ts";

/** One coefficient stream: `slot = scale * activation(z)`. */
export interface CoefficientStream {
  /** Activation applied to the pre-activation. */
  readonly activation: Activation;
  /** Multiplier after the activation (`betaMax` for Falcon beta, else 1). */
  readonly scale: number;
  /** Values per head (`H`), or per head and value column (`H * Dv`) for falcon2/falcon2a beta. */
  readonly perColumn: boolean;
  /** Whether the `token` form adds a learned bias to `W u`. */
  readonly bias: boolean;
  /** Initial bias (token) or initial constant (const): the pre-activation at init. */
  readonly init: number;
}

/** The beta and lambdabar streams of a rule; `null` where the rule ignores the slot. */
export interface CoefficientPlan {
  /** The `beta` slot (beta, dt or b). */
  readonly beta: CoefficientStream | null;
  /** The `lambdabar` slot (dimensionless ridge, or `-log a` for gated_deltanet). */
  readonly lambda: CoefficientStream | null;
}

/** Initial pre-activation of lambdabar: `softplus(-4) ~ 0.018` (weak ridge, slow forgetting). */
const LAMBDA_INIT = -4;

/** Initial pre-activation of Mamba-2's dt: `softplus(-3) ~ 0.049`. */
const DT_INIT = -3;

/** The stream of one catalog stream kind; `null` for `none`. */
function stream(kind: StreamKind, betaMax: number, perColumn: boolean): CoefficientStream | null {
  switch (kind) {
    case "none":
      return null;
    case "step-gate":
      return { activation: "sigmoid", scale: betaMax, perColumn, bias: false, init: 0 };
    case "unit-gate":
      return { activation: "sigmoid", scale: 1, perColumn, bias: false, init: 0 };
    case "dt":
      return { activation: "softplus", scale: 1, perColumn, bias: true, init: DT_INIT };
    case "ridge":
      return { activation: "softplus", scale: 1, perColumn: false, bias: true, init: LAMBDA_INIT };
    default:
      throw new TypeError(`unknown coefficient stream kind "${kind satisfies never}"`);
  }
}

/**
 * The coefficient streams of `rule` (table in the module doc), from the catalog's `betaStream`
 * and `lambdaStream`; an unknown rule is an `UnknownRuleError`.
 */
export function coefficientPlan(rule: RuleName, betaMax: number): CoefficientPlan {
  const entry = ruleEntry(rule);
  return {
    beta: stream(entry.betaStream, betaMax, isPerColumnRule(rule)),
    lambda: stream(entry.lambdaStream, betaMax, false),
  };
}
