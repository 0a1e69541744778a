/**
 * The dense ops of the WASM backend (DenseOps of src/rules/backend.ts): argument checks on the
 * TypeScript side, the work in the kernels of assembly/. GEMM runs on the thread pool (row or
 * column bands: gemm_grid.ts), and so do the element-wise ops, AdamW, RMSNorm, the short
 * convolution, the embedding and the cross-entropy (bands of elements, rows, columns or channels:
 * dense_jobs.ts) once they are large enough; the sum of squares (one float64 sum, in order) and the
 * attention baseline run on the calling thread. No op allocates: the GEMM and dense jobs reuse one parameter block each. Backward ops
 * accumulate into their gradients.
 *
 * @module
 */

import {
  type Activation,
  type AdamWParams,
  type DenseOps,
  guardedGradScale,
  type MatmulOptions,
  type StepGuard,
  type Tensor,
} from "../rules/backend.ts";
import type { WasmContext } from "./context.ts";
import { DENSE_OP, DenseJobs, ELEMENT_ALIGN } from "./dense_jobs.ts";
import { gemmGrid } from "./gemm_grid.ts";

const ACTIVATION_ID: Record<Activation, number> = { sigmoid: 0, softplus: 1, silu: 2 };

/** Number of GEMM parameter-block slots (assembly/gemm.ts G_M .. G_TASKS_N). */
const G_COUNT = 14;

/** Work (multiply-adds) below which GEMM stays on one thread. */
const GEMM_PARALLEL_MIN = 1 << 18;

/**
 * Rough cost of one element in cheap element operations (dense_jobs.ts turns work into threads):
 * an op with an `exp` per element, AdamW's update, and a tap of the short convolution.
 */
const EXP_COST = 8;
const ADAMW_COST = 4;
const CONV_TAP_COST = 2;

function last(t: Tensor): number {
  return t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1];
}

