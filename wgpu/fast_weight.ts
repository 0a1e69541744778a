/**
 * The fast-weight ops of the `webgpu` backend (float32): every rule, both alignments, forward
 * and backward.
 *
 * Pipeline per call: normalise q/k into a head-major workspace (carry rows in front), run the
 * rule's kernels, then gather the carry (forward) or scatter the gradients back to `[B, T, H, D]`
 * through the q/k normalisation backward.
 * Kernels by form:
 * - `chunk` and `parallel` of every rule: the chunk-parallel kernels (SPEC section 4) of
 *   `shaders/fast_weight_chunk_additive.ts` for the additive rules (falcon1a, falcon3a, linear, retnet,
 *   mamba2), `shaders/fast_weight_chunk_delta.ts` for the delta rules (falcon1, deltanet,
 *   gated_deltanet: the `(I + A)^-1` solve), `shaders/fast_weight_chunk_per_column.ts` for the
 *   per-column rules (falcon2, falcon2a: one sub-problem per value column) and
 *   `shaders/fast_weight_chunk_window_delta.ts` for falcon3 (the solve over `W` instance rows per
 *   step), in chunks of `chunkSize` positions (default 64; `parallel` runs the same kernels);
 * - `recurrent`: the recurrent kernels of `shaders/fast_weight_recurrent.ts`, one workgroup per
 *   `(b, h)`; `chunkSize` is then the checkpoint interval of the backward pass.
 *
 * A chunk call whose workspace would exceed the storage binding limit (or the backend's
 * `maxChunkWorkspaceBytes`) runs in batch slices that fit (`fast_weight_slices.ts`).
 *
 * @module
 */

import type {
  BackwardOptions,
  Carry,
  FastWeightGrads,
  FastWeightInputs,
  FastWeightOps,
  FastWeightOutputs,
  FormOptions,
  ForwardOptions,
  Tensor,
} from "../src/rules/backend.ts";
import { isPerColumnRule, isWindowRule, retnetDecay, type RuleConfig } from "../src/rules/config.ts";
import {
  chunkSizeOf,
  expectShape,
  type FastWeightDims,
  fastWeightDims,
  formOf as validForm,
} from "../src/rules/validate.ts";
import { type GpuRuntime, grid } from "./runtime.ts";
import { gpuBuffer, type GpuTensor } from "./tensor.ts";
import { chunkWorkspaceBytes, createChunkKernels } from "./fast_weight_chunk.ts";
import { batchSlicedOps, type SliceRows } from "./fast_weight_slices.ts";
import { keptCallKey, KeptForward } from "./kept_forward.ts";
import { isChunkRule } from "./shaders/chunk_wgsl.ts";
import type { HeadConstants } from "./shaders/fast_weight_coef.ts";
import {
  gatherRowsShader,
  gradientRowsShader,
  normRowsShader,
  rowGroups,
  rowLanes,
  rowWidth,
  workspaceRowsShader,
} from "./shaders/fast_weight_layout.ts";
import {
  recurrentBackwardShader,
  recurrentForwardShader,
  recurrentKey,
  type RecurrentShape,
  recurrentSharedFloats,
  windowSlots,
} from "./shaders/fast_weight_recurrent.ts";

/** Per-step `(lo_t, reset_t)` `[B, T, 2]` and the carry-out window count per row. */
export function stepMeta(
  config: RuleConfig,
  B: number,
  T: number,
  starts: Uint8Array | undefined,
  carry: Carry | undefined,
): { meta: Int32Array; counts: Int32Array } {
  const W = windowSlots(config);
  const prefix = config.alignment === "prefix";
  const meta = new Int32Array(B * T * 2);
  const counts = new Int32Array(B);
  for (let b = 0; b < B; b++) {
    let j0 = carry ? -Math.min(carry.windowCount[b] ?? 0, W - 1) : 0;
    for (let t = 0; t < T; t++) {
      const start = (starts !== undefined && starts[b * T + t] !== 0) || (t === 0 && !carry);
      if (start) j0 = prefix ? t + 1 : t;
      meta[(b * T + t) * 2] = Math.max(j0, t - W + 1);
      meta[(b * T + t) * 2 + 1] = start ? 1 : 0;
    }
    counts[b] = isWindowRule(config.rule) ? Math.max(0, Math.min(W - 1, T - j0)) : 0;
  }
  return { meta, counts };
}

