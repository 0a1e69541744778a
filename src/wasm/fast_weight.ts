/**
 * The fast-weight ops of the WASM backend: fills the kernels' parameter block (layout generated from
 * assembly/fw_params.ts) and runs `fw_forward_f32` / `fw_backward_f32` with one task per (batch row,
 * head) on the thread pool.
 *
 * Forms: `chunk` and `parallel` run the chunk-parallel kernel (assembly/fw_chunk.ts, chunks of
 * `chunkSize` positions, default 64) for every rule: the rules with one scalar coefficient per step
 * (falcon1, falcon1a, linear, retnet, mamba2, deltanet, gated_deltanet), the per-column
 * falcon2/falcon2a (assembly/fw_chunk_column.ts) and the window rules falcon3a
 * (assembly/fw_chunk_window.ts) and falcon3 (assembly/fw_chunk_window_reg.ts); `recurrent` runs the
 * recurrent kernels, whose backward stores a checkpoint every `chunkSize` positions and recomputes
 * inside each chunk.
 * All forms agree mathematically (SPEC section 4), so results match every form of the reference.
 *
 * @module
 */

import type {
  Carry,
  FastWeightGrads,
  FastWeightInputs,
  FastWeightOps,
  FastWeightOutputs,
  FormOptions,
  Tensor,
} from "../rules/backend.ts";
import { type Form, FORMS, isPerColumnRule, retnetDecay, type RuleConfig, RULES } from "../rules/config.ts";
import { fastWeightDims } from "../rules/reference/fast_weight.ts";
import { FW_PARAM } from "./_generated_wasm.ts";
import type { WasmContext } from "./context.ts";

const QK_NORM_ID = { rms: 0, l2: 1, none: 2 } as const;

