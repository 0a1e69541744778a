/**
 * Per-step coefficients of every rule on the tape (SPEC sections 3 and 6), for one chunk.
 *
 * Every rule is written as `S_t = gamma_t S_{t-1} + sum_{j in I_t} x_j w_{t,j}^T` with
 * `w_{t,j} = gb_t y_j - ga_t S_{t-1}^T x_j`; this module gives `log gamma` (`lg`), the residual gain
 * `ga` (null for additive rules) and the target gain `gb`, each `[n, 1]`, or `[n, Dv]` for
 * Falcon-2/2A (one per value column).
 *
 * | rule | lg | ga | gb |
 * |---|---|---|---|
 * | falcon1/2 | clamp(eta lambda) | eta | eta |
 * | falcon1a/2a | clamp(eta lambda) | - | eta |
 * | falcon3 | clamp(eta lambda) | eta / B_t | eta / B_t |
 * | falcon3a | clamp(eta lambda) | - | eta / B_t |
 * | linear | 0 | - | 1 |
 * | retnet | log g_h | - | 1 |
 * | mamba2 | -dt A_h | - | dt |
 * | deltanet | 0 | b | b |
 * | gated_deltanet | -lambdabar | exp(-lambdabar) b | b |
 *
 * At a prefix sentinel (and, for Falcon rules, where the write statistic is exactly 0) the step is a
 * no-op: `lg = 0` and zero gains.
 *
 * @module
 */

import { isDeltaRule, type RuleConfig } from "../config.ts";
import {
  add,
  addScalar,
  concatRows,
  div,
  exp,
  gatherRows,
  matmul,
  mul,
  type Node,
  rowSumSq,
  scale,
  stopGrad,
  topEigenvalue,
  transpose,
} from "./autodiff.ts";
import type { ChunkLayout } from "./chunk_layout.ts";
import { clampedLogDecay } from "./decay.ts";

/** Coefficient streams of one chunk. */
export interface StepCoefficients {
  /** `log gamma_t` `[n, 1]` or `[n, Dv]`. */
  lg: Node;
  /** Residual gain `[n, 1]` or `[n, Dv]`; null for additive rules (no solve). */
  ga: Node | null;
  /** Target gain `[n, 1]` or `[n, Dv]`. */
  gb: Node;
}

/** Tape values the coefficients depend on. */
export interface CoefficientInputs {
  /** Pair features `[np, Dk]` (zero rows where no pair). */
  xPairs: Node;
  /** `beta` rows of the chunk `[n, 1]` or `[n, Dv]`. */
  beta: Node;
  /** `lambdabar` rows of the chunk `[n, 1]`. */
  lambdabar: Node;
  /** Mamba-2 `A_h`. */
  mambaA: number;
  /** RetNet `g_h`. */
  retnetG: number;
}

/** Falcon step size, clamp and gains from the write statistic `stat` (`E_t`, `mu_t` or `Ebar_t`). */
function falconCoefficients(
  config: RuleConfig,
  stat: Node,
  active: Float64Array,
  inputs: CoefficientInputs,
  invB: Float64Array | null,
  additive: boolean,
): StepCoefficients {
  const tape = stat.tape;
  const n = stat.rows;
  for (let i = 0; i < n; i++) if (stat.value[i] === 0) active[i] = 0; // zero statistic: no-op
  const lambda = config.coupling ? mul(inputs.lambdabar, stopGrad(stat)) : inputs.lambdabar;
  const den = addScalar(add(stat, lambda), config.eps);
  const eta = mul(div(inputs.beta, den), tape.constant(n, 1, active));
  const lg = clampedLogDecay(mul(eta, lambda), config.epsGamma);
  const g = invB ? mul(eta, tape.constant(n, 1, invB)) : eta;
  return { lg, ga: additive ? null : g, gb: g };
}

/** Top eigenvalue of each step's window Gram matrix over `B_t`: `mu_t` `[n, 1]`. */
function windowMu(xPairs: Node, layout: ChunkLayout): Node {
  const tape = xPairs.tape;
  const parts: Node[] = [];
  for (let i = 0; i < layout.n; i++) {
    if (layout.Bt[i] === 0) {
      parts.push(tape.constant(1, 1, new Float64Array(1)));
      continue;
    }
    const idx: number[] = [];
    for (let p = 0; p < layout.np; p++) if (layout.H[i * layout.np + p]) idx.push(p);
    const xw = gatherRows(xPairs, idx);
    parts.push(scale(topEigenvalue(matmul(xw, transpose(xw))), 1 / layout.Bt[i]));
  }
  return concatRows(parts);
}

/** The coefficient streams of one chunk of `config.rule`. */
export function stepCoefficients(
  config: RuleConfig,
  layout: ChunkLayout,
  inputs: CoefficientInputs,
): StepCoefficients {
  const { n } = layout;
  const tape = inputs.xPairs.tape;
  const notSentinel = new Float64Array(n);
  for (let i = 0; i < n; i++) notSentinel[i] = layout.sentinel[i] ? 0 : 1;
  const live = tape.constant(n, 1, notSentinel);
  const invB = new Float64Array(n);
  const windowActive = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    invB[i] = layout.Bt[i] > 0 ? 1 / layout.Bt[i] : 0;
    windowActive[i] = layout.Bt[i] > 0 ? 1 : 0;
  }
  switch (config.rule) {
    case "falcon1":
    case "falcon2":
    case "falcon1a":
    case "falcon2a": {
      const additive = !isDeltaRule(config.rule);
      return falconCoefficients(config, rowSumSq(inputs.xPairs), notSentinel, inputs, null, additive);
    }
    case "falcon3":
      return falconCoefficients(config, windowMu(inputs.xPairs, layout), windowActive, inputs, invB, false);
    case "falcon3a": {
      const hn = new Float64Array(n * layout.np);
      for (let k = 0; k < hn.length; k++) hn[k] = layout.H[k] * invB[Math.floor(k / layout.np)];
      const ebar = matmul(tape.constant(n, layout.np, hn), rowSumSq(inputs.xPairs));
      return falconCoefficients(config, ebar, windowActive, inputs, invB, true);
    }
    case "linear":
      return { lg: tape.constant(n, 1, new Float64Array(n)), ga: null, gb: live };
    case "retnet": {
      const lg = notSentinel.map((m) => m * Math.log(inputs.retnetG));
      return { lg: tape.constant(n, 1, lg), ga: null, gb: live };
    }
    case "mamba2": {
      const dt = mul(inputs.beta, live);
      return { lg: scale(dt, -inputs.mambaA), ga: null, gb: dt };
    }
    case "deltanet": {
      const b = mul(inputs.beta, live);
      return { lg: tape.constant(n, 1, new Float64Array(n)), ga: b, gb: b };
    }
    case "gated_deltanet": {
      const lg = scale(mul(inputs.lambdabar, live), -1);
      const b = mul(inputs.beta, live);
      return { lg, ga: mul(exp(lg), b), gb: b };
    }
  }
}
