/**
 * The fused dense ops of the `webgpu` backend (`addRmsNormForward`, `crossEntropyForwardBackward`,
 * `matmulSwigluForward`, `matmulSwigluBackward`) and the accumulating kernels that take a pending
 * zero-fill of their output (`GpuRuntime.takeClear`): each against the float64 reference, and bit for
 * bit against the plain ops it replaces on the same backend. Small odd shapes (partial workgroups, rows
 * that are not a multiple of a tile), and the small-tile GEMM only (few pipelines: llvmpipe compiles slowly).
 */

import assert from "node:assert/strict";
import {
  addRmsNormForward,
  type Backend,
  crossEntropyForwardBackward,
  matmulSwigluForward,
  type Tensor,
} from "../src/rules/backend.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { assertRelL2, Rng } from "../src/testing/compare.ts";
import { callsDuring, gpuTest } from "./_test_util.ts";
import type { WebGpuBackend } from "./backend.ts";

const ref = createRefBackend();
const TOL = 2e-6;

/** The same random tensor on the GPU (twice: for the fused op and for the plain pair) and the reference. */
function triple(gpu: Backend, rng: Rng, shape: number[], scale = 1): [Tensor, Tensor, Tensor] {
  const data = rng.normals(shape.reduce((a, b) => a * b, 1), scale);
  return [gpu.fromArray(data, shape), gpu.fromArray(data, shape), ref.fromArray(data, shape)];
}

/** Each tensor of the fused result equals the plain pair's bit for bit and the reference within `tol`. */
async function check(name: string, gpu: Backend, tensors: [Tensor, Tensor, Tensor][], tol = TOL) {
  for (const [k, [fused, plain, r]] of tensors.entries()) {
    const a = await gpu.read(fused);
    const b = await gpu.read(plain);
    const firstDiff = a.findIndex((x, i) => !Object.is(x, b[i]));
    assert.equal(firstDiff, -1, `${name}[${k}]: fused and plain differ first at ${firstDiff}`);
    assertRelL2(`${name}[${k}]`, a, await ref.read(r), tol);
  }
}

/** Calls of `clearBuffer` while `body` records (and flushes) its commands. */
function clearsDuring(gpu: WebGpuBackend, body: () => void): number {
  return callsDuring(gpu, GPUCommandEncoder.prototype, "clearBuffer", body);
}

gpuTest(
  "addRmsNormForward is add then rmsNormForward, bit for bit (with and without weight)",
  async (gpu) => {
    const rng = new Rng(11);
    // D = 37: rows of a 64-wide workgroup with idle lanes; D = 150: lanes take several columns
    for (const [N, D, withWeight] of [[7, 37, true], [5, 150, false]] as const) {
      const a = triple(gpu, rng, [N, D], 2);
      const b = triple(gpu, rng, [N, D]);
      const w = triple(gpu, rng, [D]);
      const sum = triple(gpu, rng, [N, D]);
      const out = triple(gpu, rng, [N, D]);
      const rstd = triple(gpu, rng, [N]);
      const weight = (i: number) => (withWeight ? w[i] : null);
      gpu.addRmsNormForward!(sum[0], out[0], rstd[0], a[0], b[0], weight(0), 1e-6);
      gpu.add(sum[1], a[1], b[1]);
      gpu.rmsNormForward(out[1], rstd[1], sum[1], weight(1), 1e-6);
      addRmsNormForward(ref, sum[2], out[2], rstd[2], a[2], b[2], weight(2), 1e-6);
      await check(`addRmsNorm N=${N} D=${D}`, gpu, [sum, out, rstd]);
    }
  },
);

gpuTest(
  "crossEntropyForwardBackward is the forward and the backward, bit for bit (zero-weight rows)",
  async (gpu) => {
    const rng = new Rng(12);
    const [N, V] = [6, 19];
    const logits = triple(gpu, rng, [N, V], 3);
    const targets = Int32Array.from([4, 0, 18, -1, 7, 7]);
    const weights = Float32Array.from([1, 0.5, 2, 0, 1, 1]);
    const losses = triple(gpu, rng, [N]);
    const dLogits = triple(gpu, rng, [N, V]); // random: the backward accumulates
    gpu.crossEntropyForwardBackward!(losses[0], dLogits[0], logits[0], targets, weights);
    gpu.crossEntropyForward(losses[1], logits[1], targets, weights);
    gpu.crossEntropyBackward(dLogits[1], logits[1], targets, weights);
    crossEntropyForwardBackward(ref, losses[2], dLogits[2], logits[2], targets, weights);
    await check("crossEntropyForwardBackward", gpu, [losses, dLogits]);
  },
);

