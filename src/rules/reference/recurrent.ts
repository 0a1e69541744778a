/**
 * Recurrent form of every rule (SPEC sections 1-3 and 6): the float64 oracle the other forms and
 * backends are judged by, with an exact hand-derived backward (BPTT over stored states).
 *
 * Per position `t` of one head (shapes: `T` positions, `Dk` key size, `Dv` value size):
 *
 *     qn, kn = qkNorm(q), qkNorm(k)                      (qk_norm.ts)
 *     pairs  = the step's write pairs (x_p, y_p)          (write_schedule.ts: alignment, starts, window)
 *     E*     = write statistic of the pairs' features     (window_stat.ts; Falcon rules)
 *     gamma, a, b = coefficients(beta_t, lambdabar_t, E*)  (coefficients.ts)
 *     S_t    = gamma S_{t-1} + sum_p x_p (b y_p - a S_{t-1}^T x_p)^T   (state_update.ts)
 *     o_t    = S_t^T qn_t
 *
 * At a sequence start the state is reset to `S0` first (under prefix alignment that step is the
 * sentinel: no pair, no decay). A Falcon step whose statistic is exactly 0 is a no-op. The carry
 * returned lets a later call continue exactly. `chunkSize` is ignored.
 *
 * Backward: every step's pre- and post-update state is stored; the reverse pass runs each
 * module's backward in turn (readout, state update, coefficients, statistic) and at a start
 * hands the state gradient to `dS0` and stops it. The coupled ridge's statistic is a
 * stop-gradient; a bound clamp passes no gradient. Gradients of q and k are w.r.t. the raw rows.
 *
 * @module
 */

import { isFalconRule, isPerColumnRule, type RuleConfig } from "../config.ts";
import {
  type StepCoefficients,
  stepCoefficients,
  stepCoefficientsBackward,
  type StepScalars,
} from "./coefficients.ts";
import type { HeadCarry, HeadForm, HeadForward, HeadGrads, HeadInputs } from "./head.ts";
import { normalizeRows, normalizeRowsBackward } from "./qk_norm.ts";
import { readout, readoutBackward, stateUpdate, stateUpdateBackward } from "./state_update.ts";
import { type WindowStat, windowStatistic, windowStatisticBackward, windowStatKind } from "./window_stat.ts";
import { windowSize, type WritePair, type WriteSchedule, writeSchedule } from "./write_schedule.ts";

/** Everything the forward pass computed that the backward pass reads. */
interface Tape {
  /** Normalised queries `[T, Dk]`. */
  qn: Float64Array;
  /** Normalised keys `[T, Dk]`. */
  kn: Float64Array;
  /** Pairs written per step. */
  schedule: WriteSchedule;
  /** Per step: the pre-update state `[Dk, Dv]` (after any reset). */
  prev: Float64Array[];
  /** Per step: the post-update state `[Dk, Dv]`. */
  next: Float64Array[];
  /** Per step: the write statistic (Falcon rules with at least one pair). */
  stats: (WindowStat | undefined)[];
  /** Per step: the scalar inputs of the coefficients. */
  scalars: StepScalars[];
  /** Per step: the coefficients. */
  coeffs: StepCoefficients[];
}

/** The recurrent form of every rule. */
export const recurrentForm: HeadForm = {
  forward(config: RuleConfig, inputs: HeadInputs): HeadForward {
    const { o, carry } = runForward(config, inputs);
    return { o, carry };
  },
  backward(config: RuleConfig, inputs: HeadInputs, dO: Float64Array): HeadGrads {
    if (dO.length !== inputs.T * inputs.dv) {
      throw new RangeError(`dO has ${dO.length} entries, expected T*Dv = ${inputs.T * inputs.dv}`);
    }
    return runBackward(config, inputs, runForward(config, inputs).tape, dO);
  },
};

/** Per-step internals of the recurrent form, for debugging and for checks against the test vectors. */
export interface RecurrentTrace {
  /** Write statistic `E*_t` per step `[T]` (0 at the sentinel, and for the baselines). */
  stat: Float64Array;
  /** Step size `eta` per step and value column `[T, Dv]` (0 for no-op steps and the baselines). */
  eta: Float64Array;
  /** Decay `gamma` per step and value column `[T, Dv]` (after the clamp). */
  gamma: Float64Array;
  /** Number of (step, column) entries where the positive-decay clamp binds. */
  clamped: number;
}

