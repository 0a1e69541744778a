/**
 * The fast-weight ops of the WASM backend: fills the kernels' parameter block (layout generated from
 * assembly/fw_params.ts) and runs `fw_forward_f32` / `fw_backward_f32` with one task per (batch row,
 * head) on the thread pool.
 *
 * Forms: `chunk` and `parallel` run the chunk-parallel kernel (assembly/fw_chunk.ts, chunks of
 * `chunkSize` positions, default 64) for every rule: the rules with one scalar coefficient per step
 * (falcon1, falcon1a, linear, retnet, mamba2, deltanet, gated_deltanet), the per-column
 * falcon2/falcon2a (assembly/fw_chunk_per_column.ts) and the window rules falcon3a
 * (assembly/fw_chunk_window_additive.ts) and falcon3 (assembly/fw_chunk_window_delta.ts); `recurrent` runs the
 * recurrent kernels, whose backward stores a checkpoint every `chunkSize` positions and recomputes
 * inside each chunk.
 * All forms agree mathematically (SPEC section 4), so results match every form of the reference.
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
  Tensor,
} from "../rules/backend.ts";
import { type Form, isPerColumnRule, retnetDecay, type RuleConfig, wasmRuleId } from "../rules/config.ts";
import { chunkSizeOf as validChunkSize, fastWeightDims, formOf } from "../rules/validate.ts";
import { FW_PARAM } from "./_generated_wasm.ts";
import type { WasmContext } from "./context.ts";

const QK_NORM_ID = { rms: 0, l2: 1, none: 2 } as const;

/** The chunk size of a call, after checking its form and chunk size (src/rules/validate.ts). */
function chunkSizeOf(options: FormOptions): number {
  formOf(options);
  return validChunkSize(options);
}

/** Whether a call runs the chunk-parallel kernel: a chunked form (`chunk` or `parallel`), any rule. */
export function usesChunkKernel(_config: RuleConfig, form: Form = "recurrent"): boolean {
  return form !== "recurrent";
}

/** The scratch mode of fwScratchBytes: 0 recurrent, 1 chunk-parallel, 2 chunk-parallel falcon3. */
function chunkMode(config: RuleConfig, chunked: boolean): number {
  return chunked ? (config.rule === "falcon3" ? 2 : 1) : 0;
}