gpuTest("matmulSwigluForward is matmul then swigluForward, bit for bit, as gate and as up", async (gpu) => {
  const rng = new Rng(13);
  const [M, N, K] = [37, 29, 45]; // partial 64 x 64 tiles in both directions
  const x = triple(gpu, rng, [M, K]);
  const w = triple(gpu, rng, [K, N], 0.3);
  for (const role of ["gate", "up"] as const) {
    const other = triple(gpu, rng, [M, N]);
    const product = triple(gpu, rng, [M, N]);
    const out = triple(gpu, rng, [M, N]);
    gpu.matmulSwigluForward!(out[0], product[0], x[0], w[0], other[0], role);
    gpu.matmul(product[1], x[1], w[1]);
    if (role === "gate") gpu.swigluForward(out[1], product[1], other[1]);
    else gpu.swigluForward(out[1], other[1], product[1]);
    matmulSwigluForward(ref, out[2], product[2], x[2], w[2], other[2], role);
    await check(`matmulSwigluForward ${role}`, gpu, [product, out], 1e-5);
  }
});

gpuTest(
  "matmulActivationForward is matmul, the bias as a product with ones, then the activation, bit for bit",
  async (gpu) => {
    const rng = new Rng(16);
    const [M, N, K] = [37, 5, 45];
    const x = triple(gpu, rng, [M, K]);
    // the weight and the bias as tensors of one block (as parameters are): both read from one buffer
    const [wBlock, biasBlock] = gpu.zerosBlock([[K, N], [N]]);
    const wData = rng.normals(K * N, 0.3);
    const biasData = rng.normals(N);
    gpu.copy(wBlock, gpu.fromArray(wData, [K, N]));
    gpu.copy(biasBlock, gpu.fromArray(biasData, [N]));
    const [wRef, biasRef] = [ref.fromArray(wData, [K, N]), ref.fromArray(biasData, [N])];
    const ones = gpu.fromArray(new Float32Array(M).fill(1), [M, 1]);
    for (const [kind, withBias] of [["softplus", true], ["sigmoid", false]] as const) {
      const pre = triple(gpu, rng, [M, N]);
      const out = triple(gpu, rng, [M, N]);
      gpu.matmulActivationForward!(out[0], pre[0], x[0], wBlock, withBias ? biasBlock : null, kind, 1.5);
      gpu.matmul(pre[1], x[1], wBlock);
      if (withBias) gpu.matmul(pre[1], ones, biasBlock, { accumulate: true });
      gpu.activationForward(kind, out[1], pre[1], 1.5);
      ref.matmulActivationForward!(out[2], pre[2], x[2], wRef, withBias ? biasRef : null, kind, 1.5);
      await check(`matmulActivationForward ${kind} bias=${withBias}`, gpu, [pre, out], 1e-5);
    }
  },
);

gpuTest(
  "matmulSwigluBackward is matmul into zeros then swigluBackward, bit for bit, accumulating",
  async (gpu) => {
    const rng = new Rng(14);
    const [M, N, K] = [37, 29, 45];
    const dOut = triple(gpu, rng, [M, K]);
    const w = triple(gpu, rng, [N, K], 0.3); // the projection's weight as its output's matmul sees it
    const gate = triple(gpu, rng, [M, N], 2);
    const up = triple(gpu, rng, [M, N]);
    const dGate = triple(gpu, rng, [M, N]);
    const dUp = triple(gpu, rng, [M, N]);
    gpu.matmulSwigluBackward!(dGate[0], dUp[0], dOut[0], w[0], gate[0], up[0]);
    const d = gpu.zeros([M, N]);
    gpu.matmul(d, dOut[1], w[1], { transB: true, accumulate: true });
    gpu.swigluBackward(dGate[1], dUp[1], d, gate[1], up[1]);
    ref.matmulSwigluBackward!(dGate[2], dUp[2], dOut[2], w[2], gate[2], up[2]);
    await check("matmulSwigluBackward", gpu, [dGate, dUp], 1e-5);
  },
);

