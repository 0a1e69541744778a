/**
 * Dense ops of the reference backend: float64, plain loops, no tricks. Every fast backend's dense
 * kernels are judged against these, so each op below states its exact convention.
 *
 * Shape legend: `N` rows, `D` feature size, `V` vocabulary, `B` batch rows, `T` positions,
 * `H` heads, `C` channels, `W` convolution width. Tensors are row-major, last index fastest.
 *
 * Conventions fixed here (other backends must match):
 * - `matmul` views each operand as 2-D (leading dimensions flattened into rows, the last dimension
 *   is the columns; a 1-D tensor is one row) and requires `out`'s 2-D view to be exactly `[M, N]`.
 * - `shortConvForward`: `out[b,t,c] = silu(sum_{j=0}^{W-1} weight[c, W-1-j] * x[b, t-j, c])`, so the
 *   last tap `weight[c, W-1]` multiplies the current position; taps before the start of the current
 *   sequence (the latest flagged start `<= t`; position 0 is always a start) read zero.
 * - `attentionForward`: scores `(R_p q_t) . (R_p' k_s) / sqrt(D)` over `s` from the start of the
 *   current sequence to `t`; RoPE rotates the half-split pairs `(i, i + D/2)` by angle
 *   `p * ropeBase^(-2i/D)` with `p` the position relative to the sequence start (GPT-NeoX /
 *   LLaMA "rotate half" convention); `lse[b,t,h] = log sum_s exp(score)`. `D` must be even.
 * - `adamw`: PyTorch AdamW order: `g = gradScale * grad`; `m = b1 m + (1-b1) g`;
 *   `v = b2 v + (1-b2) g^2`; `param *= 1 - lr * weightDecay` (when `decay`);
 *   `param -= lr * (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps)`.
 * - Backward ops accumulate (`+=`) into their gradient tensors.
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
} from "../backend.ts";
import { refData, RefTensor } from "./tensor.ts";

/** The 2-D view of a tensor: leading dimensions flattened into rows, the last one is the columns. */
function view2(t: Tensor): [number, number] {
  if (t.shape.length === 0) return [1, 1];
  const cols = t.shape[t.shape.length - 1];
  return [cols === 0 ? 0 : t.size / cols, cols];
}

function lastDim(t: Tensor, name: string): number {
  if (t.shape.length === 0) throw new RangeError(`${name} must have at least one dimension, got a scalar`);
  return t.shape[t.shape.length - 1];
}

function sameSize(op: string, tensors: Record<string, Tensor>): void {
  const entries = Object.entries(tensors);
  const [firstName, first] = entries[0];
  for (const [name, t] of entries.slice(1)) {
    if (t.size !== first.size) {
      throw new RangeError(
        `${op}: ${name} has ${t.size} elements [${t.shape}], ${firstName} has ${first.size} [${first.shape}]`,
      );
    }
  }
}

function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

function softplus(x: number): number {
  return x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x));
}

function silu(x: number): number {
  return x * sigmoid(x);
}

/** Derivative of silu: `s (1 + x (1 - s))` with `s = sigmoid(x)`. */
function siluGrad(x: number): number {
  const s = sigmoid(x);
  return s * (1 + x * (1 - s));
}

const ACTIVATIONS: Record<Activation, { f: (x: number) => number; df: (x: number) => number }> = {
  sigmoid: { f: sigmoid, df: (x) => sigmoid(x) * (1 - sigmoid(x)) },
  softplus: { f: softplus, df: sigmoid },
  silu: { f: silu, df: siluGrad },
};

function activation(kind: Activation) {
  const a = ACTIVATIONS[kind];
  if (!a) throw new RangeError(`unknown activation "${kind}"; expected sigmoid, softplus or silu`);
  return a;
}