/** Run the recurrent form and return its per-step statistic, step size and decay. */
export function recurrentTrace(config: RuleConfig, inputs: HeadInputs): RecurrentTrace {
  const { tape } = runForward(config, inputs);
  const { T, dv } = inputs;
  const trace: RecurrentTrace = {
    stat: new Float64Array(T),
    eta: new Float64Array(T * dv),
    gamma: new Float64Array(T * dv),
    clamped: 0,
  };
  for (let t = 0; t < T; t++) {
    trace.stat[t] = tape.stats[t]?.value ?? 0;
    trace.eta.set(tape.coeffs[t].eta, t * dv);
    trace.gamma.set(tape.coeffs[t].gamma, t * dv);
    for (const c of tape.coeffs[t].clamped) trace.clamped += c;
  }
  return trace;
}

function runForward(config: RuleConfig, inputs: HeadInputs): HeadForward & { tape: Tape } {
  validateHeadInputs(config, inputs);
  const { T, dk, dv } = inputs;
  const qn = normalizeRows(inputs.q, T, dk, config.qkNorm, config.epsRms);
  const kn = normalizeRows(inputs.k, T, dk, config.qkNorm, config.epsRms);
  const schedule = writeSchedule(config, inputs, kn);
  const tape: Tape = { qn, kn, schedule, prev: [], next: [], stats: [], scalars: [], coeffs: [] };
  const betaWidth = inputs.beta.length / T;
  const o = new Float64Array(T * dv);
  let s: Float64Array = (inputs.carry ? inputs.carry.state : inputs.s0).slice();
  for (let t = 0; t < T; t++) {
    const step = schedule.steps[t];
    if (step.reset) s = inputs.s0.slice();
    const xs = step.pairs.map((p) => p.x);
    const ys = step.pairs.map((p) => p.y);
    const stat = isFalconRule(config.rule) && xs.length > 0
      ? windowStatistic(windowStatKind(config.rule), xs)
      : undefined;
    const scalars: StepScalars = {
      beta: inputs.beta.subarray(t * betaWidth, (t + 1) * betaWidth),
      lambdabar: inputs.lambdabar[t],
      stat: stat?.value ?? 0,
      count: Math.max(1, xs.length),
      sentinel: step.sentinel,
    };
    const coeffs = stepCoefficients(config, inputs, dv, scalars);
    const next = stateUpdate(s, dk, dv, coeffs, xs, ys);
    o.set(readout(next, qn.subarray(t * dk, (t + 1) * dk), dk, dv), t * dv);
    tape.prev.push(s);
    tape.next.push(next);
    tape.stats.push(stat);
    tape.scalars.push(scalars);
    tape.coeffs.push(coeffs);
    s = next;
  }
  return { o, carry: carryOut(s, schedule, dk, dv), tape };
}

/** The carry after the last position. */
function carryOut(state: Float64Array, schedule: WriteSchedule, dk: number, dv: number): HeadCarry {
  const count = schedule.window.length;
  const windowX = new Float64Array(count * dk);
  const windowY = new Float64Array(count * dv);
  schedule.window.forEach((p, i) => {
    windowX.set(p.x, i * dk);
    windowY.set(p.y, i * dv);
  });
  return { state: state.slice(), lastKey: schedule.lastKey.slice(), windowX, windowY, count };
}

/** Gradients accumulated over the steps, before the q/k normalisation's backward. */
interface Accumulated {
  /** With respect to the normalised queries `[T, Dk]`. */
  dqn: Float64Array;
  /** With respect to the normalised keys `[T, Dk]`. */
  dkn: Float64Array;
  /** `[T, Dv]`. */
  dv: Float64Array;
  /** Shape of beta. */
  dbeta: Float64Array;
  /** `[T]`. */
  dlambdabar: Float64Array;
  /** `[Dk, Dv]`. */
  ds0: Float64Array;
}

function runBackward(config: RuleConfig, inputs: HeadInputs, tape: Tape, dO: Float64Array): HeadGrads {
  const { T, dk, dv } = inputs;
  const acc: Accumulated = {
    dqn: new Float64Array(T * dk),
    dkn: new Float64Array(T * dk),
    dv: new Float64Array(T * dv),
    dbeta: new Float64Array(inputs.beta.length),
    dlambdabar: new Float64Array(T),
    ds0: new Float64Array(dk * dv),
  };
  let dS: Float64Array = new Float64Array(dk * dv); // gradient of the state after step t
  for (let t = T - 1; t >= 0; t--) {
    dS = stepBackward(config, inputs, tape, t, dO.subarray(t * dv, (t + 1) * dv), dS, acc);
    if (tape.schedule.steps[t].reset) {
      // the state before a start does not reach later steps: its gradient goes to S0
      for (let i = 0; i < dS.length; i++) acc.ds0[i] += dS[i];
      dS = new Float64Array(dk * dv);
    }
  }
  return {
    dq: normalizeRowsBackward(inputs.q, acc.dqn, T, dk, config.qkNorm, config.epsRms),
    dk: normalizeRowsBackward(inputs.k, acc.dkn, T, dk, config.qkNorm, config.epsRms),
    dv: acc.dv,
    dbeta: acc.dbeta,
    dlambdabar: acc.dlambdabar,
    ds0: acc.ds0,
    dCarryState: inputs.carry ? dS : new Float64Array(dk * dv),
  };
}