gpuTest(
  "accumulating ops into a zero-filled output take its clear and give bit for bit the result over zeros",
  async (gpu) => {
    const rng = new Rng(15);
    const [N, D] = [7, 37];
    const x = gpu.fromArray(rng.normals(N * D, 2), [N, D]);
    const y = gpu.fromArray(rng.normals(N * D), [N, D]);
    const z = gpu.fromArray(rng.normals(N * D), [N, D]);
    const square = gpu.fromArray(rng.normals(D * D, 0.3), [D, D]);
    const rstd = gpu.zeros([N]);
    gpu.rmsNormForward(gpu.zeros([N, D]), rstd, x, null, 1e-6);
    const targets = Int32Array.from({ length: N }, (_, i) => (3 * i) % D);
    const weights = Float32Array.from({ length: N }, (_, i) => (i === 2 ? 0 : 1));
    const starts = Uint8Array.from({ length: N }, (_, i) => (i === 0 || i === 3 ? 1 : 0));
    const convWeight = gpu.fromArray(rng.normals(D * 4), [D, 4]);
    const convInput = gpu.fromArray(rng.normals(N * D), [1, N, D]);
    /** Each op with the shape and number of its outputs (zero-filled just before) and the clears it keeps. */
    const ops: [string, number[], number, number, (outs: Tensor[]) => void][] = [
      ["matmul accumulate", [N, N], 1, 0, ([o]) => gpu.matmul(o, x, y, { transB: true, accumulate: true })],
      ["rmsNormBackward", [N, D], 1, 0, ([o]) => gpu.rmsNormBackward(o, null, y, x, null, rstd)],
      ["swigluBackward", [N, D], 2, 0, ([g, u]) => gpu.swigluBackward(g, u, y, x, z)],
      ["activationBackward", [N, D], 1, 0, ([o]) => gpu.activationBackward("softplus", o, y, x, 1)],
      ["crossEntropyBackward", [N, D], 1, 0, ([o]) => gpu.crossEntropyBackward(o, x, targets, weights)],
      ["matmulSwigluBackward", [N, D], 2, 0, ([g, u]) => gpu.matmulSwigluBackward!(g, u, y, square, x, z)],
      // dx takes its fill; the weight gradient (a zeros() of its own) keeps its clear and accumulates
      [
        "shortConvBackward",
        [1, N, D],
        1,
        1,
        ([o]) => gpu.shortConvBackward(o, gpu.zeros([D, 4]), y, convInput, convWeight, starts),
      ],
    ];
    for (const [name, shape, count, kept, op] of ops) {
      const size = shape.reduce((a, b) => a * b, 1);
      const taken = Array.from({ length: count }, () => gpu.fromArray(rng.normals(size), shape));
      const zeroed = Array.from({ length: count }, () => gpu.fromArray(rng.normals(size), shape));
      // over a clear recorded before the op (the flush records it) and over one the op takes
      for (const t of zeroed) gpu.fill(t, 0);
      gpu.runtime.flush();
      op(zeroed);
      const clears = clearsDuring(gpu, () => {
        for (const t of taken) gpu.fill(t, 0);
        op(taken);
      });
      assert.equal(clears, kept, `${name}: its zero-fill was taken`);
      for (let k = 0; k < count; k++) {
        const a = await gpu.read(taken[k]);
        const b = await gpu.read(zeroed[k]);
        const firstDiff = a.findIndex((v, i) => !Object.is(v, b[i]));
        assert.equal(firstDiff, -1, `${name}[${k}]: differs first at ${firstDiff}`);
      }
    }
  },
);

gpuTest(
  "a pending clear runs before the first command on its buffer and is dropped with the buffer",
  async (gpu) => {
    const rt = gpu.runtime;
    rt.flush();
    const a = gpu.fromArray([1, 2, 3, 4, 5], [5]);
    const b = gpu.fromArray([6, 7, 8, 9, 10], [5]);
    const out = gpu.zeros([5]);
    gpu.fill(a, 0);
    assert.equal(rt.pendingClears, 2, "a's and out's clears wait");
    gpu.add(out, b, b); // touches neither a's buffer nor, as an input, out's: out's clear runs first
    assert.equal(rt.pendingClears, 1, "out's clear was recorded before the add, a's still waits");
    assert.deepEqual(Array.from(await gpu.read(a)), [0, 0, 0, 0, 0]);
    assert.deepEqual(Array.from(await gpu.read(out)), [12, 14, 16, 18, 20]);
    const gone = gpu.zeros([5]);
    assert.equal(rt.pendingClears, 1);
    gpu.dispose(gone);
    assert.equal(rt.pendingClears, 0, "a disposed tensor's clear is dropped");
    const partial = gpu.fromArray([1, 2, 3, 4, 5, 6, 7, 8], [8]);
    rt.clear(liveBuffer(partial), 0, 16);
    assert.equal(
      rt.takeClear(liveBuffer(partial), 0, 32),
      false,
      "only a clear of exactly those bytes is taken",
    );
    assert.equal(rt.takeClear(liveBuffer(partial), 0, 16), true);
    assert.equal(rt.pendingClears, 0);
  },
);

function liveBuffer(t: Tensor): GPUBuffer {
  return (t as unknown as { buffer: GPUBuffer }).buffer;
}