function matmul(out: Tensor, a: Tensor, b: Tensor, options: MatmulOptions = {}): void {
  const [ar, ac] = view2(a);
  const [br, bc] = view2(b);
  const [M, K] = options.transA ? [ac, ar] : [ar, ac];
  const [Kb, N] = options.transB ? [bc, br] : [br, bc];
  if (K !== Kb) {
    throw new RangeError(
      `matmul: inner sizes differ: op(a) is [${M}, ${K}] (a [${a.shape}]), op(b) is [${Kb}, ${N}] (b [${b.shape}])`,
    );
  }
  const [or, oc] = view2(out);
  if (or !== M || oc !== N) {
    throw new RangeError(`matmul: out is [${out.shape}], expected a [${M}, ${N}] view`);
  }
  const A = refData(a, "a");
  const Bd = refData(b, "b");
  const O = refData(out, "out");
  // element strides of op(a)[m, k] and op(b)[k, n]
  const [sam, sak] = options.transA ? [1, ac] : [ac, 1];
  const [sbk, sbn] = options.transB ? [1, bc] : [bc, 1];
  const result = new Float64Array(M * N); // computed first, so out may alias an operand
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += A[m * sam + k * sak] * Bd[k * sbk + n * sbn];
      result[m * N + n] = acc;
    }
  }
  if (!options.accumulate) O.fill(0);
  for (let i = 0; i < M * N; i++) O[i] += result[i];
}

function embeddingDims(table: Tensor, ids: Int32Array, rows: Tensor, rowsName: string): [number, number] {
  if (table.shape.length !== 2) throw new RangeError(`embedding table must be [V, D], got [${table.shape}]`);
  const [V, D] = table.shape;
  if (rows.size !== ids.length * D) {
    throw new RangeError(
      `${rowsName} has ${rows.size} elements [${rows.shape}], expected ids ${ids.length} x D ${D}`,
    );
  }
  for (let n = 0; n < ids.length; n++) {
    if (!(ids[n] >= 0 && ids[n] < V)) {
      throw new RangeError(`token id ${ids[n]} at row ${n} is outside [0, ${V})`);
    }
  }
  return [V, D];
}

function embeddingForward(out: Tensor, table: Tensor, ids: Int32Array): void {
  const [, D] = embeddingDims(table, ids, out, "out");
  const O = refData(out, "out");
  const E = refData(table, "table");
  for (let n = 0; n < ids.length; n++) O.set(E.subarray(ids[n] * D, ids[n] * D + D), n * D);
}

function embeddingBackward(dTable: Tensor, dOut: Tensor, ids: Int32Array): void {
  const [, D] = embeddingDims(dTable, ids, dOut, "dOut");
  const G = refData(dTable, "dTable");
  const dO = refData(dOut, "dOut");
  for (let n = 0; n < ids.length; n++) {
    for (let d = 0; d < D; d++) G[ids[n] * D + d] += dO[n * D + d];
  }
}

function rmsDims(x: Tensor, rstd: Tensor, weight: Tensor | null): [number, number] {
  const D = lastDim(x, "x");
  const N = D === 0 ? 0 : x.size / D;
  if (rstd.size !== N) throw new RangeError(`rmsNorm: rstd has ${rstd.size} elements, expected N = ${N}`);
  if (weight && weight.size !== D) {
    throw new RangeError(`rmsNorm: weight has ${weight.size} elements, expected D = ${D}`);
  }
  return [N, D];
}

function rmsNormForward(out: Tensor, rstd: Tensor, x: Tensor, weight: Tensor | null, eps: number): void {
  sameSize("rmsNormForward", { x, out });
  const [N, D] = rmsDims(x, rstd, weight);
  const X = refData(x, "x");
  const O = refData(out, "out");
  const R = refData(rstd, "rstd");
  const Wt = weight ? refData(weight, "weight") : null;
  for (let n = 0; n < N; n++) {
    let ss = 0;
    for (let d = 0; d < D; d++) ss += X[n * D + d] * X[n * D + d];
    const r = 1 / Math.sqrt(ss / D + eps);
    R[n] = r;
    for (let d = 0; d < D; d++) O[n * D + d] = X[n * D + d] * r * (Wt ? Wt[d] : 1);
  }
}