/**
 * Backward of step `t` (readout, state update, coefficients, statistic): accumulates into `acc`
 * and returns the gradient of the pre-update state. `dS` is the gradient of the post-update state
 * from later steps; `dOt` is `dO[t]` `[Dv]`.
 */
function stepBackward(
  config: RuleConfig,
  inputs: HeadInputs,
  tape: Tape,
  t: number,
  dOt: Float64Array,
  dS: Float64Array,
  acc: Accumulated,
): Float64Array {
  const { dk, dv } = inputs;
  const step = tape.schedule.steps[t];
  const xs = step.pairs.map((p) => p.x);
  const ys = step.pairs.map((p) => p.y);
  const coeffs = tape.coeffs[t];
  const qn = tape.qn.subarray(t * dk, (t + 1) * dk);
  acc.dqn.set(readoutBackward(tape.next[t], qn, dOt, dS, dk, dv), t * dk);
  const g = stateUpdateBackward(tape.prev[t], dk, dv, coeffs, xs, ys, dS);
  step.pairs.forEach((pair, p) => addPairGrads(pair, g.dxs[p], g.dys[p], acc, dk, dv));
  const sg = stepCoefficientsBackward(config, inputs, tape.scalars[t], coeffs, g.dgamma, g.da, g.db);
  acc.dbeta.set(sg.dbeta, t * sg.dbeta.length);
  acc.dlambdabar[t] = sg.dlambdabar;
  const stat = tape.stats[t];
  if (stat) {
    const dxs = windowStatisticBackward(windowStatKind(config.rule), xs, stat, sg.dstat);
    step.pairs.forEach((pair, p) => addPairGrads(pair, dxs[p], undefined, acc, dk, dv));
  }
  return g.dPrev;
}

/** Add a pair's gradients to the position they came from (carried pairs are constants). */
function addPairGrads(
  pair: WritePair,
  dx: Float64Array,
  dy: Float64Array | undefined,
  acc: Accumulated,
  dk: number,
  dv: number,
): void {
  if (pair.xPos >= 0) { for (let i = 0; i < dk; i++) acc.dkn[pair.xPos * dk + i] += dx[i]; }
  if (dy && pair.yPos >= 0) { for (let j = 0; j < dv; j++) acc.dv[pair.yPos * dv + j] += dy[j]; }
}

/** Check every array of one head against `T`, `Dk`, `Dv`; errors name the field and the sizes. */
export function validateHeadInputs(config: RuleConfig, inputs: HeadInputs): void {
  const { T, dk, dv } = inputs;
  const sizes: [string, number, number][] = [["T", T, 0], ["dk", dk, 1], ["dv", dv, 1]];
  for (const [name, value, min] of sizes) {
    if (!Number.isInteger(value) || value < min) {
      throw new RangeError(`head ${name} must be an integer >= ${min}, got ${value}`);
    }
  }
  const betaWidth = isPerColumnRule(config.rule) ? dv : 1;
  const expect = (name: string, length: number, expected: number, what: string) => {
    if (length !== expected) {
      throw new RangeError(`head ${name} has ${length} entries, expected ${what} = ${expected}`);
    }
  };
  expect("q", inputs.q.length, T * dk, "T*Dk");
  expect("k", inputs.k.length, T * dk, "T*Dk");
  expect("v", inputs.v.length, T * dv, "T*Dv");
  expect("beta", inputs.beta.length, T * betaWidth, betaWidth === 1 ? "T" : "T*Dv");
  expect("lambdabar", inputs.lambdabar.length, T, "T");
  expect("starts", inputs.starts.length, T, "T");
  expect("s0", inputs.s0.length, dk * dv, "Dk*Dv");
  const carry = inputs.carry;
  if (carry) {
    expect("carry.state", carry.state.length, dk * dv, "Dk*Dv");
    expect("carry.lastKey", carry.lastKey.length, dk, "Dk");
    const slots = windowSize(config) - 1;
    if (!Number.isInteger(carry.count) || carry.count < 0) {
      throw new RangeError(`head carry.count must be an integer >= 0, got ${carry.count}`);
    }
    if (carry.count > 0 && slots > 0) {
      expect("carry.windowX", carry.windowX.length, carry.count * dk, "count*Dk");
      expect("carry.windowY", carry.windowY.length, carry.count * dv, "count*Dv");
    }
  }
}