function chunkSizeOf(options: FormOptions): number {
  const c = options.chunkSize ?? 64;
  if (!Number.isInteger(c) || c < 1) throw new RangeError(`chunkSize must be an integer >= 1, got ${c}`);
  const form = options.form ?? "recurrent";
  if (!(FORMS as readonly string[]).includes(form)) {
    throw new RangeError(`unknown form "${form}"; expected ${FORMS.join(", ")}`);
  }
  return c;
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
  /** Allocate and fill the common part of a parameter block; returns [params, temporaries to free]. */
  function common(config: RuleConfig, inputs: FastWeightInputs, chunk: number, chunked: boolean) {
    const dims = fastWeightDims(config, inputs);
    const { B, T, H, dk, dv } = dims;
    const slots = Math.max(0, config.window - 1);
    if (inputs.carry) {
      const c = inputs.carry;
      for (
        const [name, t, shape] of [
          ["carry.windowX", c.windowX, [B, H, slots, dk]],
          ["carry.windowY", c.windowY, [B, H, slots, dv]],
        ] as const
      ) {
        if (t.size !== shape.reduce((a, b) => a * b, 1)) {
          throw new RangeError(`${name} has shape [${t.shape}], expected [${shape}]`);
        }
      }
      if (c.windowCount.length !== B) {
        throw new RangeError(`carry.windowCount has length ${c.windowCount.length}, expected B = ${B}`);
      }
    }
    const heap = ctx.heap;
    const temps: number[] = [];
    const params = heap.alloc(FW_PARAM.COUNT * 8);
    temps.push(params);
    const f64 = heap.f64;
    const base = params >>> 3;
    f64.fill(0, base, base + FW_PARAM.COUNT);
    const set = (slot: number, v: number) => (f64[base + slot] = v);
    set(FW_PARAM.RULE, RULES.indexOf(config.rule));
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
    const host = (bytes: Uint8Array) => {
      const p = heap.alloc(bytes.byteLength);
      heap.u8.set(bytes, p);
      temps.push(p);
      return p;
    };
    if (inputs.starts) set(FW_PARAM.STARTS, host(inputs.starts));
    if (inputs.s0) set(FW_PARAM.S0, ctx.ptr(inputs.s0, "s0"));
    if (inputs.carry) {
      const c = inputs.carry;
      set(FW_PARAM.HAS_CARRY, 1);
      set(FW_PARAM.C_STATE, ctx.ptr(c.state, "carry.state"));
      set(FW_PARAM.C_LASTKEY, ctx.ptr(c.lastKey, "carry.lastKey"));
      set(FW_PARAM.C_WX, ctx.ptr(c.windowX, "carry.windowX"));
      set(FW_PARAM.C_WY, ctx.ptr(c.windowY, "carry.windowY"));
      set(FW_PARAM.C_COUNT, host(new Uint8Array(Int32Array.from(c.windowCount).buffer)));
    }
    const mamba = new Float32Array(H);
    const retnet = new Float32Array(H);
    for (let h = 0; h < H; h++) {
      mamba[h] = config.mambaA?.[h] ?? 1;
      retnet[h] = retnetDecay(config.retnetHeads?.[h] ?? h);
    }
    set(FW_PARAM.MAMBA_A, host(new Uint8Array(mamba.buffer)));
    set(FW_PARAM.RETNET_G, host(new Uint8Array(retnet.buffer)));
    set(FW_PARAM.CHUNK, chunk);
    set(FW_PARAM.FORM, chunked ? 1 : 0);
    const free = () => temps.forEach((p) => heap.free(p));
    return { dims, slots, params, set, free };
  }

  return {
    fastWeightForward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      options: FormOptions = {},
    ): FastWeightOutputs {
      const chunk = chunkSizeOf(options);
      const chunked = usesChunkKernel(config, options.form);
      const { dims, slots, params, set, free } = common(config, inputs, chunk, chunked);
      const { B, T, H, dk, dv } = dims;
      const o = ctx.alloc([B, T, H, dv]);
      const state = ctx.alloc([B, H, dk, dv]);
      const lastKey = ctx.alloc([B, H, dk]);
      const windowX = ctx.alloc([B, H, slots, dk]);
      const windowY = ctx.alloc([B, H, slots, dv]);
      const count = ctx.heap.alloc(4 * B);
      try {
        set(FW_PARAM.O, o.ptr);
        set(FW_PARAM.OUT_STATE, state.ptr);
        set(FW_PARAM.OUT_LASTKEY, lastKey.ptr);
        set(FW_PARAM.OUT_WX, windowX.ptr);
        set(FW_PARAM.OUT_WY, windowY.ptr);
        set(FW_PARAM.OUT_COUNT, count);
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
        const windowCount = H > 0 ? ctx.heap.i32.slice(count >>> 2, (count >>> 2) + B) : new Int32Array(B);
        const carry: Carry = { state, lastKey, windowX, windowY, windowCount };
        return { o, carry };
      } finally {
        ctx.heap.free(count);
        free();
      }
    },

    fastWeightBackward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      dO: Tensor,
      options: FormOptions = {},
    ): FastWeightGrads {
      const chunk = chunkSizeOf(options);
      const chunked = usesChunkKernel(config, options.form);
      const { dims, params, set, free } = common(config, inputs, chunk, chunked);
      const { B, T, H, dk, dv } = dims;
      try {
        ctx.expectSize(dO, B * T * H * dv, "dO");
        set(FW_PARAM.DO, ctx.ptr(dO, "dO"));
        const grads = {
          dq: ctx.alloc([B, T, H, dk]),
          dk: ctx.alloc([B, T, H, dk]),
          dv: ctx.alloc([B, T, H, dv]),
          dbeta: ctx.alloc([...inputs.beta.shape]),
          dlambdabar: ctx.alloc([B, T, H]),
          ds0: ctx.alloc([B, H, dk, dv]),
          dCarryState: ctx.alloc([B, H, dk, dv]),
        };
        set(FW_PARAM.DQ, grads.dq.ptr);
        set(FW_PARAM.DK_, grads.dk.ptr);
        set(FW_PARAM.DV_, grads.dv.ptr);
        set(FW_PARAM.DBETA, grads.dbeta.ptr);
        set(FW_PARAM.DLAMBDA, grads.dlambdabar.ptr);
        set(FW_PARAM.DS0, grads.ds0.ptr);
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
        return grads;
      } finally {
        free();
      }
    },
  };
}