function rmsNormBackward(
  dx: Tensor,
  dWeight: Tensor | null,
  dOut: Tensor,
  x: Tensor,
  weight: Tensor | null,
  rstd: Tensor,
): void {
  sameSize("rmsNormBackward", { x, dx, dOut });
  const [N, D] = rmsDims(x, rstd, weight);
  if (dWeight && dWeight.size !== D) {
    throw new RangeError(`rmsNorm: dWeight has ${dWeight.size} elements, expected ${D}`);
  }
  const X = refData(x, "x");
  const dX = refData(dx, "dx");
  const dO = refData(dOut, "dOut");
  const R = refData(rstd, "rstd");
  const Wt = weight ? refData(weight, "weight") : null;
  const dW = dWeight ? refData(dWeight, "dWeight") : null;
  for (let n = 0; n < N; n++) {
    const r = R[n];
    // g = dOut * weight; dx = r g - x r^3 (g . x) / D
    let gx = 0;
    for (let d = 0; d < D; d++) gx += dO[n * D + d] * (Wt ? Wt[d] : 1) * X[n * D + d];
    const c = (r * r * r * gx) / D;
    for (let d = 0; d < D; d++) {
      const i = n * D + d;
      dX[i] += r * dO[i] * (Wt ? Wt[d] : 1) - X[i] * c;
      if (dW) dW[d] += dO[i] * X[i] * r;
    }
  }
}

function swigluForward(out: Tensor, gate: Tensor, up: Tensor): void {
  sameSize("swigluForward", { out, gate, up });
  const O = refData(out, "out");
  const G = refData(gate, "gate");
  const U = refData(up, "up");
  for (let i = 0; i < O.length; i++) O[i] = silu(G[i]) * U[i];
}

function swigluBackward(dGate: Tensor, dUp: Tensor, dOut: Tensor, gate: Tensor, up: Tensor): void {
  sameSize("swigluBackward", { dOut, dGate, dUp, gate, up });
  const dG = refData(dGate, "dGate");
  const dU = refData(dUp, "dUp");
  const dO = refData(dOut, "dOut");
  const G = refData(gate, "gate");
  const U = refData(up, "up");
  for (let i = 0; i < dO.length; i++) {
    dG[i] += dO[i] * U[i] * siluGrad(G[i]);
    dU[i] += dO[i] * silu(G[i]);
  }
}

function activationForward(kind: Activation, out: Tensor, x: Tensor, scale: number): void {
  const { f } = activation(kind);
  sameSize(`activationForward(${kind})`, { x, out });
  const O = refData(out, "out");
  const X = refData(x, "x");
  for (let i = 0; i < X.length; i++) O[i] = scale * f(X[i]);
}

function activationBackward(kind: Activation, dx: Tensor, dOut: Tensor, x: Tensor, scale: number): void {
  const { df } = activation(kind);
  sameSize(`activationBackward(${kind})`, { x, dx, dOut });
  const dX = refData(dx, "dx");
  const dO = refData(dOut, "dOut");
  const X = refData(x, "x");
  for (let i = 0; i < X.length; i++) dX[i] += dO[i] * scale * df(X[i]);
}

function add(out: Tensor, a: Tensor, b: Tensor): void {
  sameSize("add", { out, a, b });
  const O = refData(out, "out");
  const A = refData(a, "a");
  const Bd = refData(b, "b");
  for (let i = 0; i < O.length; i++) O[i] = A[i] + Bd[i];
}

function mul(out: Tensor, a: Tensor, b: Tensor): void {
  sameSize("mul", { out, a, b });
  const O = refData(out, "out");
  const A = refData(a, "a");
  const Bd = refData(b, "b");
  for (let i = 0; i < O.length; i++) O[i] = A[i] * Bd[i];
}

function axpy(y: Tensor, x: Tensor, alpha: number): void {
  sameSize("axpy", { y, x });
  const Y = refData(y, "y");
  const X = refData(x, "x");
  for (let i = 0; i < Y.length; i++) Y[i] += alpha * X[i];
}