/** Dense ops on the given context. */
export function wasmDenseOps(ctx: WasmContext): DenseOps {
  const ex = ctx.exports as unknown as Record<string, (...a: number[]) => number>;
  const jobs = new DenseJobs(ctx);
  const gemmParams = ctx.heap.alloc(G_COUNT * 8);
  const same = (name: string, ...ts: [Tensor, string][]) => {
    const n = ts[0][0].size;
    for (const [t, label] of ts) {
      if (t.size !== n) throw new RangeError(`${name}: ${label} has ${t.size} elements, expected ${n}`);
    }
    return ts.map(([t, label]) => ctx.ptr(t, `${name}: ${label}`));
  };
  const rowsOf = (name: string, t: Tensor, D: number) => {
    if (D === 0 || t.size % D !== 0) {
      throw new RangeError(`${name}: size ${t.size} is not a multiple of ${D}`);
    }
    return t.size / D;
  };
  const checkIds = (name: string, ids: Int32Array, V: number) => {
    for (let i = 0; i < ids.length; i++) {
      if (!(ids[i] >= 0 && ids[i] < V)) {
        throw new RangeError(`${name}: id ${ids[i]} at ${i} is outside [0, ${V})`);
      }
    }
  };

  const ops: DenseOps = {
    matmul(out: Tensor, a: Tensor, b: Tensor, options: MatmulOptions = {}) {
      const { transA = false, transB = false, accumulate = false } = options;
      let M: number, K: number, N: number;
      let sam: number, sak: number, sbk: number, sbn: number;
      if (!transA) {
        K = last(a);
        M = rowsOf("matmul a", a, K);
        sam = K;
        sak = 1;
      } else {
        M = last(a);
        K = rowsOf("matmul a", a, M);
        sam = 1;
        sak = M;
      }
      if (!transB) {
        N = last(b);
        const kb = rowsOf("matmul b", b, N);
        if (kb !== K) throw new RangeError(`matmul: inner sizes differ (a gives K = ${K}, b has ${kb} rows)`);
        sbk = N;
        sbn = 1;
      } else {
        const kb = last(b);
        if (kb !== K) throw new RangeError(`matmul: inner sizes differ (a gives K = ${K}, b^T has ${kb})`);
        N = rowsOf("matmul b", b, K);
        sbk = 1;
        sbn = K;
      }
      ctx.expectSize(out, M * N, "matmul out");
      const pa = ctx.ptr(a, "matmul a");
      const pb = ctx.ptr(b, "matmul b");
      const pc = ctx.ptr(out, "matmul out");
      const threads = M * N * K >= GEMM_PARALLEL_MIN ? ctx.pool.threads : 1;
      const { tasksM, tasksN } = gemmGrid(M, N, threads);
      const f64 = ctx.heap.f64;
      const base = gemmParams >>> 3;
      const v = [M, N, K, pa, sam, sak, pb, sbk, sbn, pc, N, accumulate ? 1 : 0, tasksM, tasksN];
      for (let i = 0; i < v.length; i++) f64[base + i] = v[i]; // in slot order G.M .. G.TASKS_N
      ctx.pool.run("gemm_f32", gemmParams, tasksM * tasksN, ex.gemmScratchBytes());
    },

    embeddingForward(out: Tensor, table: Tensor, ids: Int32Array) {
      const D = last(table);
      const V = rowsOf("embeddingForward table", table, D);
      ctx.expectSize(out, ids.length * D, "embeddingForward out");
      checkIds("embeddingForward", ids, V);
      const po = ctx.ptr(out, "out");
      const pt = ctx.ptr(table, "table");
      ctx.withHost(
        [ids],
        (pi) => jobs.run(DENSE_OP.EMBEDDING_FORWARD, ids.length, 1, ids.length * D, [po, pt, pi, D]),
      );
    },

    embeddingBackward(dTable: Tensor, dOut: Tensor, ids: Int32Array) {
      const D = last(dTable);
      const V = rowsOf("embeddingBackward dTable", dTable, D);
      ctx.expectSize(dOut, ids.length * D, "embeddingBackward dOut");
      checkIds("embeddingBackward", ids, V);
      const pt = ctx.ptr(dTable, "dTable");
      const po = ctx.ptr(dOut, "dOut");
      const N = ids.length;
      ctx.withHost(
        [ids],
        (pi) => jobs.run(DENSE_OP.EMBEDDING_BACKWARD, D, ELEMENT_ALIGN, N * D, [pt, po, pi, N, D]),
      );
    },

    rmsNormForward(out: Tensor, rstd: Tensor, x: Tensor, weight: Tensor | null, eps: number) {
      const D = last(x);
      const N = rowsOf("rmsNormForward x", x, D);
      const [po, px] = same("rmsNormForward", [out, "out"], [x, "x"]);
      ctx.expectSize(rstd, N, "rmsNormForward rstd");
      if (weight) ctx.expectSize(weight, D, "rmsNormForward weight");
      const pw = weight ? ctx.ptr(weight, "weight") : 0;
      jobs.run(DENSE_OP.RMSNORM_FORWARD, N, 1, N * D * 2, [po, ctx.ptr(rstd, "rstd"), px, pw, D, eps]);
    },

    rmsNormBackward(dx, dWeight, dOut, x, weight, rstd) {
      const D = last(x);
      const N = rowsOf("rmsNormBackward x", x, D);
      const [pdx, pdo, px] = same("rmsNormBackward", [dx, "dx"], [dOut, "dOut"], [x, "x"]);
      ctx.expectSize(rstd, N, "rmsNormBackward rstd");
      if (weight) ctx.expectSize(weight, D, "rmsNormBackward weight");
      if (dWeight) ctx.expectSize(dWeight, D, "rmsNormBackward dWeight");
      const pr = ctx.ptr(rstd, "rstd");
      // dWeight first: it reads dOut and x before the dx pass writes dx (which may be either of them)
      if (dWeight) {
        jobs.run(DENSE_OP.RMSNORM_BACKWARD_WEIGHT, D, 1, N * D * 2, [
          ctx.ptr(dWeight, "dWeight"),
          pdo,
          px,
          pr,
          N,
          D,
        ]);
      }
      const pw = weight ? ctx.ptr(weight, "weight") : 0;
      jobs.run(DENSE_OP.RMSNORM_BACKWARD_INPUT, N, 1, N * D * 3, [pdx, pdo, px, pw, pr, D]);
    },

    swigluForward(out, gate, up) {
      const [po, pg, pu] = same("swigluForward", [out, "out"], [gate, "gate"], [up, "up"]);
      jobs.elements(DENSE_OP.SWIGLU_FORWARD, out.size, EXP_COST, [po, pg, pu]);
    },

    swigluBackward(dGate, dUp, dOut, gate, up) {
      const p = same("swigluBackward", [dGate, "dGate"], [dUp, "dUp"], [dOut, "dOut"], [gate, "gate"], [
        up,
        "up",
      ]);
      jobs.elements(DENSE_OP.SWIGLU_BACKWARD, gate.size, EXP_COST, p);
    },

    activationForward(kind: Activation, out, x, scale) {
      const [po, px] = same("activationForward", [out, "out"], [x, "x"]);
      const id = ACTIVATION_ID[kind];
      if (id === undefined) throw new RangeError(`unknown activation "${kind}"`);
      jobs.elements(DENSE_OP.ACTIVATION_FORWARD, x.size, EXP_COST, [id, po, px, scale]);
    },

    activationBackward(kind: Activation, dx, dOut, x, scale) {
      const [pdx, pdo, px] = same("activationBackward", [dx, "dx"], [dOut, "dOut"], [x, "x"]);
      const id = ACTIVATION_ID[kind];
      if (id === undefined) throw new RangeError(`unknown activation "${kind}"`);
      jobs.elements(DENSE_OP.ACTIVATION_BACKWARD, x.size, EXP_COST, [id, pdx, pdo, px, scale]);
    },

    add(out, a, b) {
      const [po, pa, pb] = same("add", [out, "out"], [a, "a"], [b, "b"]);
      jobs.elements(DENSE_OP.ADD, out.size, 1, [po, pa, pb]);
    },

    mul(out, a, b) {
      const [po, pa, pb] = same("mul", [out, "out"], [a, "a"], [b, "b"]);
      jobs.elements(DENSE_OP.MUL, out.size, 1, [po, pa, pb]);
    },

    axpy(y, x, alpha) {
      const [py, px] = same("axpy", [y, "y"], [x, "x"]);
      jobs.elements(DENSE_OP.AXPY, y.size, 1, [py, px, alpha]);
    },

    fill(x, value) {
      jobs.elements(DENSE_OP.FILL, x.size, 1, [ctx.ptr(x, "fill x"), value]);
    },

    shortConvForward(out, x, weight, starts) {
      if (x.shape.length !== 3) {
        throw new RangeError(`shortConvForward: x must be [B, T, C], got [${x.shape}]`);
      }
      const [B, T, C] = x.shape;
      const W = last(weight);
      ctx.expectSize(weight, C * W, "shortConvForward weight");
      const [po, px] = same("shortConvForward", [out, "out"], [x, "x"]);
      if (starts && starts.length !== B * T) {
        throw new RangeError(`starts has length ${starts.length}, expected ${B * T}`);
      }
      const pw = ctx.ptr(weight, "weight");
      ctx.withHost(
        [starts],
        (ps) =>
          jobs.run(
            DENSE_OP.SHORTCONV_FORWARD,
            C,
            1,
            B * T * C * W * CONV_TAP_COST,
            [po, px, pw, ps, B, T, C, W],
            ex.shortconvScratchBytes(C, W),
          ),
      );
    },

    shortConvBackward(dx, dWeight, dOut, x, weight, starts) {
      if (x.shape.length !== 3) {
        throw new RangeError(`shortConvBackward: x must be [B, T, C], got [${x.shape}]`);
      }
      const [B, T, C] = x.shape;
      const W = last(weight);
      ctx.expectSize(weight, C * W, "shortConvBackward weight");
      ctx.expectSize(dWeight, C * W, "shortConvBackward dWeight");
      const [pdx, pdo, px] = same("shortConvBackward", [dx, "dx"], [dOut, "dOut"], [x, "x"]);
      if (starts && starts.length !== B * T) {
        throw new RangeError(`starts has length ${starts.length}, expected ${B * T}`);
      }
      const args = [pdx, ctx.ptr(dWeight, "dWeight"), pdo, px, ctx.ptr(weight, "weight")];
      ctx.withHost(
        [starts],
        (ps) =>
          jobs.run(
            DENSE_OP.SHORTCONV_BACKWARD,
            C,
            1,
            B * T * C * W * 2 * CONV_TAP_COST,
            [...args, ps, B, T, C, W],
            ex.shortconvScratchBytes(C, W),
          ),
      );
    },

    crossEntropyForward(losses, logits, targets, weights) {
      const V = last(logits);
      const N = rowsOf("crossEntropyForward logits", logits, V);
      ctx.expectSize(losses, N, "crossEntropyForward losses");
      if (targets.length !== N || weights.length !== N) {
        throw new RangeError(
          `crossEntropyForward: targets/weights need ${N} entries, got ${targets.length}/${weights.length}`,
        );
      }
      checkIds("crossEntropyForward targets", targets, V);
      const args = [ctx.ptr(losses, "losses"), ctx.ptr(logits, "logits")];
      ctx.withHost(
        [targets, weights],
        (pt, pw) => jobs.run(DENSE_OP.CROSS_ENTROPY_FORWARD, N, 1, N * V * EXP_COST, [...args, pt, pw, V]),
      );
    },

    crossEntropyBackward(dLogits, logits, targets, weights) {
      const V = last(logits);
      const N = rowsOf("crossEntropyBackward logits", logits, V);
      const [pd, pl] = same("crossEntropyBackward", [dLogits, "dLogits"], [logits, "logits"]);
      if (targets.length !== N || weights.length !== N) {
        throw new RangeError(
          `crossEntropyBackward: targets/weights need ${N} entries, got ${targets.length}/${weights.length}`,
        );
      }
      checkIds("crossEntropyBackward targets", targets, V);
      ctx.withHost(
        [targets, weights],
        (pt, pw) =>
          jobs.run(DENSE_OP.CROSS_ENTROPY_BACKWARD, N, 1, N * V * 2 * EXP_COST, [pd, pl, pt, pw, V]),
      );
    },

    attentionForward(out, lse, q, k, v, ropeBase, starts) {
      if (q.shape.length !== 4) {
        throw new RangeError(`attentionForward: q must be [B, T, H, D], got [${q.shape}]`);
      }
      const [B, T, H, D] = q.shape;
      if (D % 2 !== 0) throw new RangeError(`attention: head size D must be even for RoPE, got ${D}`);
      const [po, pq, pk, pv] = same("attentionForward", [out, "out"], [q, "q"], [k, "k"], [v, "v"]);
      ctx.expectSize(lse, B * T * H, "attentionForward lse");
      if (starts && starts.length !== B * T) {
        throw new RangeError(`starts has length ${starts.length}, expected ${B * T}`);
      }
      const scratch = ctx.pool.mainScratch(4 * (4 * T * D + T + D) + 64);
      ctx.withHost(
        [starts],
        (ps) =>
          ex.attention_forward_f32(po, ctx.ptr(lse, "lse"), pq, pk, pv, B, T, H, D, ropeBase, ps, scratch),
      );
    },

    attentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, ropeBase, starts) {
      if (q.shape.length !== 4) {
        throw new RangeError(`attentionBackward: q must be [B, T, H, D], got [${q.shape}]`);
      }
      const [B, T, H, D] = q.shape;
      const p = same(
        "attentionBackward",
        [dq, "dq"],
        [dk, "dk"],
        [dv, "dv"],
        [dOut, "dOut"],
        [out, "out"],
        [q, "q"],
        [k, "k"],
        [v, "v"],
      );
      ctx.expectSize(lse, B * T * H, "attentionBackward lse");
      if (starts && starts.length !== B * T) {
        throw new RangeError(`starts has length ${starts.length}, expected ${B * T}`);
      }
      const scratch = ctx.pool.mainScratch(4 * (4 * T * D + T + D) + 64);
      ctx.withHost(
        [starts],
        (ps) =>
          ex.attention_backward_f32(
            p[0],
            p[1],
            p[2],
            p[3],
            p[4],
            ctx.ptr(lse, "lse"),
            p[5],
            p[6],
            p[7],
            B,
            T,
            H,
            D,
            ropeBase,
            ps,
            scratch,
          ),
      );
    },

    adamw(param, grad, m, v, params: AdamWParams, decay: boolean, guard?: StepGuard) {
      const [pp, pg, pm, pv] = same("adamw", [param, "param"], [grad, "grad"], [m, "m"], [v, "v"]);
      if (!(Number.isInteger(params.step) && params.step >= 1)) {
        throw new RangeError(`adamw: step must be an integer >= 1, got ${params.step}`);
      }
      let gradScale = params.gradScale;
      if (guard) {
        const stats = ctx.ptr(guard.stats, "adamw guard.stats") >>> 2;
        const halted = ctx.ptr(guard.halted, "adamw guard.halted") >>> 2;
        const f32 = ctx.heap.f32;
        const scale = guardedGradScale(f32[stats], f32[stats + 1], f32[halted], guard, params.gradScale);
        if (scale === null) {
          f32[halted] = 1;
          return;
        }
        gradScale = scale;
      }
      jobs.elements(DENSE_OP.ADAMW, param.size, ADAMW_COST, [
        pp,
        pg,
        pm,
        pv,
        params.lr,
        params.beta1,
        params.beta2,
        params.eps,
        decay ? params.weightDecay : 0,
        params.step,
        gradScale,
      ]);
    },

    sumSquares(x) {
      return Promise.resolve(ex.sumsq_f32(ctx.ptr(x, "sumSquares x"), x.size));
    },

    accumulateSum(out, index, xs, squares) {
      const o = ctx.ptr(out, "accumulateSum out") >>> 2;
      if (!Number.isInteger(index) || index < 0 || index >= out.size) {
        throw new RangeError(`accumulateSum: index ${index} is outside out's ${out.size} elements`);
      }
      for (const x of xs) {
        const px = ctx.ptr(x, "accumulateSum x");
        let s = 0;
        if (squares) s = ex.sumsq_f32(px, x.size);
        else for (const value of ctx.heap.f32.subarray(px >>> 2, (px >>> 2) + x.size)) s += value;
        ctx.heap.f32[o + index] += s;
      }
    },
  };
  return ops;
}
