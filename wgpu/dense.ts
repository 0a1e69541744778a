/**
 * The dense ops of the `webgpu` backend (float32): GEMM, element-wise ops, RMSNorm, SwiGLU,
 * activations, short convolution, cross-entropy, embedding, AdamW, sum of squares and softmax
 * attention. Every `...Backward` accumulates into its gradients.
 *
 * @module
 */

import type {
  Activation,
  AdamWParams,
  AdamWSlot,
  DenseOps,
  FusedDenseOp,
  MatmulOptions,
  StepGuard,
  Tensor,
} from "../src/rules/backend.ts";
import { type Binding, type GpuRuntime, grid } from "./runtime.ts";
import { gpuBinding, liveTensor } from "./tensor.ts";
import { createMultiTensorOps, partialSumGroups } from "./multi_tensor.ts";
import { createDeferredSliceSums } from "./deferred_sums.ts";
import {
  activationShader,
  adamwShader,
  axpyShader,
  binaryShader,
  ELEMENTWISE_WG,
  fillShader,
  swigluBackwardShader,
  swigluForwardShader,
} from "./shaders/elementwise.ts";
import {
  MATMUL_PRECISIONS,
  matmulKey,
  type MatmulPrecision,
  matmulShader,
  matmulTile,
  type MatmulVariant,
} from "./shaders/matmul.ts";
import {
  addRmsNormForwardShader,
  crossEntropyShader,
  finishSumShader,
  rmsNormBackwardShader,
  rmsNormForwardShader,
  rmsNormWeightGradShader,
  sumSquaresShader,
} from "./shaders/rows.ts";
import {
  embeddingBackwardShader,
  embeddingForwardShader,
  shortConvForwardShader,
  shortConvInputGradShader,
  shortConvPreGradShader,
  shortConvWeightGradShader,
} from "./shaders/sequence.ts";
import { ROWS_PER_SLICE, SLICE_SUM_WG, sliceSumShader } from "./shaders/slices.ts";
import { createAttentionOps } from "./attention.ts";

function sameSize(op: string, ...ts: [string, Tensor][]): number {
  const n = ts[0][1].size;
  for (const [name, t] of ts) {
    if (t.size !== n) throw new RangeError(`${op}: ${name} has ${t.size} elements, expected ${n}`);
  }
  return n;
}

/** Rows `N` and row length `D` of an RMSNorm over `x`, with `rstd` (one per row) and `weight` (`D`) checked. */
function normRows(op: string, x: Tensor, rstd: Tensor, weight: Tensor | null): { N: number; D: number } {
  const D = x.shape[x.shape.length - 1];
  const N = x.size / D;
  if (rstd.size !== N) throw new RangeError(`${op}: rstd has ${rstd.size} elements, expected ${N}`);
  if (weight && weight.size !== D) throw new RangeError(`${op}: weight has ${weight.size}, expected ${D}`);
  return { N, D };
}

/** Sizes `M, N, K` of a matmul, checked. */
export function matmulDims(out: Tensor, a: Tensor, b: Tensor, o: MatmulOptions): [number, number, number] {
  if (out.shape.length < 1) throw new RangeError("matmul: out must have at least one dimension");
  const N = out.shape[out.shape.length - 1];
  const M = N === 0 ? 0 : out.size / N;
  const K = o.transA ? (M === 0 ? 0 : a.size / M) : a.shape[a.shape.length - 1];
  if (!Number.isInteger(K) || a.size !== M * K) {
    throw new RangeError(`matmul: a has shape [${a.shape}], which does not give ${M} rows of output`);
  }
  if (b.size !== K * N) {
    throw new RangeError(`matmul: b has shape [${b.shape}] (${b.size} elements), expected ${K}x${N}`);
  }
  return [M, N, K];
}

/** Latest sequence start `<= t` for each `(b, t)` (0 when none): `[B * T]`. */
export function segmentStarts(B: number, T: number, starts?: Uint8Array): Int32Array {
  const seg = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    let s = 0;
    for (let t = 0; t < T; t++) {
      if (starts?.[b * T + t]) s = t;
      seg[b * T + t] = s;
    }
  }
  return seg;
}

/** Fewest 128 x 128 output tiles for which the GEMM uses its big register tiles. */
export const BIG_TILE_MIN_TILES = 128;

/** Output tiles below which a long contraction is split over several workgroups (split-K). */
export const SPLIT_K_MAX_TILES = 64;

/** Shortest `K` that is split. */
export const SPLIT_K_MIN_DEPTH = 512;

/**
 * How a GEMM with `tiles` output tiles and contraction `K` splits `K` (slices of a multiple of `bk`):
 * `{ slices: 1 }` when the output alone fills the device or `K` is short; otherwise enough slices for
 * about 256 workgroups, each at least 128 deep.
 */