function fill(x: Tensor, value: number): void {
  refData(x, "x").fill(value);
}

/** For each of `B` rows of `T` positions, the position where the current sequence began. */
function sequenceStarts(B: number, T: number, starts: Uint8Array | undefined): Int32Array {
  if (starts && starts.length !== B * T) {
    throw new RangeError(`starts has length ${starts.length}, expected B*T = ${B * T}`);
  }
  const first = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    let s = 0;
    for (let t = 0; t < T; t++) {
      if (t > 0 && starts && starts[b * T + t]) s = t;
      first[b * T + t] = s;
    }
  }
  return first;
}

function convDims(x: Tensor, weight: Tensor): [number, number, number, number] {
  if (x.shape.length !== 3) throw new RangeError(`shortConv: x must be [B, T, C], got [${x.shape}]`);
  const [B, T, C] = x.shape;
  if (weight.shape.length !== 2 || weight.shape[0] !== C) {
    throw new RangeError(`shortConv: weight must be [C = ${C}, W], got [${weight.shape}]`);
  }
  return [B, T, C, weight.shape[1]];
}

/** Pre-activation of the short convolution at (b, t, c). */
function convAt(
  X: Float64Array,
  Wt: Float64Array,
  dims: [number, number, number, number],
  b: number,
  t: number,
  c: number,
  s: number,
): number {
  const [, T, C, W] = dims;
  let acc = 0;
  for (let j = 0; j < W && t - j >= s; j++) acc += Wt[c * W + W - 1 - j] * X[(b * T + t - j) * C + c];
  return acc;
}

function shortConvForward(out: Tensor, x: Tensor, weight: Tensor, starts?: Uint8Array): void {
  const dims = convDims(x, weight);
  sameSize("shortConvForward", { x, out });
  const [B, T, C] = dims;
  const first = sequenceStarts(B, T, starts);
  const X = refData(x, "x");
  const Wt = refData(weight, "weight");
  const O = refData(out, "out");
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let c = 0; c < C; c++) {
        O[(b * T + t) * C + c] = silu(convAt(X, Wt, dims, b, t, c, first[b * T + t]));
      }
    }
  }
}

function shortConvBackward(
  dx: Tensor,
  dWeight: Tensor,
  dOut: Tensor,
  x: Tensor,
  weight: Tensor,
  starts?: Uint8Array,
): void {
  const dims = convDims(x, weight);
  sameSize("shortConvBackward", { x, dx, dOut });
  sameSize("shortConvBackward", { weight, dWeight });
  const [B, T, C, W] = dims;
  const first = sequenceStarts(B, T, starts);
  const X = refData(x, "x");
  const Wt = refData(weight, "weight");
  const dX = refData(dx, "dx");
  const dW = refData(dWeight, "dWeight");
  const dO = refData(dOut, "dOut");
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const s = first[b * T + t];
      for (let c = 0; c < C; c++) {
        const g = dO[(b * T + t) * C + c] * siluGrad(convAt(X, Wt, dims, b, t, c, s));
        for (let j = 0; j < W && t - j >= s; j++) {
          const xi = (b * T + t - j) * C + c;
          dW[c * W + W - 1 - j] += g * X[xi];
          dX[xi] += g * Wt[c * W + W - 1 - j];
        }
      }
    }
  }
}

function ceDims(logits: Tensor, targets: Int32Array, weights: Float32Array): [number, number] {
  const [N, V] = view2(logits);
  if (targets.length !== N || weights.length !== N) {
    throw new RangeError(
      `crossEntropy: logits have ${N} rows, targets ${targets.length}, weights ${weights.length}`,
    );
  }
  for (let n = 0; n < N; n++) {
    if (weights[n] !== 0 && !(targets[n] >= 0 && targets[n] < V)) {
      throw new RangeError(`crossEntropy: target ${targets[n]} at row ${n} is outside [0, ${V})`);
    }
  }
  return [N, V];
}