/** Fast-weight ops on the given context. */
export function wasmFastWeightOps(ctx: WasmContext): FastWeightOps {
  /**
   * Allocate and fill the common part of a parameter block. One heap block holds the float64 slots and,
   * after them, the small per-call arrays the kernels read or write (so a call allocates one block, not
   * four): per-head mamba `A` and retnet decay (float32, H each), the carried window counts and the
   * output window counts (int32, B each) and the sequence starts (B * T bytes).
   */
  function common(config: RuleConfig, inputs: FastWeightInputs, chunk: number, chunked: boolean) {
    const dims = fastWeightDims(config, inputs);
    const { B, T, H, dk, dv } = dims;
    const slots = Math.max(0, config.window - 1);
    const carry = inputs.carry;
    if (carry) {
      const wx = B * H * slots * dk;
      const wy = B * H * slots * dv;
      if (carry.windowX.size !== wx) {
        throw new RangeError(
          `carry.windowX has shape [${carry.windowX.shape}], expected [${[B, H, slots, dk]}]`,
        );
      }
      if (carry.windowY.size !== wy) {
        throw new RangeError(
          `carry.windowY has shape [${carry.windowY.shape}], expected [${[B, H, slots, dv]}]`,
        );
      }
      if (carry.windowCount.length !== B) {
        throw new RangeError(`carry.windowCount has length ${carry.windowCount.length}, expected B = ${B}`);
      }
    }
    const starts = inputs.starts;
    const slotBytes = FW_PARAM.COUNT * 8;
    const mambaAt = slotBytes;
    const retnetAt = mambaAt + 4 * H;
    const carryCountAt = retnetAt + 4 * H;
    const outCountAt = carryCountAt + 4 * B;
    const startsAt = outCountAt + 4 * B;
    const heap = ctx.heap;
    const params = heap.alloc(startsAt + (starts ? starts.length : 0));
    const f64 = heap.f64;
    const f32 = heap.f32;
    const i32 = heap.i32;
    const base = params >>> 3;
    f64.fill(0, base, base + FW_PARAM.COUNT);
    const set = (slot: number, v: number) => (f64[base + slot] = v);
    set(FW_PARAM.RULE, wasmRuleId(config.rule));
    set(FW_PARAM.ALIGN, config.alignment === "prefix" ? 0 : 1);
    set(FW_PARAM.QKNORM, QK_NORM_ID[config.qkNorm]);
    set(FW_PARAM.COUPLING, config.coupling ? 1 : 0);
    set(FW_PARAM.WINDOW, config.window);
    set(FW_PARAM.EPS, config.eps);
    set(FW_PARAM.EPS_GAMMA, config.epsGamma);
    set(FW_PARAM.EPS_RMS, config.epsRms);
    set(FW_PARAM.B, B);
    set(FW_PARAM.T, T);
    set(FW_PARAM.H, H);
    set(FW_PARAM.DK, dk);
    set(FW_PARAM.DV, dv);
    set(FW_PARAM.BETA_W, isPerColumnRule(config.rule) ? dv : 1);
    set(FW_PARAM.Q, ctx.ptr(inputs.q, "q"));
    set(FW_PARAM.K, ctx.ptr(inputs.k, "k"));
    set(FW_PARAM.V, ctx.ptr(inputs.v, "v"));
    set(FW_PARAM.BETA, ctx.ptr(inputs.beta, "beta"));
    set(FW_PARAM.LAMBDA, ctx.ptr(inputs.lambdabar, "lambdabar"));
    if (starts) {
      heap.u8.set(starts, params + startsAt);
      set(FW_PARAM.STARTS, params + startsAt);
    }
    if (inputs.s0) set(FW_PARAM.S0, ctx.ptr(inputs.s0, "s0"));
    if (carry) {
      set(FW_PARAM.HAS_CARRY, 1);
      set(FW_PARAM.C_STATE, ctx.ptr(carry.state, "carry.state"));
      set(FW_PARAM.C_LASTKEY, ctx.ptr(carry.lastKey, "carry.lastKey"));
      set(FW_PARAM.C_WX, ctx.ptr(carry.windowX, "carry.windowX"));
      set(FW_PARAM.C_WY, ctx.ptr(carry.windowY, "carry.windowY"));
      for (let b = 0; b < B; b++) i32[((params + carryCountAt) >>> 2) + b] = carry.windowCount[b];
      set(FW_PARAM.C_COUNT, params + carryCountAt);
    }
    for (let h = 0; h < H; h++) {
      f32[((params + mambaAt) >>> 2) + h] = config.mambaA?.[h] ?? 1;
      f32[((params + retnetAt) >>> 2) + h] = retnetDecay(config.retnetHeads?.[h] ?? h);
    }
    set(FW_PARAM.MAMBA_A, params + mambaAt);
    set(FW_PARAM.RETNET_G, params + retnetAt);
    set(FW_PARAM.OUT_COUNT, params + outCountAt);
    set(FW_PARAM.CHUNK, chunk);
    set(FW_PARAM.FORM, chunked ? 1 : 0);
    const free = () => heap.free(params);
    return { dims, slots, params, set, free, outCount: params + outCountAt };
  }

  return {
    fastWeightForward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      options: FormOptions = {},
    ): FastWeightOutputs {
      const chunk = chunkSizeOf(options);
      const chunked = usesChunkKernel(config, options.form);
      const { dims, slots, params, set, free, outCount } = common(config, inputs, chunk, chunked);
      const { B, T, H, dk, dv } = dims;
      const o = ctx.alloc([B, T, H, dv]);
      const state = ctx.alloc([B, H, dk, dv]);
      const lastKey = ctx.alloc([B, H, dk]);
      const windowX = ctx.alloc([B, H, slots, dk]);
      const windowY = ctx.alloc([B, H, slots, dv]);
      try {
        set(FW_PARAM.O, o.ptr);
        set(FW_PARAM.OUT_STATE, state.ptr);
        set(FW_PARAM.OUT_LASTKEY, lastKey.ptr);
        set(FW_PARAM.OUT_WX, windowX.ptr);
        set(FW_PARAM.OUT_WY, windowY.ptr);
        const scratch = ctx.exports.fwScratchBytes(
          T,
          dk,
          dv,
          config.window,
          chunk,
          0,
          chunkMode(config, chunked),
        );
        ctx.pool.run("fw_forward_f32", params, B * H, scratch);
        const windowCount = H > 0
          ? ctx.heap.i32.slice(outCount >>> 2, (outCount >>> 2) + B)
          : new Int32Array(B);
        const carry: Carry = { state, lastKey, windowX, windowY, windowCount };
        return { o, carry };
      } finally {
        free();
      }
    },

    fastWeightBackward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      dO: Tensor,
      options: BackwardOptions = {},
    ): FastWeightGrads {
      const chunk = chunkSizeOf(options);
      const chunked = usesChunkKernel(config, options.form);
      const { dims, params, set, free } = common(config, inputs, chunk, chunked);
      const { B, T, H, dk, dv } = dims;
      let ds0Scratch = 0;
      try {
        ctx.expectSize(dO, B * T * H * dv, "dO");
        set(FW_PARAM.DO, ctx.ptr(dO, "dO"));
        const grads = {
          dq: ctx.alloc([B, T, H, dk]),
          dk: ctx.alloc([B, T, H, dk]),
          dv: ctx.alloc([B, T, H, dv]),
          dbeta: ctx.alloc([...inputs.beta.shape]),
          dlambdabar: ctx.alloc([B, T, H]),
          dCarryState: ctx.alloc([B, H, dk, dv]),
        };
        // the kernels write dS0 anyway: into a block of its own, or one freed after the call
        const ds0 = (options.s0Grad ?? true) ? ctx.alloc([B, H, dk, dv]) : null;
        ds0Scratch = ds0 ? 0 : ctx.heap.alloc(B * H * dk * dv * 4);
        set(FW_PARAM.DQ, grads.dq.ptr);
        set(FW_PARAM.DK_, grads.dk.ptr);
        set(FW_PARAM.DV_, grads.dv.ptr);
        set(FW_PARAM.DBETA, grads.dbeta.ptr);
        set(FW_PARAM.DLAMBDA, grads.dlambdabar.ptr);
        set(FW_PARAM.DS0, ds0?.ptr ?? ds0Scratch);
        set(FW_PARAM.DCARRY, grads.dCarryState.ptr);
        const scratch = ctx.exports.fwScratchBytes(
          T,
          dk,
          dv,
          config.window,
          chunk,
          1,
          chunkMode(config, chunked),
        );
        ctx.pool.run("fw_backward_f32", params, B * H, scratch);
        return ds0 ? { ...grads, ds0 } : grads;
      } finally {
        if (ds0Scratch !== 0) ctx.heap.free(ds0Scratch);
        free();
      }
    },
  };
}