export function splitKPlan(tiles: number, K: number, bk: number): { slices: number; depth: number } {
  if (tiles >= SPLIT_K_MAX_TILES || K < SPLIT_K_MIN_DEPTH) return { slices: 1, depth: K };
  const wanted = Math.min(Math.floor(K / 128), Math.ceil(256 / tiles));
  const depth = Math.ceil(K / wanted / bk) * bk;
  return { slices: Math.ceil(K / depth), depth };
}

/** Options of {@linkcode createDenseOps}. */
export interface DenseOpsOptions {
  /**
   * Arithmetic of `matmul`'s products: `f32` (default) or `f16` (f16 operands and slice sums, f32
   * totals: `shaders/matmul.ts`); `f16` needs the device feature `shader-f16`.
   */
  readonly matmulPrecision?: MatmulPrecision;
}

/** The precision to run, or a RangeError naming the option, the value and the missing feature. */
export function checkMatmulPrecision(device: GPUDevice, precision: string): MatmulPrecision {
  if (!(MATMUL_PRECISIONS as readonly string[]).includes(precision)) {
    throw new RangeError(`matmulPrecision "${precision}": expected one of ${MATMUL_PRECISIONS.join(", ")}`);
  }
  if (precision === "f16" && !device.features.has("shader-f16")) {
    throw new RangeError(
      'matmulPrecision "f16" needs the WebGPU feature "shader-f16", which this adapter does not have; use "f32"',
    );
  }
  return precision as MatmulPrecision;
}

/** The dense ops of the `webgpu` backend, with the optional multi-tensor AdamW and fused ops. */
export type WebGpuDenseOps = DenseOps & Required<Pick<DenseOps, "adamwMany" | FusedDenseOp>>;

