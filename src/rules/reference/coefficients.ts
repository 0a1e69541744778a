/**
 * Per-step coefficients of every rule, forward and backward (SPEC sections 3 and 6). Every rule
 * except the window pair lists is the same update with per-value-column coefficients
 * `gamma, a, b` (`[Dv]`; equal across columns for the scalar rules):
 *
 *     column j:  s'_j = gamma_j s_j + sum_{p in window} x_p (b_j y_{p,j} - a_j x_p^T s_j)
 *
 * | rule | gamma_j | a_j | b_j |
 * |---|---|---|---|
 * | falcon1/2/3 | `1 - min(eta_j lambda, 1 - eps_gamma)` | `eta_j / B_t` | `eta_j / B_t` |
 * | falcon1a/2a/3a | same | 0 | `eta_j / B_t` |
 * | linear | 1 | 0 | 1 |
 * | retnet | `g_h` | 0 | 1 |
 * | mamba2 | `exp(-beta A_h)` | 0 | `beta` |
 * | deltanet | 1 | `beta` | `beta` |
 * | gated_deltanet | `exp(-lambdabar)` | `exp(-lambdabar) beta` | `beta` |
 *
 * Falcon rules: `eta_j = beta_j / (E* + lambda + eps)`, `lambda = lambdabar * sg(E*)` when
 * coupled (else `lambdabar`), where `E*` is the live write statistic and `B_t` the window count
 * (1 for rules without a window). The prefix sentinel and a zero statistic give the no-op
 * `gamma = 1, a = b = 0`; the baselines' sentinel is the same no-op.
 *
 * @module
 */

import { isDeltaRule, isFalconRule, type RuleConfig, UnknownRuleError } from "../config.ts";

/** Inputs of one step's coefficients. */
export interface StepScalars {
  /** `beta_t`: `[1]`, or `[Dv]` for falcon2/falcon2a (dt for mamba2, b for the deltanets). */
  beta: Float64Array;
  /** `lambdabar_t` (the ridge itself when coupling is off; `-log a` for gated_deltanet). */
  lambdabar: number;
  /** The live write statistic `E*_t` (Falcon rules; ignored by the baselines). */
  stat: number;
  /** Number of pairs written at this step, `B_t` (1 for rules without a window). */
  count: number;
  /** Prefix-alignment sentinel: the step writes and decays nothing. */
  sentinel: boolean;
}

/** Per-head constants the baselines read. */
export interface HeadConstants {
  /** Mamba-2 `A_h`. */
  mambaA: number;
  /** RetNet `g_h`. */
  retnetG: number;
}

/** The coefficients of one step and what their backward needs. */
export interface StepCoefficients {
  /** Decay per value column `[Dv]`. */
  gamma: Float64Array;
  /** Gain of the residual's prediction term per value column `[Dv]`. */
  a: Float64Array;
  /** Write gain per value column `[Dv]`. */
  b: Float64Array;
  /** The step writes and decays nothing (sentinel, or a zero Falcon statistic). */
  noop: boolean;
  /** Falcon rules: ridge `lambda_t` actually used. */
  lambda: number;
  /** Falcon rules: the step denominator `E* + lambda + eps`. */
  den: number;
  /** Falcon rules: step size per value column `[Dv]` (before division by `B_t`). */
  eta: Float64Array;
  /** Falcon rules: 1 where the positive-decay clamp binds, per value column `[Dv]`. */
  clamped: Uint8Array;
}

/** Gradients of one step's scalar inputs. */
export interface StepScalarGrads {
  /** Same shape as {@linkcode StepScalars.beta}. */
  dbeta: Float64Array;
  /** Gradient with respect to `lambdabar_t`. */
  dlambdabar: number;
  /** Gradient with respect to the live statistic `E*_t` (0 for the baselines). */
  dstat: number;
}

/** The coefficients of one step of `config.rule` with `dv` value columns. */
export function stepCoefficients(
  config: RuleConfig,
  head: HeadConstants,
  dv: number,
  step: StepScalars,
): StepCoefficients {
  const c: StepCoefficients = {
    gamma: new Float64Array(dv).fill(1),
    a: new Float64Array(dv),
    b: new Float64Array(dv),
    noop: true,
    lambda: 0,
    den: 0,
    eta: new Float64Array(dv),
    clamped: new Uint8Array(dv),
  };
  if (step.sentinel) return c;
  if (isFalconRule(config.rule)) {
    if (step.stat === 0) return c;
    falconCoefficients(config, step, c);
  } else {
    baselineCoefficients(config, head, step, c);
  }
  c.noop = false;
  return c;
}

function falconCoefficients(config: RuleConfig, step: StepScalars, c: StepCoefficients): void {
  const regression = isDeltaRule(config.rule);
  c.lambda = config.coupling ? step.lambdabar * step.stat : step.lambdabar;
  c.den = step.stat + c.lambda + config.eps;
  for (let j = 0; j < c.gamma.length; j++) {
    const eta = betaAt(step.beta, j) / c.den;
    const alphaRaw = eta * c.lambda;
    c.eta[j] = eta;
    c.clamped[j] = alphaRaw > 1 - config.epsGamma ? 1 : 0;
    c.gamma[j] = c.clamped[j] ? config.epsGamma : 1 - alphaRaw;
    c.a[j] = regression ? eta / step.count : 0;
    c.b[j] = eta / step.count;
  }
}

