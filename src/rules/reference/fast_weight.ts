/**
 * The batched fast-weight API of the reference backend: slices `[B, T, H, D]` tensors into
 * per-head problems ({@linkcode HeadInputs}), runs the chosen form on each, and scatters back.
 *
 * @module
 */

import type {
  BackwardOptions,
  Carry,
  FastWeightGrads,
  FastWeightInputs,
  FastWeightOutputs,
  FormOptions,
  Tensor,
} from "../backend.ts";
import { isPerColumnRule, retnetDecay, type RuleConfig } from "../config.ts";
import type { HeadCarry, HeadForm, HeadInputs } from "./head.ts";
import { refData, RefTensor } from "./tensor.ts";
import { recurrentForm } from "./recurrent.ts";
import { chunkForm, parallelForm } from "./chunk.ts";
import { chunkSizeOf, expectShape, type FastWeightDims, fastWeightDims } from "../validate.ts";

/** Copy `[B, T, H, D]` row (b, h) into a `[T, D]` array. */
function gather(src: Float64Array, dims: FastWeightDims, D: number, b: number, h: number): Float64Array {
  const { T, H } = dims;
  const out = new Float64Array(T * D);
  for (let t = 0; t < T; t++) {
    const base = ((b * T + t) * H + h) * D;
    out.set(src.subarray(base, base + D), t * D);
  }
  return out;
}

/** Add or copy a `[T, D]` array into `[B, T, H, D]` row (b, h). */
function scatter(
  dst: Float64Array,
  src: Float64Array,
  dims: FastWeightDims,
  D: number,
  b: number,
  h: number,
) {
  const { T, H } = dims;
  for (let t = 0; t < T; t++) dst.set(src.subarray(t * D, t * D + D), ((b * T + t) * H + h) * D);
}

function headInputs(
  config: RuleConfig,
  inputs: FastWeightInputs,
  dims: FastWeightDims,
  b: number,
  h: number,
) {
  const { T, H, dk, dv } = dims;
  const betaWidth = isPerColumnRule(config.rule) ? dv : 1;
  const starts = new Uint8Array(T);
  if (inputs.starts) starts.set(inputs.starts.subarray(b * T, b * T + T));
  const bh = b * H + h;
  const s0 = inputs.s0
    ? refData(inputs.s0, "s0").slice(bh * dk * dv, (bh + 1) * dk * dv)
    : new Float64Array(dk * dv);
  let carry: HeadCarry | undefined;
  if (inputs.carry) {
    const c = inputs.carry;
    const slots = Math.max(0, config.window - 1);
    const count = Math.min(c.windowCount[b] ?? 0, slots);
    const wx = refData(c.windowX, "carry.windowX");
    const wy = refData(c.windowY, "carry.windowY");
    // the newest `count` of the W-1 slots are the last ones
    const first = slots - count;
    carry = {
      state: refData(c.state, "carry.state").slice(bh * dk * dv, (bh + 1) * dk * dv),
      lastKey: refData(c.lastKey, "carry.lastKey").slice(bh * dk, (bh + 1) * dk),
      windowX: wx.slice((bh * slots + first) * dk, (bh * slots + slots) * dk),
      windowY: wy.slice((bh * slots + first) * dv, (bh * slots + slots) * dv),
      count,
    };
  }
  const head: HeadInputs = {
    T,
    dk,
    dv,
    q: gather(refData(inputs.q, "q"), dims, dk, b, h),
    k: gather(refData(inputs.k, "k"), dims, dk, b, h),
    v: gather(refData(inputs.v, "v"), dims, dv, b, h),
    beta: gather(refData(inputs.beta, "beta"), dims, betaWidth, b, h),
    lambdabar: gather(refData(inputs.lambdabar, "lambdabar"), dims, 1, b, h),
    starts,
    s0,
    carry,
    mambaA: config.mambaA?.[h] ?? 1,
    retnetG: retnetDecay(config.retnetHeads?.[h] ?? h),
  };
  return head;
}

/** The reference implementation of a form. */
export function headForm(options: FormOptions = {}): HeadForm {
  switch (options.form ?? "recurrent") {
    case "recurrent":
      return recurrentForm;
    case "chunk":
      return chunkForm;
    case "parallel":
      return parallelForm;
  }
}

/** Reference forward of a batched multi-head call. */
export function refFastWeightForward(
  config: RuleConfig,
  inputs: FastWeightInputs,
  options: FormOptions = {},
): FastWeightOutputs {
  const dims = fastWeightDims(config, inputs);
  const { B, T, H, dk, dv } = dims;
  const form = headForm(options);
  const chunk = chunkSizeOf(options);
  const slots = Math.max(0, config.window - 1);
  const o = new RefTensor([B, T, H, dv]);
  const state = new RefTensor([B, H, dk, dv]);
  const lastKey = new RefTensor([B, H, dk]);
  const windowX = new RefTensor([B, H, slots, dk]);
  const windowY = new RefTensor([B, H, slots, dv]);
  const windowCount = new Int32Array(B);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const result = form.forward(config, headInputs(config, inputs, dims, b, h), chunk);
      scatter(o.data, result.o, dims, dv, b, h);
      const bh = b * H + h;
      state.data.set(result.carry.state, bh * dk * dv);
      lastKey.data.set(result.carry.lastKey, bh * dk);
      const n = Math.min(result.carry.count, slots);
      windowCount[b] = n;
      windowX.data.set(result.carry.windowX.subarray(0, n * dk), (bh * slots + slots - n) * dk);
      windowY.data.set(result.carry.windowY.subarray(0, n * dv), (bh * slots + slots - n) * dv);
    }
  }
  const carry: Carry = { state, lastKey, windowX, windowY, windowCount };
  return { o, carry };
}

/** Reference backward of a batched multi-head call. */
export function refFastWeightBackward(
  config: RuleConfig,
  inputs: FastWeightInputs,
  dO: Tensor,
  options: BackwardOptions = {},
): FastWeightGrads {
  const dims = fastWeightDims(config, inputs);
  const { B, T, H, dk, dv } = dims;
  expectShape("dO", dO, [B, T, H, dv]);
  const form = headForm(options);
  const chunk = chunkSizeOf(options);
  const betaWidth = isPerColumnRule(config.rule) ? dv : 1;
  const grads = {
    dq: new RefTensor([B, T, H, dk]),
    dk: new RefTensor([B, T, H, dk]),
    dv: new RefTensor([B, T, H, dv]),
    dbeta: new RefTensor([...inputs.beta.shape]),
    dlambdabar: new RefTensor([B, T, H]),
    dCarryState: new RefTensor([B, H, dk, dv]),
  };
  // the heads compute dS0 anyway; it is returned only when asked for
  const ds0 = (options.s0Grad ?? true) ? new RefTensor([B, H, dk, dv]) : null;
  const dOData = refData(dO, "dO");
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const head = headInputs(config, inputs, dims, b, h);
      const g = form.backward(config, head, gather(dOData, dims, dv, b, h), chunk);
      scatter(grads.dq.data, g.dq, dims, dk, b, h);
      scatter(grads.dk.data, g.dk, dims, dk, b, h);
      scatter(grads.dv.data, g.dv, dims, dv, b, h);
      scatter(grads.dbeta.data, g.dbeta, dims, betaWidth, b, h);
      scatter(grads.dlambdabar.data, g.dlambdabar, dims, 1, b, h);
      const bh = b * H + h;
      ds0?.data.set(g.ds0, bh * dk * dv);
      grads.dCarryState.data.set(g.dCarryState, bh * dk * dv);
    }
  }
  return ds0 ? { ...grads, ds0 } : grads;
}