/** Log-sum-exp of `L[off .. off+V)`. */
function logSumExp(L: Float64Array, off: number, V: number): number {
  let max = -Infinity;
  for (let v = 0; v < V; v++) max = Math.max(max, L[off + v]);
  let sum = 0;
  for (let v = 0; v < V; v++) sum += Math.exp(L[off + v] - max);
  return max + Math.log(sum);
}

function crossEntropyForward(
  losses: Tensor,
  logits: Tensor,
  targets: Int32Array,
  weights: Float32Array,
): void {
  const [N, V] = ceDims(logits, targets, weights);
  if (losses.size !== N) {
    throw new RangeError(`crossEntropy: losses has ${losses.size} elements, expected ${N}`);
  }
  const L = refData(logits, "logits");
  const out = refData(losses, "losses");
  for (let n = 0; n < N; n++) {
    out[n] = weights[n] === 0 ? 0 : weights[n] * (logSumExp(L, n * V, V) - L[n * V + targets[n]]);
  }
}

function crossEntropyBackward(
  dLogits: Tensor,
  logits: Tensor,
  targets: Int32Array,
  weights: Float32Array,
): void {
  const [N, V] = ceDims(logits, targets, weights);
  sameSize("crossEntropyBackward", { logits, dLogits });
  const L = refData(logits, "logits");
  const dL = refData(dLogits, "dLogits");
  for (let n = 0; n < N; n++) {
    const w = weights[n];
    if (w === 0) continue;
    const lse = logSumExp(L, n * V, V);
    for (let v = 0; v < V; v++) {
      dL[n * V + v] += w * (Math.exp(L[n * V + v] - lse) - (v === targets[n] ? 1 : 0));
    }
  }
}

/** `d = dOut b^T` into zeros, then `swigluBackward` from `d` (the fused op's definition). */
function matmulSwigluBackward(
  dGate: Tensor,
  dUp: Tensor,
  dOut: Tensor,
  b: Tensor,
  gate: Tensor,
  up: Tensor,
): void {
  const d = new RefTensor(gate.shape);
  matmul(d, dOut, b, { transB: true, accumulate: true });
  swigluBackward(dGate, dUp, d, gate, up);
}

/** `matmul`, the bias added as a rank-1 product with ones, then `activationForward` (the fused op's definition). */
function matmulActivationForward(
  out: Tensor,
  pre: Tensor,
  a: Tensor,
  b: Tensor,
  bias: Tensor | null,
  kind: Activation,
  scale: number,
): void {
  matmul(pre, a, b);
  if (bias) {
    const rows = pre.size / Math.max(1, bias.size);
    matmul(pre, new RefTensor([rows, 1], new Float64Array(rows).fill(1)), bias, { accumulate: true });
  }
  activationForward(kind, out, pre, scale);
}

interface AttentionDims {
  B: number;
  T: number;
  H: number;
  D: number;
}

function attentionDims(q: Tensor, others: Record<string, Tensor>, lse: Tensor): AttentionDims {
  if (q.shape.length !== 4) throw new RangeError(`attention: q must be [B, T, H, D], got [${q.shape}]`);
  const [B, T, H, D] = q.shape;
  if (D % 2 !== 0) throw new RangeError(`attention: head size D must be even for RoPE, got ${D}`);
  for (const [name, t] of Object.entries(others)) {
    if (t.shape.length !== 4 || t.shape.some((d, i) => d !== q.shape[i])) {
      throw new RangeError(`attention: ${name} has shape [${t.shape}], expected [${q.shape}]`);
    }
  }
  if (lse.size !== B * T * H) throw new RangeError(`attention: lse has ${lse.size} elements, expected B*T*H`);
  return { B, T, H, D };
}

/**
 * A RoPE-rotated copy of `src` `[B, T, H, D]` (positions relative to each sequence start). With
 * `inverse`, apply the transposed rotation (used to pull gradients back).
 */