/** Mamba-2 `A_h` and RetNet `g_h` of every head. */
function headConstants(config: RuleConfig, H: number): HeadConstants {
  const mambaA: number[] = [];
  const retnetG: number[] = [];
  for (let h = 0; h < H; h++) {
    mambaA.push(config.mambaA?.[h] ?? 1);
    retnetG.push(retnetDecay(config.retnetHeads?.[h] ?? h));
  }
  return { mambaA, retnetG };
}

/** The chunk size of a call, after checking its form and chunk size (src/rules/validate.ts). */
function formOf(options: FormOptions): number {
  validForm(options);
  return chunkSizeOf(options);
}

/** Whether a call runs the chunk-parallel kernels (see the module docs). */
export function usesChunkKernels(config: RuleConfig, options: FormOptions): boolean {
  return (options.form === "chunk" || options.form === "parallel") && isChunkRule(config);
}

/** Options of {@linkcode createFastWeightOps}. */
export interface FastWeightOpsOptions {
  /**
   * Largest chunk-parallel workspace of one call, in bytes (default and upper bound: the device's
   * `maxStorageBufferBindingSize`). A call that needs more runs in batch slices that fit.
   */
  readonly maxChunkWorkspaceBytes?: number;
}

/** Batch rows per call that keep the chunk workspace within `limit` bytes (all rows when not chunked). */
function chunkSliceRows(limit: number): SliceRows {
  return (config, inputs, options, backward) => {
    if (!usesChunkKernels(config, options)) return Infinity;
    const d = fastWeightDims(config, inputs);
    // the workspace is linear in B: one row's size says how many fit (at least 1; a row that does
    // not fit is the chunk driver's RangeError)
    const perRow = chunkWorkspaceBytes(config, { ...d, B: 1 }, formOf(options), backward);
    return Math.max(1, Math.floor(limit / perRow));
  };
}

/** The fast-weight ops on a runtime (chunk calls above the workspace limit run in batch slices). */
export function createFastWeightOps(rt: GpuRuntime, options: FastWeightOpsOptions = {}): FastWeightOps {
  const binding = rt.device.limits.maxStorageBufferBindingSize;
  const limit = options.maxChunkWorkspaceBytes ?? binding;
  if (!(limit > 0) || limit > binding) {
    throw new RangeError(
      `maxChunkWorkspaceBytes must be in (0, ${binding}] (this device's maxStorageBufferBindingSize), got ${limit}`,
    );
  }
  return batchSlicedOps(rt, wholeBatchOps(rt, limit), chunkSliceRows(limit));
}

/**
 * The workspaces a kept forward holds for the call `key` (taken from it: the backward releases them), or
 * null when there is none; a saved forward of another backend is a TypeError.
 */
function keptWorkspaces(saved: BackwardOptions["saved"], key: string) {
  if (saved === undefined) return null;
  if (!(saved instanceof KeptForward)) {
    throw new TypeError("options.saved is not from a forward of this webgpu backend");
  }
  return saved.take(key);
}