function baselineCoefficients(
  config: RuleConfig,
  head: HeadConstants,
  step: StepScalars,
  c: StepCoefficients,
): void {
  const beta = step.beta[0];
  let gamma = 1;
  let a = 0;
  let b = 1;
  switch (config.rule) {
    case "linear":
      break;
    case "retnet":
      gamma = head.retnetG;
      break;
    case "mamba2":
      gamma = Math.exp(-beta * head.mambaA);
      b = beta;
      break;
    case "deltanet":
      a = beta;
      b = beta;
      break;
    case "gated_deltanet":
      gamma = Math.exp(-step.lambdabar);
      a = gamma * beta;
      b = beta;
      break;
    case "falcon1":
    case "falcon2":
    case "falcon3":
    case "falcon1a":
    case "falcon2a":
    case "falcon3a":
      throw new TypeError(`rule "${config.rule}" has Falcon coefficients, not baseline ones`);
    default:
      throw new UnknownRuleError(config.rule satisfies never);
  }
  c.gamma.fill(gamma);
  c.a.fill(a);
  c.b.fill(b);
}

/**
 * Backward of {@linkcode stepCoefficients}: given the gradients of `gamma, a, b` (`[Dv]` each),
 * the gradients of `beta`, `lambdabar` and the live statistic. The coupled ridge's statistic is a
 * stop-gradient (it contributes only through the step denominator); a bound clamp passes nothing.
 */
export function stepCoefficientsBackward(
  config: RuleConfig,
  head: HeadConstants,
  step: StepScalars,
  c: StepCoefficients,
  dgamma: Float64Array,
  da: Float64Array,
  db: Float64Array,
): StepScalarGrads {
  const grads: StepScalarGrads = { dbeta: new Float64Array(step.beta.length), dlambdabar: 0, dstat: 0 };
  if (c.noop) return grads;
  if (isFalconRule(config.rule)) {
    falconCoefficientsBackward(config, step, c, dgamma, da, db, grads);
  } else {
    baselineCoefficientsBackward(config, head, step, c, dgamma, da, db, grads);
  }
  return grads;
}

function falconCoefficientsBackward(
  config: RuleConfig,
  step: StepScalars,
  c: StepCoefficients,
  dgamma: Float64Array,
  da: Float64Array,
  db: Float64Array,
  grads: StepScalarGrads,
): void {
  const regression = isDeltaRule(config.rule);
  let dlambda = 0;
  let dden = 0;
  for (let j = 0; j < c.gamma.length; j++) {
    let deta = ((regression ? da[j] : 0) + db[j]) / step.count;
    if (!c.clamped[j]) {
      // gamma = 1 - eta lambda
      deta -= dgamma[j] * c.lambda;
      dlambda -= dgamma[j] * c.eta[j];
    }
    // eta = beta / den
    grads.dbeta[step.beta.length === 1 ? 0 : j] += deta / c.den;
    dden -= deta * c.eta[j] / c.den;
  }
  // den = stat + lambda + eps
  grads.dstat = dden;
  dlambda += dden;
  // lambda = lambdabar * sg(stat) when coupled
  grads.dlambdabar = config.coupling ? dlambda * step.stat : dlambda;
}

function baselineCoefficientsBackward(
  config: RuleConfig,
  head: HeadConstants,
  step: StepScalars,
  c: StepCoefficients,
  dgamma: Float64Array,
  da: Float64Array,
  db: Float64Array,
  grads: StepScalarGrads,
): void {
  const sumGamma = sum(dgamma);
  const sumA = sum(da);
  const sumB = sum(db);
  const beta = step.beta[0];
  switch (config.rule) {
    case "linear":
    case "retnet":
      break;
    case "mamba2":
      // gamma = exp(-beta A), b = beta
      grads.dbeta[0] = sumB - head.mambaA * c.gamma[0] * sumGamma;
      break;
    case "deltanet":
      grads.dbeta[0] = sumA + sumB;
      break;
    case "gated_deltanet":
      // gamma = exp(-lambdabar), a = gamma beta, b = beta
      grads.dbeta[0] = c.gamma[0] * sumA + sumB;
      grads.dlambdabar = -c.gamma[0] * (sumGamma + beta * sumA);
      break;
    case "falcon1":
    case "falcon2":
    case "falcon3":
    case "falcon1a":
    case "falcon2a":
    case "falcon3a":
      throw new TypeError(`rule "${config.rule}" has Falcon coefficients, not baseline ones`);
    default:
      throw new UnknownRuleError(config.rule satisfies never);
  }
}

function betaAt(beta: Float64Array, j: number): number {
  return beta[beta.length === 1 ? 0 : j];
}

function sum(a: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i];
  return s;
}