function rope(
  src: Float64Array,
  dims: AttentionDims,
  first: Int32Array,
  base: number,
  inverse: boolean,
): Float64Array {
  const { B, T, H, D } = dims;
  const half = D / 2;
  const out = new Float64Array(src.length);
  const sign = inverse ? -1 : 1;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const p = t - first[b * T + t];
      for (let h = 0; h < H; h++) {
        const off = ((b * T + t) * H + h) * D;
        for (let i = 0; i < half; i++) {
          const angle = p * Math.pow(base, (-2 * i) / D);
          const c = Math.cos(angle);
          const s = sign * Math.sin(angle);
          const x0 = src[off + i];
          const x1 = src[off + i + half];
          out[off + i] = x0 * c - x1 * s;
          out[off + i + half] = x0 * s + x1 * c;
        }
      }
    }
  }
  return out;
}

/** Score of query (b,t,h) against key (b,s,h) from rotated arrays. */
function score(
  Qr: Float64Array,
  Kr: Float64Array,
  dims: AttentionDims,
  b: number,
  t: number,
  s: number,
  h: number,
) {
  const { T, H, D } = dims;
  const qo = ((b * T + t) * H + h) * D;
  const ko = ((b * T + s) * H + h) * D;
  let acc = 0;
  for (let d = 0; d < D; d++) acc += Qr[qo + d] * Kr[ko + d];
  return acc / Math.sqrt(D);
}

function attentionForward(
  out: Tensor,
  lse: Tensor,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  ropeBase: number,
  starts?: Uint8Array,
): void {
  const dims = attentionDims(q, { k, v, out }, lse);
  const { B, T, H, D } = dims;
  const first = sequenceStarts(B, T, starts);
  const Qr = rope(refData(q, "q"), dims, first, ropeBase, false);
  const Kr = rope(refData(k, "k"), dims, first, ropeBase, false);
  const Vd = refData(v, "v");
  const O = refData(out, "out");
  const LSE = refData(lse, "lse");
  const scores = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const s0 = first[b * T + t];
      for (let h = 0; h < H; h++) {
        let max = -Infinity;
        for (let s = s0; s <= t; s++) {
          scores[s] = score(Qr, Kr, dims, b, t, s, h);
          max = Math.max(max, scores[s]);
        }
        let sum = 0;
        for (let s = s0; s <= t; s++) sum += Math.exp(scores[s] - max);
        const l = max + Math.log(sum);
        const oo = ((b * T + t) * H + h) * D;
        LSE[(b * T + t) * H + h] = l;
        O.fill(0, oo, oo + D);
        for (let s = s0; s <= t; s++) {
          const p = Math.exp(scores[s] - l);
          const vo = ((b * T + s) * H + h) * D;
          for (let d = 0; d < D; d++) O[oo + d] += p * Vd[vo + d];
        }
      }
    }
  }
}

function attentionBackward(
  dq: Tensor,
  dk: Tensor,
  dv: Tensor,
  dOut: Tensor,
  out: Tensor,
  lse: Tensor,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  ropeBase: number,
  starts?: Uint8Array,
): void {
  const dims = attentionDims(q, { k, v, out, dOut, dq, dk, dv }, lse);
  const { B, T, H, D } = dims;
  const first = sequenceStarts(B, T, starts);
  const Qr = rope(refData(q, "q"), dims, first, ropeBase, false);
  const Kr = rope(refData(k, "k"), dims, first, ropeBase, false);
  const Vd = refData(v, "v");
  const O = refData(out, "out");
  const dO = refData(dOut, "dOut");
  const LSE = refData(lse, "lse");
  const dV = refData(dv, "dv");
  // gradients with respect to the rotated q and k, rotated back at the end
  const dQr = new Float64Array(Qr.length);
  const dKr = new Float64Array(Kr.length);
  const scale = 1 / Math.sqrt(D);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const s0 = first[b * T + t];
      for (let h = 0; h < H; h++) {
        const row = (b * T + t) * H + h;
        const oo = row * D;
        let dOo = 0; // sum_s p_s (dO . v_s) = dO . out
        for (let d = 0; d < D; d++) dOo += dO[oo + d] * O[oo + d];
        for (let s = s0; s <= t; s++) {
          const p = Math.exp(score(Qr, Kr, dims, b, t, s, h) - LSE[row]);
          const ko = ((b * T + s) * H + h) * D;
          let dp = 0;
          for (let d = 0; d < D; d++) {
            dp += dO[oo + d] * Vd[ko + d];
            dV[ko + d] += p * dO[oo + d];
          }
          const ds = p * (dp - dOo) * scale;
          for (let d = 0; d < D; d++) {
            dQr[oo + d] += ds * Kr[ko + d];
            dKr[ko + d] += ds * Qr[oo + d];
          }
        }
      }
    }
  }
  axpyArray(refData(dq, "dq"), rope(dQr, dims, first, ropeBase, true));
  axpyArray(refData(dk, "dk"), rope(dKr, dims, first, ropeBase, true));
}

