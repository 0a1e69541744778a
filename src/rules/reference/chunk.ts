/**
 * Chunk-parallel and masked-parallel forms of every rule (SPEC section 4), forward and backward,
 * in float64 on one head.
 *
 * The sequence is split into chunks of `C` steps; each chunk is computed from the state entering it
 * with matrix products (`chunk_graph.ts`): a triangular solve for the delta rules
 * (`chunk_delta.ts`), a decay-and-window mask for the additive rules (`chunk_additive.ts`).
 * Backward (SPEC section 5): the forward sweep keeps only the chunk-boundary states; the chunks are
 * then recomputed on a small tape in reverse order and differentiated (`autodiff.ts`), carrying the
 * state gradient backwards.
 *
 * The masked-parallel form is the same computation with one chunk over the whole sequence: for the
 * additive family that chunk is the masked attention `O = diag(delta) Q S_0 + (Q X^T * M) V`.
 *
 * @module
 */

import { isPerColumnRule, type RuleConfig } from "../config.ts";
import { Tape } from "./autodiff.ts";
import { normalizeRows } from "./qk_norm.ts";
import { checkChunkSize } from "../validate.ts";
import { chunkGraph } from "./chunk_graph.ts";
import { chunkLayout, firstPair, pairSource, planSequence, type SequencePlan } from "./chunk_layout.ts";
import type { HeadCarry, HeadForm, HeadForward, HeadGrads, HeadInputs } from "./head.ts";

/** The carry after position `T-1` (SPEC section 2): state, last key feature, last window pairs. */
function carryAfter(
  config: RuleConfig,
  plan: SequencePlan,
  inputs: HeadInputs,
  state: Float64Array,
): HeadCarry {
  const { T, dk, dv, W } = plan;
  if (T === 0) {
    const c = inputs.carry;
    return c ? { ...c, state: state.slice(), lastKey: c.lastKey.slice() } : {
      state: state.slice(),
      lastKey: new Float64Array(dk),
      windowX: new Float64Array(0),
      windowY: new Float64Array(0),
      count: 0,
    };
  }
  const feature = (row: number) =>
    normalizeRows(inputs.k.subarray(row * dk, row * dk + dk), 1, dk, config.qkNorm, config.epsRms);
  const xs: Float64Array[] = [];
  const ys: Float64Array[] = [];
  if (W > 1) {
    for (let j = Math.max(firstPair(plan, T - 1), T - W + 1); j <= T - 1; j++) {
      const src = pairSource(plan, j);
      if (src.kind === "none") continue;
      if (src.kind === "carry") {
        xs.push(plan.carryX.slice(src.row * dk, src.row * dk + dk));
        ys.push(plan.carryY.slice(src.row * dv, src.row * dv + dv));
      } else {
        xs.push(src.kind === "key" ? feature(src.row) : plan.lastKey!.slice());
        ys.push(inputs.v.slice(j * dv, j * dv + dv));
      }
    }
  }
  const windowX = new Float64Array(xs.length * dk);
  const windowY = new Float64Array(ys.length * dv);
  xs.forEach((x, i) => windowX.set(x, i * dk));
  ys.forEach((y, i) => windowY.set(y, i * dv));
  return { state, lastKey: feature(T - 1), windowX, windowY, count: xs.length };
}

/** Forward sweep; returns the readout and the state entering each chunk. */
function sweep(
  config: RuleConfig,
  plan: SequencePlan,
  inputs: HeadInputs,
  chunkSize: number,
): { o: Float64Array; boundaries: Float64Array[]; state: Float64Array } {
  const { T, dk, dv } = plan;
  const o = new Float64Array(T * dv);
  const boundaries: Float64Array[] = [];
  let state: Float64Array = inputs.carry ? inputs.carry.state.slice() : new Float64Array(dk * dv);
  for (let a = 0; a < T; a += chunkSize) {
    const layout = chunkLayout(plan, a, Math.min(chunkSize, T - a));
    boundaries.push(state);
    const graph = chunkGraph(new Tape(), config, plan, inputs, layout, state, false);
    o.set(graph.o.value, a * dv);
    state = graph.se.value;
  }
  return { o, boundaries, state };
}

function chunkForward(config: RuleConfig, inputs: HeadInputs, chunkSize: number): HeadForward {
  checkChunkSize(chunkSize);
  const plan = planSequence(config, inputs);
  const { o, state } = sweep(config, plan, inputs, chunkSize);
  return { o, carry: carryAfter(config, plan, inputs, state) };
}

/** Add `src` into `dst` starting at `offset`. */
function addInto(dst: Float64Array, src: Float64Array | null, offset: number): void {
  if (!src) return;
  for (let i = 0; i < src.length; i++) dst[offset + i] += src[i];
}

function chunkBackward(
  config: RuleConfig,
  inputs: HeadInputs,
  dO: Float64Array,
  chunkSize: number,
): HeadGrads {
  checkChunkSize(chunkSize);
  const plan = planSequence(config, inputs);
  const { T, dk, dv } = plan;
  if (dO.length !== T * dv) throw new RangeError(`dO has length ${dO.length}, expected ${T * dv}`);
  const bw = isPerColumnRule(config.rule) ? dv : 1;
  const grads: HeadGrads = {
    dq: new Float64Array(T * dk),
    dk: new Float64Array(T * dk),
    dv: new Float64Array(T * dv),
    dbeta: new Float64Array(T * bw),
    dlambdabar: new Float64Array(T),
    ds0: new Float64Array(dk * dv),
    dCarryState: new Float64Array(dk * dv),
  };
  const { boundaries } = sweep(config, plan, inputs, chunkSize);
  let dState: Float64Array = new Float64Array(dk * dv);
  for (let c = boundaries.length - 1; c >= 0; c--) {
    const a = c * chunkSize;
    const layout = chunkLayout(plan, a, Math.min(chunkSize, T - a));
    const tape = new Tape();
    const graph = chunkGraph(tape, config, plan, inputs, layout, boundaries[c], true);
    tape.backward([[graph.o, dO.slice(a * dv, (a + layout.n) * dv)], [graph.se, dState]]);
    const { leaves } = graph;
    addInto(grads.dq, leaves.q.grad, a * dk);
    addInto(grads.dk, leaves.k.grad, layout.kLo * dk);
    addInto(grads.dv, leaves.v.grad, layout.vLo * dv);
    addInto(grads.dbeta, leaves.beta.grad, a * bw);
    addInto(grads.dlambdabar, leaves.lambdabar.grad, a);
    addInto(grads.ds0, leaves.s0.grad, 0);
    dState = leaves.sa.grad ?? new Float64Array(dk * dv);
  }
  if (inputs.carry) grads.dCarryState.set(dState);
  return grads;
}

/** The chunk-parallel form of every rule (chunks of `chunkSize` steps). */
export const chunkForm: HeadForm = {
  forward: chunkForward,
  backward: chunkBackward,
};

/**
 * The masked-parallel form: the whole sequence as one chunk. For the additive family this is the
 * masked attention of SPEC section 4 (one mask per value column for Falcon-2A); for the regression
 * family and the delta baselines it is the chunked form with `C = T`. `chunkSize` is ignored.
 */
export const parallelForm: HeadForm = {
  forward: (config, inputs) => chunkForward(config, inputs, Math.max(1, inputs.T)),
  backward: (config, inputs, dO) => chunkBackward(config, inputs, dO, Math.max(1, inputs.T)),
};