/** The dense ops on a runtime. */
export function createDenseOps(rt: GpuRuntime, options: DenseOpsOptions = {}): WebGpuDenseOps {
  const precision = checkMatmulPrecision(rt.device, options.matmulPrecision ?? "f32");
  const elementwise = (
    key: string,
    code: () => string,
    buffers: Binding[],
    n: number,
    extra: number[] = [],
    words: { u: number }[] = [],
  ) => {
    if (n === 0) return;
    const u = rt.uniform([{ u: n }, ...extra.map((f) => ({ f })), ...words]);
    rt.dispatch(rt.pipeline(key, code), [...buffers, u], grid(Math.ceil(n / ELEMENTWISE_WG)));
  };
  const buf = gpuBinding;

  /**
   * Whether the next dispatch may write `out` as over zeros: a zero-fill of exactly `out` is pending
   * and none of `inputs` shares its buffer; the fill is then dropped ({@linkcode GpuRuntime.takeClear}),
   * and the caller must record that dispatch next. Tensors of a block keep their fills (a block's
   * fills merge into one clear).
   */
  const fresh = (out: Tensor, ...inputs: (Tensor | null)[]): boolean => {
    const t = liveTensor(out);
    if (t.block || out.size === 0) return false;
    for (const x of inputs) if (x && liveTensor(x).buffer === t.buffer) return false;
    return rt.takeClear(t.buffer, t.offset, out.size * 4) ||
      (t.offset === 0 && rt.takeClear(t.buffer, 0, t.buffer.size));
  };
  const flag = (b: boolean) => ({ u: b ? 1 : 0 });

  /**
   * The storage buffer of AdamW's per-step values `[lr, c1, c2, gradScale, normScale]`: rewritten only
   * when they change (once per training step), after the commands recorded so far (`rt.write` submits
   * them first, so earlier updates read the earlier values).
   */
  let hyperBuffer: GPUBuffer | null = null;
  let hyperValues = new Float32Array(0);
  const adamHyper = (values: number[]): GPUBuffer => {
    const next = Float32Array.from(values);
    if (!hyperBuffer) {
      hyperBuffer = rt.device.createBuffer({
        size: 32,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
      });
    }
    if (next.length !== hyperValues.length || next.some((x, i) => x !== hyperValues[i])) {
      rt.write(hyperBuffer, next);
      hyperValues = next;
    }
    return hyperBuffer;
  };

  /** `out (+)= sum over the S slices of partial[S, n]` (the second pass of every sliced reduction). */
  const sliceSum = (out: Binding, partial: GPUBuffer, n: number, S: number, accumulate: boolean) => {
    const u = rt.uniform([{ u: n }, { u: S }, { u: accumulate ? 1 : 0 }]);
    rt.dispatch(
      rt.pipeline("slice_sum_f32", sliceSumShader),
      [out, partial, u],
      grid(Math.ceil(n / SLICE_SUM_WG)),
    );
  };

  const multi = createMultiTensorOps(rt, adamHyper);
  const heldSums = createDeferredSliceSums(rt);
  /** `out (+)= sum of the S slices of partial[S, n]` that `produce` writes (held back for gradients of a block). */
  const slicedInto = (
    out: Tensor,
    name: string,
    n: number,
    S: number,
    accumulate: boolean,
    produce: (partial: Binding) => void,
  ) =>
    heldSums.into(
      liveTensor(out, name),
      n,
      S,
      accumulate,
      produce,
      (o, p) => sliceSum(o, p, n, S, accumulate),
    );

  /** The GEMM variant, its workgroups and its split of `K` for an `M x N x K` product (the choice of `matmul`). */
  function matmulPlan(M: number, N: number, K: number, options: MatmulOptions) {
    // big tiles (128 x 128 per workgroup) only where they still give a workgroup to every SM of a
    // large GPU (e.g. 4096 x 256 outputs run faster as 256 tiles of 64 x 64 than 64 of 128 x 128)
    const big = M * N >= 256 * 256 && Math.ceil(M / 128) * Math.ceil(N / 128) >= BIG_TILE_MIN_TILES;
    // big tiles: the fastest of the variants timed at N = 4096 on the H200 (docs/performance.md,
    // f32 8x8x8 at 22.0 TFLOP/s, f16 4x8x16 at 22.2)
    const half = precision === "f16";
    const variant: { -readonly [K in keyof MatmulVariant]: MatmulVariant[K] } = {
      transA: !!options.transA,
      transB: !!options.transB,
      accumulate: !!options.accumulate,
      tm: big && !half ? 8 : 4,
      tn: big ? 8 : 4,
      bk: big && !half ? 8 : 16,
      precision,
    };
    const [BM, BN] = matmulTile(variant);
    const groups: [number, number] = [Math.ceil(N / BN), Math.ceil(M / BM)];
    const { slices, depth } = splitKPlan(groups[0] * groups[1], K, variant.bk);
    return { variant, groups, slices, depth };
  }

  function checkStep(op: string, p: AdamWParams): void {
    if (!(Number.isInteger(p.step) && p.step >= 1)) {
      throw new RangeError(`${op}: step must be >= 1, got ${p.step}`);
    }
  }

  function checkGuard(op: string, guard: StepGuard): void {
    if (guard.stats.size < 2 || guard.halted.size < 1) {
      throw new RangeError(
        `${op}: guard.stats needs 2 elements and guard.halted 1, got ${guard.stats.size} and ${guard.halted.size}`,
      );
    }
  }

  function convDims(x: Tensor, weight: Tensor, starts?: Uint8Array) {
    if (x.shape.length !== 3) throw new RangeError(`shortConv: x must be [B, T, C], got [${x.shape}]`);
    const [B, T, C] = x.shape;
    if (weight.shape.length !== 2 || weight.shape[0] !== C) {
      throw new RangeError(`shortConv: weight must be [${C}, W], got [${weight.shape}]`);
    }
    if (starts && starts.length !== B * T) {
      throw new RangeError(`shortConv: starts has length ${starts.length}, expected ${B * T}`);
    }
    return { B, T, C, W: weight.shape[1], seg: rt.temp(segmentStarts(B, T, starts), "storage") };
  }

  function xentRows(logits: Tensor, targets: Int32Array, weights: Float32Array) {
    const V = logits.shape[logits.shape.length - 1];
    const N = logits.size / V;
    if (targets.length !== N || weights.length !== N) {
      throw new RangeError(
        `crossEntropy: ${N} rows but ${targets.length} targets and ${weights.length} weights`,
      );
    }
    for (let n = 0; n < N; n++) {
      if (weights[n] !== 0 && !(targets[n] >= 0 && targets[n] < V)) {
        throw new RangeError(`crossEntropy: target ${targets[n]} at row ${n} is outside [0, ${V})`);
      }
    }
    return { N, V, t: rt.temp(targets, "storage"), w: rt.temp(weights, "storage") };
  }

  function checkIds(op: string, ids: Int32Array, V: number) {
    for (let n = 0; n < ids.length; n++) {
      if (!(ids[n] >= 0 && ids[n] < V)) {
        throw new RangeError(`${op}: id ${ids[n]} at ${n} is outside [0, ${V})`);
      }
    }
  }

  const ops: WebGpuDenseOps = {
    matmul(out, a, b, options: MatmulOptions = {}) {
      const [M, N, K] = matmulDims(out, a, b, options);
      if (M === 0 || N === 0) return;
      const plan = matmulPlan(M, N, K, options);
      const { variant, groups, slices } = plan;
      // out += product over zeros is out = product (the sum starts at 0 either way)
      if (fresh(out, a, b)) variant.accumulate = false;
      const u = rt.uniform([{ u: M }, { u: N }, { u: K }, { u: plan.depth }]);
      if (slices === 1) {
        rt.dispatch(rt.pipeline(matmulKey(variant), () => matmulShader(variant)), [
          buf(out, "out"),
          buf(a, "a"),
          buf(b, "b"),
          u,
        ], groups);
        return;
      }
      const split: MatmulVariant = { ...variant, accumulate: false, splitK: true };
      const pipe = rt.pipeline(matmulKey(split), () => matmulShader(split));
      const [A, B] = [buf(a, "a"), buf(b, "b")];
      slicedInto(out, "out", M * N, slices, variant.accumulate, (partial) => {
        rt.dispatch(pipe, [partial, A, B, u], [groups[0], groups[1], slices]);
      });
    },

    matmulSwigluForward(out, product, a, b, other, role) {
      const [M, N, K] = matmulDims(product, a, b, {});
      sameSize("matmulSwigluForward", ["product", product], ["out", out], ["other", other]);
      if (role !== "gate" && role !== "up") {
        throw new RangeError(`matmulSwigluForward: role must be "gate" or "up", got "${role}"`);
      }
      if (M === 0 || N === 0) return;
      const plan = matmulPlan(M, N, K, {});
      const writes = [liveTensor(out).buffer, liveTensor(product).buffer];
      const reads = [a, b, other].map((t) => liveTensor(t).buffer);
      if (plan.slices > 1 || writes[0] === writes[1] || writes.some((w) => reads.includes(w))) {
        ops.matmul(product, a, b);
        if (role === "gate") ops.swigluForward(out, product, other);
        else ops.swigluForward(out, other, product);
        return;
      }
      const variant: MatmulVariant = {
        ...plan.variant,
        epilogue: role === "up" ? "swiglu-up" : "swiglu-gate",
      };
      fresh(product);
      fresh(out);
      rt.dispatch(rt.pipeline(matmulKey(variant), () => matmulShader(variant)), [
        buf(product, "product"),
        buf(a, "a"),
        buf(b, "b"),
        rt.uniform([{ u: M }, { u: N }, { u: K }, { u: plan.depth }]),
        buf(other, "other"),
        buf(out, "out"),
      ], plan.groups);
    },

    matmulActivationForward(out, pre, a, b, bias, kind: Activation, scale) {
      const [M, N, K] = matmulDims(pre, a, b, {});
      sameSize("matmulActivationForward", ["pre", pre], ["out", out]);
      if (bias && bias.size !== N) {
        throw new RangeError(`matmulActivationForward: bias has ${bias.size} elements, expected ${N}`);
      }
      if (M === 0 || N === 0) return;
      const plan = matmulPlan(M, N, K, {});
      const writes = [liveTensor(out).buffer, liveTensor(pre).buffer];
      const reads = [a, b, ...(bias ? [bias] : [])].map((t) => liveTensor(t).buffer);
      if (plan.slices > 1 || writes[0] === writes[1] || writes.some((w) => reads.includes(w))) {
        ops.matmul(pre, a, b);
        if (bias) {
          const ones = rt.tensor([M, 1], false);
          ops.fill(ones, 1);
          ops.matmul(pre, ones, bias, { accumulate: true });
          rt.pool.release(ones.buffer);
        }
        ops.activationForward(kind, out, pre, scale);
        return;
      }
      const variant: MatmulVariant = { ...plan.variant, epilogue: kind };
      fresh(pre);
      fresh(out);
      rt.dispatch(
        rt.pipeline(matmulKey(variant), () => matmulShader(variant)),
        [
          buf(pre, "pre"),
          buf(a, "a"),
          buf(b, "b"),
          rt.uniform([{ u: M }, { u: N }, { u: K }, { u: plan.depth }, { f: scale }, { u: bias ? 1 : 0 }]),
          bias ? buf(bias, "bias") : rt.zeroBuffer(),
          buf(out, "out"),
        ],
        plan.groups,
        [1, 2, 4],
      ); // a, b, bias: read only (b and bias may be tensors of one parameter block)
    },

    matmulSwigluBackward(dGate, dUp, dOut, b, gate, up) {
      const K = dOut.shape[dOut.shape.length - 1];
      const M = K === 0 ? 0 : dOut.size / K;
      const N = gate.size / Math.max(M, 1);
      sameSize("matmulSwigluBackward", ["gate", gate], ["up", up], ["dGate", dGate], ["dUp", dUp]);
      if (!Number.isInteger(N) || b.size !== N * K) {
        throw new RangeError(
          `matmulSwigluBackward: b has ${b.size} elements and gate ${gate.size}, which do not fit dOut [${dOut.shape}] as [${N}, ${K}] and [${M}, ${N}]`,
        );
      }
      if (M === 0 || N === 0) return;
      const plan = matmulPlan(M, N, K, { transB: true });
      const writes = [liveTensor(dGate).buffer, liveTensor(dUp).buffer];
      const reads = [dOut, b, gate, up].map((t) => liveTensor(t).buffer);
      if (plan.slices > 1 || writes[0] === writes[1] || writes.some((w) => reads.includes(w))) {
        const d = rt.tensor([M, N], false);
        ops.matmul(d, dOut, b, { transB: true });
        ops.swigluBackward(dGate, dUp, d, gate, up);
        rt.pool.release(d.buffer);
        return;
      }
      const variant: MatmulVariant = { ...plan.variant, epilogue: "swiglu-backward" };
      const u = rt.uniform([
        { u: M },
        { u: N },
        { u: K },
        { u: plan.depth },
        flag(fresh(dGate)),
        flag(fresh(dUp)),
      ]);
      rt.dispatch(rt.pipeline(matmulKey(variant), () => matmulShader(variant)), [
        buf(dGate, "dGate"),
        buf(dOut, "dOut"),
        buf(b, "b"),
        u,
        buf(dUp, "dUp"),
        buf(gate, "gate"),
        buf(up, "up"),
      ], plan.groups);
    },

    embeddingForward(out, table, ids) {
      const D = table.shape[table.shape.length - 1];
      if (out.size !== ids.length * D) {
        throw new RangeError(`embeddingForward: out has ${out.size} elements, expected ${ids.length}x${D}`);
      }
      checkIds("embeddingForward", ids, table.size / D);
      const n = out.size;
      if (n === 0) return;
      const u = rt.uniform([{ u: n }, { u: D }]);
      rt.dispatch(rt.pipeline("embedding_forward_f32", embeddingForwardShader), [
        buf(out, "out"),
        buf(table, "table"),
        rt.temp(ids, "storage"),
        u,
      ], grid(Math.ceil(n / 256)));
    },

    embeddingBackward(dTable, dOut, ids) {
      const D = dTable.shape[dTable.shape.length - 1];
      if (dOut.size !== ids.length * D) {
        throw new RangeError(
          `embeddingBackward: dOut has ${dOut.size} elements, expected ${ids.length}x${D}`,
        );
      }
      checkIds("embeddingBackward", ids, dTable.size / D);
      // group positions by row: rows[G], offsets[G+1], list[N]
      const byRow = new Map<number, number[]>();
      ids.forEach((id, n) => {
        const l = byRow.get(id);
        if (l) l.push(n);
        else byRow.set(id, [n]);
      });
      const G = byRow.size;
      if (G === 0) return;
      const groups = new Int32Array(2 * G + 1 + ids.length);
      let g = 0;
      let off = 0;
      for (const [row, list] of byRow) {
        groups[g] = row;
        groups[G + g] = off;
        for (const n of list) groups[2 * G + 1 + off++] = n;
        g++;
      }
      groups[2 * G] = off;
      const n = G * D;
      const u = rt.uniform([{ u: n }, { u: D }, { u: G }]);
      rt.dispatch(rt.pipeline("embedding_backward_f32", embeddingBackwardShader), [
        buf(dTable, "dTable"),
        buf(dOut, "dOut"),
        rt.temp(groups, "storage"),
        u,
      ], grid(Math.ceil(n / 256)));
    },

    rmsNormForward(out, rstd, x, weight, eps) {
      sameSize("rmsNormForward", ["x", x], ["out", out]);
      const { N, D } = normRows("rmsNormForward", x, rstd, weight);
      if (N === 0) return;
      const u = rt.uniform([{ u: N }, { u: D }, { u: weight ? 1 : 0 }, { f: eps }]);
      rt.dispatch(rt.pipeline("rmsnorm_forward_f32", rmsNormForwardShader), [
        buf(out, "out"),
        buf(rstd, "rstd"),
        buf(x, "x"),
        weight ? buf(weight, "weight") : rt.zeroBuffer(),
        u,
      ], grid(N));
    },

    addRmsNormForward(sum, out, rstd, a, b, weight, eps) {
      sameSize("addRmsNormForward", ["a", a], ["b", b], ["sum", sum], ["out", out]);
      const { N, D } = normRows("addRmsNormForward", a, rstd, weight);
      if (N === 0) return;
      const u = rt.uniform([{ u: N }, { u: D }, { u: weight ? 1 : 0 }, { f: eps }]);
      rt.dispatch(rt.pipeline("add_rmsnorm_forward_f32", addRmsNormForwardShader), [
        buf(sum, "sum"),
        buf(out, "out"),
        buf(rstd, "rstd"),
        buf(a, "a"),
        buf(b, "b"),
        weight ? buf(weight, "weight") : rt.zeroBuffer(),
        u,
      ], grid(N));
    },

    rmsNormBackward(dx, dWeight, dOut, x, weight, rstd) {
      const D = x.shape[x.shape.length - 1];
      const N = x.size / D;
      sameSize("rmsNormBackward", ["x", x], ["dx", dx], ["dOut", dOut]);
      if (N === 0) return;
      if (dWeight && dWeight.size !== D) {
        throw new RangeError(`rmsNormBackward: dWeight has ${dWeight.size}, expected ${D}`);
      }
      const u = rt.uniform([
        { u: N },
        { u: D },
        { u: weight ? 1 : 0 },
        flag(fresh(dx, dOut, x, weight, rstd)),
      ]);
      rt.dispatch(rt.pipeline("rmsnorm_backward_f32", rmsNormBackwardShader), [
        buf(dx, "dx"),
        buf(dOut, "dOut"),
        buf(x, "x"),
        weight ? buf(weight, "weight") : rt.zeroBuffer(),
        buf(rstd, "rstd"),
        u,
      ], grid(N));
      if (dWeight) {
        const S = Math.ceil(N / ROWS_PER_SLICE);
        const uw = rt.uniform([{ u: D }, { u: N }, { u: ROWS_PER_SLICE }]);
        const pipe = rt.pipeline("rmsnorm_weight_grad_f32", rmsNormWeightGradShader);
        const inputs = [buf(dOut, "dOut"), buf(x, "x"), buf(rstd, "rstd")];
        slicedInto(dWeight, "dWeight", D, S, true, (partial) => {
          rt.dispatch(pipe, [partial, ...inputs, uw], [Math.ceil(D / 64), S]);
        });
      }
    },

    swigluForward(out, gate, up) {
      const n = sameSize("swigluForward", ["out", out], ["gate", gate], ["up", up]);
      elementwise("swiglu_forward_f32", swigluForwardShader, [buf(out), buf(gate), buf(up)], n);
    },

    swigluBackward(dGate, dUp, dOut, gate, up) {
      const n = sameSize("swigluBackward", ["dGate", dGate], ["dUp", dUp], ["dOut", dOut], ["gate", gate], [
        "up",
        up,
      ]);
      if (n === 0) return;
      const freshGate = fresh(dGate, dOut, gate, up);
      const freshUp = liveTensor(dUp).buffer !== liveTensor(dGate).buffer && fresh(dUp, dOut, gate, up);
      elementwise(
        "swiglu_backward_f32",
        swigluBackwardShader,
        [
          buf(dGate),
          buf(dUp),
          buf(dOut),
          buf(gate),
          buf(up),
        ],
        n,
        [],
        [flag(freshGate), flag(freshUp)],
      );
    },

    activationForward(kind: Activation, out, x, scale) {
      const n = sameSize(`activationForward(${kind})`, ["out", out], ["x", x]);
      elementwise(`act_forward_${kind}_f32`, () => activationShader(kind, "forward"), [buf(out), buf(x)], n, [
        scale,
      ]);
    },

    activationBackward(kind: Activation, dx, dOut, x, scale) {
      const n = sameSize(`activationBackward(${kind})`, ["dx", dx], ["dOut", dOut], ["x", x]);
      if (n === 0) return;
      const fromZero = fresh(dx, dOut, x);
      elementwise(
        `act_backward_${kind}_f32`,
        () => activationShader(kind, "backward"),
        [
          buf(dx),
          buf(dOut),
          buf(x),
        ],
        n,
        [scale],
        [flag(fromZero)],
      );
    },

    add(out, a, b) {
      const n = sameSize("add", ["out", out], ["a", a], ["b", b]);
      elementwise("add_f32", () => binaryShader("add"), [buf(out), buf(a), buf(b)], n);
    },

    mul(out, a, b) {
      const n = sameSize("mul", ["out", out], ["a", a], ["b", b]);
      elementwise("mul_f32", () => binaryShader("mul"), [buf(out), buf(a), buf(b)], n);
    },

    axpy(y, x, alpha) {
      const n = sameSize("axpy", ["y", y], ["x", x]);
      elementwise("axpy_f32", axpyShader, [buf(y), buf(x)], n, [alpha]);
    },

    fill(x, value) {
      // zeros (gradients, accumulators: most fills of a training step) are a copy-engine clear, with no
      // pipeline, bind group or uniform to record; other values a dispatch
      if (value === 0 && !Object.is(value, -0)) {
        // a view into a block clears up to the next tensor, so zeroing a block's tensors one by one
        // makes one clear of the block (GpuRuntime.clear)
        const t = liveTensor(x);
        if (x.size > 0) rt.clear(t.buffer, t.offset, t.block ? t.reserved : x.size * 4);
        return;
      }
      elementwise("fill_f32", fillShader, [buf(x)], x.size, [value]);
    },

    shortConvForward(out, x, weight, starts) {
      sameSize("shortConvForward", ["out", out], ["x", x]);
      const { B, T, C, W, seg } = convDims(x, weight, starts);
      const n = B * T * C;
      if (n === 0) return;
      const u = rt.uniform([{ u: n }, { u: T }, { u: C }, { u: W }]);
      rt.dispatch(rt.pipeline("shortconv_forward_f32", shortConvForwardShader), [
        buf(out, "out"),
        buf(x, "x"),
        buf(weight, "weight"),
        seg,
        u,
      ], grid(Math.ceil(n / 256)));
    },

    shortConvBackward(dx, dWeight, dOut, x, weight, starts) {
      sameSize("shortConvBackward", ["x", x], ["dx", dx], ["dOut", dOut]);
      sameSize("shortConvBackward", ["weight", weight], ["dWeight", dWeight]);
      const { B, T, C, W, seg } = convDims(x, weight, starts);
      const n = B * T * C;
      if (n === 0) return;
      const dpre = rt.tensor([n], false);
      const u = rt.uniform([{ u: n }, { u: T }, { u: C }, { u: W }]);
      rt.dispatch(rt.pipeline("shortconv_pregrad_f32", shortConvPreGradShader), [
        dpre.buffer,
        buf(dOut, "dOut"),
        buf(x, "x"),
        buf(weight, "weight"),
        seg,
        u,
      ], grid(Math.ceil(n / 256)));
      const ux = rt.uniform([{ u: n }, { u: T }, { u: C }, { u: W }, flag(fresh(dx, x, weight))]);
      rt.dispatch(rt.pipeline("shortconv_inputgrad_f32", shortConvInputGradShader), [
        buf(dx, "dx"),
        dpre.buffer,
        buf(weight, "weight"),
        ux,
        seg,
      ], grid(Math.ceil(n / ELEMENTWISE_WG)));
      const S = Math.ceil((B * T) / ROWS_PER_SLICE);
      const uw = rt.uniform([{ u: C * W }, { u: T }, { u: C }, { u: W }, { u: B * T }, {
        u: ROWS_PER_SLICE,
      }]);
      const pipe = rt.pipeline("shortconv_weightgrad_f32", shortConvWeightGradShader);
      const X = buf(x, "x");
      slicedInto(dWeight, "dWeight", C * W, S, true, (partial) => {
        rt.dispatch(pipe, [partial, dpre.buffer, X, uw, seg], [Math.ceil((C * W) / 64), S]);
      });
      rt.pool.release(dpre.buffer);
    },

    crossEntropyForward(losses, logits, targets, weights) {
      const { N, V, t, w } = xentRows(logits, targets, weights);
      if (losses.size !== N) {
        throw new RangeError(`crossEntropyForward: losses has ${losses.size}, expected ${N}`);
      }
      if (N === 0) return;
      const u = rt.uniform([{ u: N }, { u: V }]);
      rt.dispatch(rt.pipeline("xent_forward_f32", () => crossEntropyShader("forward")), [
        buf(losses, "losses"),
        buf(logits, "logits"),
        t,
        w,
        u,
      ], grid(N));
    },

    crossEntropyForwardBackward(losses, dLogits, logits, targets, weights) {
      sameSize("crossEntropyForwardBackward", ["dLogits", dLogits], ["logits", logits]);
      const { N, V, t, w } = xentRows(logits, targets, weights);
      if (losses.size !== N) {
        throw new RangeError(`crossEntropyForwardBackward: losses has ${losses.size}, expected ${N}`);
      }
      const lossBuffer = liveTensor(losses, "losses").buffer;
      if (lossBuffer === liveTensor(dLogits).buffer || lossBuffer === liveTensor(logits).buffer) {
        throw new RangeError(
          "crossEntropyForwardBackward: losses must not share storage with dLogits or logits",
        );
      }
      if (N === 0) return;
      const u = rt.uniform([{ u: N }, { u: V }, flag(fresh(dLogits, logits))]);
      rt.dispatch(rt.pipeline("xent_forward_backward_f32", () => crossEntropyShader("both")), [
        buf(dLogits, "dLogits"),
        buf(logits, "logits"),
        t,
        w,
        u,
        buf(losses, "losses"),
      ], grid(N));
    },

    crossEntropyBackward(dLogits, logits, targets, weights) {
      sameSize("crossEntropyBackward", ["dLogits", dLogits], ["logits", logits]);
      const { N, V, t, w } = xentRows(logits, targets, weights);
      if (N === 0) return;
      const u = rt.uniform([{ u: N }, { u: V }, flag(fresh(dLogits, logits))]);
      rt.dispatch(rt.pipeline("xent_backward_f32", () => crossEntropyShader("backward")), [
        buf(dLogits, "dLogits"),
        buf(logits, "logits"),
        t,
        w,
        u,
      ], grid(N));
    },

    ...createAttentionOps(rt),

    adamw(param, grad, m, v, p: AdamWParams, decay, guard?: StepGuard) {
      const n = sameSize("adamw", ["param", param], ["grad", grad], ["m", m], ["v", v]);
      checkStep("adamw", p);
      if (n === 0) return;
      const c1 = 1 - Math.pow(p.beta1, p.step);
      const c2 = 1 - Math.pow(p.beta2, p.step);
      const hyper = adamHyper([p.lr, c1, c2, p.gradScale, guard ? Math.abs(guard.normScale) : 0]);
      const scalars = [{ u: n }, { f: p.beta1 }, { f: p.beta2 }, { f: p.eps }, {
        f: decay ? p.weightDecay : 0,
      }];
      const tensors = [buf(param), buf(grad), buf(m), buf(v), hyper];
      const groups = grid(Math.ceil(n / ELEMENTWISE_WG));
      if (!guard) {
        rt.dispatch(
          rt.pipeline("adamw_f32", () => adamwShader(false)),
          [...tensors, rt.uniform(scalars)],
          groups,
        );
        return;
      }
      checkGuard("adamw", guard);
      rt.dispatch(rt.pipeline("adamw_guarded_f32", () => adamwShader(true)), [
        ...tensors,
        buf(guard.stats, "guard.stats"),
        buf(guard.halted, "guard.halted"),
        rt.uniform([...scalars, { f: guard.clipNorm }]),
      ], groups);
    },

    adamwMany(slots: readonly AdamWSlot[], p: AdamWParams, guard?: StepGuard) {
      slots.forEach((s, i) =>
        sameSize(`adamwMany slot ${i}`, ["param", s.param], ["grad", s.grad], ["m", s.m], ["v", s.v])
      );
      checkStep("adamwMany", p);
      if (guard) checkGuard("adamwMany", guard);
      if (slots.length === 0 || multi.blockAdamw(slots, p, guard)) return;
      for (const s of slots) ops.adamw(s.param, s.grad, s.m, s.v, p, s.decay, guard);
    },

    accumulateSum(out, index, xs, squares) {
      if (!Number.isInteger(index) || index < 0 || index >= out.size) {
        throw new RangeError(`accumulateSum: index ${index} is outside out's ${out.size} elements`);
      }
      // partial sums per tensor into one buffer (one dispatch over a block's tensors, else one per
      // tensor), then one pass adds every partial in order
      let partials = multi.blockPartialSums(xs, squares);
      if (!partials) {
        const parts = xs.filter((x) => x.size > 0).map((x) => ({ x, groups: partialSumGroups(x.size) }));
        const total = parts.reduce((n, p) => n + p.groups, 0);
        if (total === 0) return;
        const partial = rt.tensor([total], false).buffer;
        const key = squares ? "sumsquares_f32" : "sum_f32";
        const pipe = rt.pipeline(key, () => sumSquaresShader(squares));
        let base = 0;
        for (const { x, groups } of parts) {
          const u = rt.uniform([{ u: x.size }, { u: groups }, { u: base }]);
          rt.dispatch(pipe, [partial, buf(x, "x"), u], [groups]);
          base += groups;
        }
        partials = { partial, workgroups: total };
      }
      const { partial, workgroups } = partials;
      const uf = rt.uniform([{ u: workgroups }, { u: index }]);
      rt.dispatch(rt.pipeline("finish_sum_f32", finishSumShader), [buf(out, "out"), partial, uf], [1]);
      rt.pool.release(partial);
    },

    async sumSquares(x) {
      const n = x.size;
      if (n === 0) return 0;
      const groups = Math.min(1024, Math.ceil(n / 256));
      const partial = rt.tensor([groups], false);
      const u = rt.uniform([{ u: n }, { u: groups }]);
      rt.dispatch(rt.pipeline("sumsquares_f32", () => sumSquaresShader(true)), [
        partial.buffer,
        buf(x, "x"),
        u,
      ], [
        groups,
      ]);
      const data = new Float32Array(await rt.readBytes(partial.buffer, groups * 4));
      rt.pool.release(partial.buffer);
      let s = 0;
      for (const v of data) s += v;
      return s;
    },
  };
  return ops;
}