function axpyArray(y: Float64Array, x: Float64Array): void {
  for (let i = 0; i < y.length; i++) y[i] += x[i];
}

function adamw(
  param: Tensor,
  grad: Tensor,
  m: Tensor,
  v: Tensor,
  p: AdamWParams,
  decay: boolean,
  guard?: StepGuard,
): void {
  sameSize("adamw", { param, grad, m, v });
  if (!Number.isInteger(p.step) || p.step < 1) {
    throw new RangeError(`adamw: step must be an integer >= 1, got ${p.step}`);
  }
  let gradScale = p.gradScale;
  if (guard) {
    const stats = refData(guard.stats, "guard.stats");
    const halted = refData(guard.halted, "guard.halted");
    const scale = guardedGradScale(stats[0], stats[1], halted[0], guard, p.gradScale);
    if (scale === null) {
      halted[0] = 1;
      return;
    }
    gradScale = scale;
  }
  const P = refData(param, "param");
  const G = refData(grad, "grad");
  const M = refData(m, "m");
  const Vd = refData(v, "v");
  const c1 = 1 - Math.pow(p.beta1, p.step);
  const c2 = 1 - Math.pow(p.beta2, p.step);
  const shrink = decay ? 1 - p.lr * p.weightDecay : 1;
  for (let i = 0; i < P.length; i++) {
    const g = gradScale * G[i];
    M[i] = p.beta1 * M[i] + (1 - p.beta1) * g;
    Vd[i] = p.beta2 * Vd[i] + (1 - p.beta2) * g * g;
    P[i] = P[i] * shrink - (p.lr * (M[i] / c1)) / (Math.sqrt(Vd[i] / c2) + p.eps);
  }
}

function sumSquares(x: Tensor): Promise<number> {
  const X = refData(x, "x");
  let s = 0;
  for (let i = 0; i < X.length; i++) s += X[i] * X[i];
  return Promise.resolve(s);
}

function accumulateSum(out: Tensor, index: number, xs: readonly Tensor[], squares: boolean): void {
  const O = refData(out, "out");
  if (!Number.isInteger(index) || index < 0 || index >= O.length) {
    throw new RangeError(`accumulateSum: index ${index} is outside out's ${O.length} elements`);
  }
  for (const x of xs) {
    const X = refData(x, "x");
    let s = 0;
    for (let i = 0; i < X.length; i++) s += squares ? X[i] * X[i] : X[i];
    O[index] += s;
  }
}

/** Dense ops on `RefTensor`s (float64 reference; conventions in the module doc). */
export const refDenseOps: DenseOps = {
  matmul,
  embeddingForward,
  embeddingBackward,
  rmsNormForward,
  rmsNormBackward,
  swigluForward,
  swigluBackward,
  matmulSwigluBackward,
  activationForward,
  activationBackward,
  matmulActivationForward,
  add,
  mul,
  axpy,
  fill,
  shortConvForward,
  shortConvBackward,
  crossEntropyForward,
  crossEntropyBackward,
  attentionForward,
  attentionBackward,
  adamw,
  sumSquares,
  accumulateSum,
};