/** The fast-weight ops on a runtime, every call on its whole batch. */
function wholeBatchOps(rt: GpuRuntime, chunkWorkspaceLimit: number): FastWeightOps {
  const limits = rt.device.limits;
  const chunk = createChunkKernels(rt, chunkWorkspaceLimit);

  function chunkInputs(inputs: FastWeightInputs, ws: GpuTensor, meta: GPUBuffer) {
    return {
      ws: ws.buffer,
      beta: gpuBuffer(inputs.beta, "beta"),
      lb: gpuBuffer(inputs.lambdabar, "lambdabar"),
      stepinfo: meta,
      s0: inputs.s0 ? gpuBuffer(inputs.s0, "s0") : null,
      init: inputs.carry ? gpuBuffer(inputs.carry.state, "carry.state") : null,
    };
  }

  function shapeOf(config: RuleConfig, d: FastWeightDims, ck: number): RecurrentShape {
    if (d.dv > limits.maxComputeInvocationsPerWorkgroup) {
      throw new RangeError(
        `Dv = ${d.dv} exceeds this device's maxComputeInvocationsPerWorkgroup (${limits.maxComputeInvocationsPerWorkgroup})`,
      );
    }
    if (d.B * d.H > limits.maxComputeWorkgroupsPerDimension) {
      throw new RangeError(`B*H = ${d.B * d.H} exceeds maxComputeWorkgroupsPerDimension`);
    }
    // steps staged per block: as many as fit (up to 32) next to the other workgroup arrays
    const limit = Math.floor(limits.maxComputeWorkgroupStorageSize / 4) - 16;
    let l = 32;
    const shared = (lb: number, rb: number) =>
      recurrentSharedFloats(config, { H: d.H, dk: d.dk, dv: d.dv, ck, rb, l: lb }) + rb * (d.dv + 1);
    while (l > 1 && shared(l, Math.min(d.dk, 16)) > limit) l >>= 1;
    const rb = Math.min(d.dk, Math.floor((limit - shared(l, 0)) / (d.dv + 1)));
    if (rb < 1) {
      throw new RangeError(`Dk = ${d.dk}, Dv = ${d.dv} do not fit this device's workgroup memory`);
    }
    return { H: d.H, dk: d.dk, dv: d.dv, ck, rb, l };
  }

  /**
   * Normalise into the head-major workspace (one dispatch writes every row of it, zeros included;
   * carry rows, when there is a carry, after it); returns it and its sizes.
   */
  function prepare(
    config: RuleConfig,
    inputs: FastWeightInputs,
    d: FastWeightDims,
    kept: GpuTensor | null = null,
  ) {
    const { B, T, H, dk, dv } = d;
    const BH = B * H;
    const W = windowSlots(config);
    const PAD = W - 1;
    const XR = PAD + T + 1;
    const YR = PAD + T;
    const xBase = BH * T * dk;
    const yBase = xBase + BH * XR * dk;
    const stepTable = () => {
      const { meta, counts } = stepMeta(config, B, T, inputs.starts, inputs.carry);
      return { meta: rt.temp(meta, "storage"), counts, XR, YR, PAD, xBase, yBase };
    };
    // a kept forward's workspace already holds these rows (the same inputs)
    if (kept) return { ws: kept, ...stepTable() };
    const prefix = config.alignment === "prefix";
    const ws = rt.tensor([BH * (T * dk + XR * dk + YR * dv)], false);
    const workspaceRows = BH * (T + XR + YR);
    const width = rowWidth(dk, dv);
    const lanes = rowLanes(dk / width);
    rt.dispatch(
      rt.pipeline(
        `fw_workspace_rows:${config.qkNorm}:${config.epsRms}:${lanes}:${width}`,
        () => workspaceRowsShader(config.qkNorm, config.epsRms, lanes, width),
      ),
      [
        ws.buffer,
        gpuBuffer(inputs.q, "q"),
        gpuBuffer(inputs.k, "k"),
        gpuBuffer(inputs.v, "v"),
        rt.uniform([
          { u: workspaceRows },
          { u: T },
          { u: H },
          { u: dk },
          { u: dv },
          { u: XR },
          { u: YR },
          { u: PAD + (prefix ? 1 : 0) },
          { u: PAD },
          { u: BH },
        ]),
      ],
      grid(rowGroups(workspaceRows, dk / width)),
    );
    const norm = (D: number) =>
      rt.pipeline(
        `fw_norm_rows:${config.qkNorm}:${config.epsRms}:${rowLanes(D)}`,
        () => normRowsShader(config.qkNorm, config.epsRms, rowLanes(D)),
      );
    const rows = (
      src: GPUBuffer,
      n: number,
      p: { T: number; H: number; D: number; R: number; off: number; base: number; normalise: boolean },
    ) => {
      if (n === 0) return;
      const u = rt.uniform([
        { u: n },
        { u: p.T },
        { u: p.H },
        { u: p.D },
        { u: p.R },
        { u: p.off },
        { u: p.base },
        { u: p.normalise ? 1 : 0 },
      ]);
      rt.dispatch(norm(p.D), [ws.buffer, src, u], grid(rowGroups(n, p.D)));
    };
    const c = inputs.carry;
    if (c) {
      if (prefix) {
        rows(gpuBuffer(c.lastKey, "carry.lastKey"), BH, {
          T: 1,
          H: 1,
          D: dk,
          R: XR,
          off: PAD,
          base: xBase,
          normalise: false,
        });
      }
      if (PAD > 0) {
        rows(gpuBuffer(c.windowX, "carry.windowX"), BH * PAD, {
          T: PAD,
          H: 1,
          D: dk,
          R: XR,
          off: 0,
          base: xBase,
          normalise: false,
        });
        rows(gpuBuffer(c.windowY, "carry.windowY"), BH * PAD, {
          T: PAD,
          H: 1,
          D: dv,
          R: YR,
          off: 0,
          base: yBase,
          normalise: false,
        });
      }
    }
    return { ws, ...stepTable() };
  }

  function commonBindings(inputs: FastWeightInputs, ws: GpuTensor, meta: GPUBuffer): GPUBuffer[] {
    return [
      ws.buffer,
      gpuBuffer(inputs.beta, "beta"),
      gpuBuffer(inputs.lambdabar, "lambdabar"),
      meta,
      inputs.s0 ? gpuBuffer(inputs.s0, "s0") : rt.zeroBuffer(),
      inputs.carry ? gpuBuffer(inputs.carry.state, "carry.state") : rt.zeroBuffer(),
    ];
  }

  function uniformOf(inputs: FastWeightInputs, d: FastWeightDims): GPUBuffer {
    return rt.uniform([{ u: d.B }, { u: d.T }, { u: inputs.s0 ? 1 : 0 }, { u: inputs.carry ? 1 : 0 }]);
  }

  function gatherRows(
    dst: GpuTensor,
    src: GpuTensor,
    counts: GPUBuffer,
    p: { H: number; S: number; D: number; R: number; off: number; base: number; BH: number },
  ) {
    const n = p.BH * p.S * p.D;
    if (n === 0) return;
    const pipe = rt.pipeline("fw_gather_rows", gatherRowsShader);
    const u = rt.uniform([
      { u: n },
      { u: p.H },
      { u: p.S },
      { u: p.D },
      { u: p.R },
      { u: p.off },
      { u: p.base },
      { u: 0 },
    ]);
    rt.dispatch(pipe, [dst.buffer, src.buffer, counts, u], grid(Math.ceil(n / 64)));
  }

  return {
    fastWeightForward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      options: ForwardOptions = {},
    ): FastWeightOutputs {
      const ck = formOf(options);
      const d = fastWeightDims(config, inputs);
      const { B, T, H, dk, dv } = d;
      const heads = headConstants(config, H);
      const prep = prepare(config, inputs, d);
      const o = rt.tensor([B, T, H, dv], false);
      const state = rt.tensor([B, H, dk, dv], false);
      let saved: KeptForward | undefined;
      if (usesChunkKernels(config, options)) {
        const keep = options.keepForBackward ?? false;
        const cw = chunk.forward(
          config,
          heads,
          d,
          ck,
          chunkInputs(inputs, prep.ws, prep.meta),
          o,
          state,
          keep,
        );
        if (cw) saved = new KeptForward(keptCallKey(config, d, options), prep.ws, cw, rt.pool);
      } else {
        const shape = shapeOf(config, d, ck);
        const pipe = rt.pipeline(
          recurrentKey("forward", config, shape, heads),
          () => recurrentForwardShader(config, shape, heads),
        );
        rt.dispatch(pipe, [
          ...commonBindings(inputs, prep.ws, prep.meta),
          o.buffer,
          state.buffer,
          uniformOf(inputs, d),
        ], [
          B * H,
        ]);
      }
      // carry: last key feature and the newest window pairs
      const slots = Math.max(0, config.window - 1);
      const lastKey = rt.tensor([B, H, dk], false);
      const windowX = rt.tensor([B, H, slots, dk], true);
      const windowY = rt.tensor([B, H, slots, dv], true);
      const ones = rt.temp(new Int32Array(B).fill(1), "storage");
      const prefix = config.alignment === "prefix";
      gatherRows(lastKey, prep.ws, ones, {
        H,
        S: 1,
        D: dk,
        R: prep.XR,
        off: prep.PAD + T - (prefix ? 0 : 1),
        base: prep.xBase,
        BH: B * H,
      });
      if (isWindowRule(config.rule) && slots > 0) {
        const counts = rt.temp(prep.counts, "storage");
        gatherRows(windowX, prep.ws, counts, {
          H,
          S: slots,
          D: dk,
          R: prep.XR,
          off: T,
          base: prep.xBase,
          BH: B * H,
        });
        gatherRows(windowY, prep.ws, counts, {
          H,
          S: slots,
          D: dv,
          R: prep.YR,
          off: T,
          base: prep.yBase,
          BH: B * H,
        });
      }
      if (!saved) rt.pool.release(prep.ws.buffer);
      const carry: Carry = { state, lastKey, windowX, windowY, windowCount: prep.counts };
      return saved ? { o, carry, saved } : { o, carry };
    },

    fastWeightBackward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      dO: Tensor,
      options: BackwardOptions = {},
    ): FastWeightGrads {
      const ck = formOf(options);
      const s0Grad = options.s0Grad ?? true;
      const d = fastWeightDims(config, inputs);
      const { B, T, H, dk, dv } = d;
      expectShape("dO", dO, [B, T, H, dv]);
      const BH = B * H;
      const heads = headConstants(config, H);
      const kept = keptWorkspaces(options.saved, keptCallKey(config, d, options));
      const prep = prepare(config, inputs, d, kept?.ws ?? null);
      const bw = isPerColumnRule(config.rule) ? dv : 1;
      const gDX = BH * T * dk;
      const gDY = gDX + BH * prep.XR * dk;
      const gDB = gDY + BH * prep.YR * dv;
      const gDLB = gDB + BH * T * bw;
      const gDS0 = gDLB + BH * T;
      const gDC = gDS0 + BH * dk * dv;
      const g = rt.tensor([gDC + BH * dk * dv], true);
      if (usesChunkKernels(config, options)) {
        chunk.backward(
          config,
          heads,
          d,
          ck,
          chunkInputs(inputs, prep.ws, prep.meta),
          gpuBuffer(dO, "dO"),
          g,
          {
            gDX,
            gDY,
            gDB,
            gDLB,
            gDS0,
            gDC,
          },
          kept?.cw ?? null,
          s0Grad,
        );
      } else {
        const shape = shapeOf(config, d, ck);
        const nck = Math.ceil(T / ck);
        const work = rt.tensor([BH * (nck + ck) * dk * dv], false);
        const pipe = rt.pipeline(
          recurrentKey("backward", config, shape, heads),
          () => recurrentBackwardShader(config, shape, heads),
        );
        rt.dispatch(
          pipe,
          [
            ...commonBindings(inputs, prep.ws, prep.meta),
            gpuBuffer(dO, "dO"),
            work.buffer,
            g.buffer,
            uniformOf(inputs, d),
          ],
          [BH],
        );
        rt.pool.release(work.buffer);
      }
      const grads = {
        dq: rt.tensor([B, T, H, dk], false),
        dk: rt.tensor([B, T, H, dk], false),
        dv: rt.tensor([B, T, H, dv], false),
        dbeta: rt.tensor([...inputs.beta.shape], false),
        dlambdabar: rt.tensor([B, T, H], false),
        dCarryState: rt.tensor([B, H, dk, dv], false),
      };
      const prefix = config.alignment === "prefix";
      const n = B * T * H;
      const width = rowWidth(dk, dv);
      const L = rowLanes(dk / width);
      const rowPart = Math.ceil((3 * n) / (64 / L));
      const elementPart = Math.ceil((n * bw + n) / 64);
      rt.dispatch(
        rt.pipeline(
          `fw_gradient_rows:${config.qkNorm}:${config.epsRms}:${L}:${width}`,
          () => gradientRowsShader(config.qkNorm, config.epsRms, L, width),
        ),
        [
          grads.dq.buffer,
          grads.dk.buffer,
          grads.dv.buffer,
          grads.dbeta.buffer,
          grads.dlambdabar.buffer,
          g.buffer,
          gpuBuffer(inputs.q, "q"),
          gpuBuffer(inputs.k, "k"),
          rt.uniform([
            { u: n },
            { u: T },
            { u: H },
            { u: dk },
            { u: dv },
            { u: bw },
            { u: prep.XR },
            { u: prep.YR },
            { u: prep.PAD + (prefix ? 1 : 0) },
            { u: prep.PAD },
            { u: gDX },
            { u: gDY },
            { u: gDB },
            { u: gDLB },
            { u: rowPart },
          ]),
        ],
        grid(rowPart + elementPart),
      );
      const enc = rt.encoder();
      enc.copyBufferToBuffer(g.buffer, gDC * 4, grads.dCarryState.buffer, 0, BH * dk * dv * 4);
      // the recurrent and per-column kernels sum dS0 anyway (the other chunk passes skip it): copied out only when asked for
      const ds0 = s0Grad ? rt.tensor([B, H, dk, dv], false) : null;
      if (ds0) enc.copyBufferToBuffer(g.buffer, gDS0 * 4, ds0.buffer, 0, BH * dk * dv * 4);
      rt.pool.release(prep.ws.buffer);
      rt.pool.release(g.buffer);
      return ds0 ? { ...grads, ds0 } : grads;
    },
  };
}
