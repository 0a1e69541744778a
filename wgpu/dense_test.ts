/**
 * The WebGPU dense ops against the float64 reference backend at small odd shapes. Backward ops
 * start from random gradients on both backends, so the accumulation (`+=`) is checked too.
 */

import type { Backend, Tensor } from "../src/rules/backend.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { assertRelL2, Rng } from "../src/testing/compare.ts";
import { gpuTest } from "./_test_util.ts";

const ref = createRefBackend();
const TOL = 2e-6;
const FULL = Deno.env.get("FALCON_TEST_LEVEL") === "full";

/** The same random tensor on both backends. */
function pair(gpu: Backend, rng: Rng, shape: number[], scale = 1): [Tensor, Tensor] {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = rng.normals(n, scale);
  return [gpu.fromArray(data, shape), ref.fromArray(data, shape)];
}

async function same(name: string, gpu: Backend, pairs: [Tensor, Tensor][], tol = TOL) {
  for (const [k, [g, r]] of pairs.entries()) {
    const a = await gpu.read(g);
    const b = await ref.read(r);
    assertRelL2(`${name}[${k}]`, a, b, tol);
  }
}

gpuTest(
  "webgpu matmul matches the reference for every transpose, with and without accumulate, both tiles",
  async (gpu) => {
    const rng = new Rng(1);
    // every transpose on the small-tile kernel, accumulate on half of them, and two variants of the
    // large-tile kernel (outputs of >= 128 tiles of 128 x 128): each variant is a pipeline, slow to compile on llvmpipe
    const cases: [number, number, number, boolean, boolean, boolean][] = [
      [37, 29, 45, false, false, false],
      [37, 29, 45, false, true, true],
      [37, 29, 45, true, false, true],
      [37, 29, 45, true, true, false],
      [1537, 1290, 11, false, false, true],
      [1537, 1290, 11, true, true, false],
      // split-K (few output tiles, K >= SPLIT_K_MIN_DEPTH): 4 slices, the last one shorter, every transpose
      [5, 7, 1100, false, false, false],
      [5, 7, 1100, false, true, true],
      [5, 7, 1100, true, false, true],
      [5, 7, 1100, true, true, false],
      // the weight-gradient shape of training (x^T dy, accumulated) on the large-tile kernel: a slow
      // compile and run on a software adapter, so only at FALCON_TEST_LEVEL=full (the GPU machine)
      ...(FULL
        ? [[256, 256, 1024, true, false, true] as [number, number, number, boolean, boolean, boolean]]
        : []),
    ];
    for (const [M, N, K, transA, transB, accumulate] of cases) {
      const a = pair(gpu, rng, transA ? [K, M] : [M, K]);
      const b = pair(gpu, rng, transB ? [N, K] : [K, N]);
      const out = pair(gpu, rng, [M, N]);
      const o = { transA, transB, accumulate };
      gpu.matmul(out[0], a[0], b[0], o);
      ref.matmul(out[1], a[1], b[1], o);
      await same(`matmul ${M}x${N}x${K} ${JSON.stringify(o)}`, gpu, [out], 1e-5);
    }
  },
);

gpuTest("webgpu matmul flattens leading dimensions into rows and rejects mismatched shapes", async (gpu) => {
  const rng = new Rng(2);
  const a = pair(gpu, rng, [2, 3, 5]);
  const b = pair(gpu, rng, [5, 4]);
  const out = pair(gpu, rng, [2, 3, 4]);
  gpu.matmul(out[0], a[0], b[0]);
  ref.matmul(out[1], a[1], b[1]);
  await same("matmul 3-D", gpu, [out]);
  let threw = false;
  try {
    gpu.matmul(out[0], a[0], gpu.zeros([6, 4]));
  } catch (e) {
    threw = e instanceof RangeError;
  }
  if (!threw) throw new Error("matmul accepted b of the wrong size");
});

gpuTest("webgpu element-wise ops, activations and SwiGLU match the reference", async (gpu) => {
  const rng = new Rng(3);
  const shape = [7, 13];
  const x = pair(gpu, rng, shape, 3);
  const y = pair(gpu, rng, shape);
  const out = pair(gpu, rng, shape);
  gpu.add(out[0], x[0], y[0]);
  ref.add(out[1], x[1], y[1]);
  await same("add", gpu, [out]);
  gpu.mul(out[0], x[0], y[0]);
  ref.mul(out[1], x[1], y[1]);
  await same("mul", gpu, [out]);
  gpu.axpy(out[0], x[0], -0.75);
  ref.axpy(out[1], x[1], -0.75);
  await same("axpy", gpu, [out]);
  for (const kind of ["sigmoid", "softplus", "silu"] as const) {
    gpu.activationForward(kind, out[0], x[0], 1.5);
    ref.activationForward(kind, out[1], x[1], 1.5);
    const dx = pair(gpu, rng, shape);
    gpu.activationBackward(kind, dx[0], y[0], x[0], 1.5);
    ref.activationBackward(kind, dx[1], y[1], x[1], 1.5);
    await same(`activation ${kind}`, gpu, [out, dx]);
  }
  gpu.swigluForward(out[0], x[0], y[0]);
  ref.swigluForward(out[1], x[1], y[1]);
  const dg = pair(gpu, rng, shape);
  const du = pair(gpu, rng, shape);
  const dOut = pair(gpu, rng, shape);
  gpu.swigluBackward(dg[0], du[0], dOut[0], x[0], y[0]);
  ref.swigluBackward(dg[1], du[1], dOut[1], x[1], y[1]);
  await same("swiglu", gpu, [out, dg, du]);
  gpu.fill(out[0], 2.5);
  ref.fill(out[1], 2.5);
  gpu.copy(dg[0], x[0]);
  ref.copy(dg[1], x[1]);
  await same("fill, copy", gpu, [out, dg]);
});

gpuTest("webgpu RMSNorm forward and backward match the reference, with and without weight", async (gpu) => {
  const rng = new Rng(4);
  // N = 150: the weight gradient sums three row slices of ROWS_PER_SLICE (64), the last one partial
  for (const [N, D, withWeight] of [[11, 37, true], [11, 37, false], [150, 37, true]] as const) {
    const x = pair(gpu, rng, [N, D], 2);
    const w = pair(gpu, rng, [D]);
    const out = pair(gpu, rng, [N, D]);
    const rstd = pair(gpu, rng, [N]);
    gpu.rmsNormForward(out[0], rstd[0], x[0], withWeight ? w[0] : null, 1e-5);
    ref.rmsNormForward(out[1], rstd[1], x[1], withWeight ? w[1] : null, 1e-5);
    const dx = pair(gpu, rng, [N, D]);
    const dw = pair(gpu, rng, [D]);
    const dOut = pair(gpu, rng, [N, D]);
    gpu.rmsNormBackward(dx[0], withWeight ? dw[0] : null, dOut[0], x[0], withWeight ? w[0] : null, rstd[0]);
    ref.rmsNormBackward(dx[1], withWeight ? dw[1] : null, dOut[1], x[1], withWeight ? w[1] : null, rstd[1]);
    await same(`rmsNorm N=${N} weight=${withWeight}`, gpu, [out, rstd, dx, dw]);
  }
});

gpuTest("webgpu embedding forward and backward (repeated ids) match the reference", async (gpu) => {
  const rng = new Rng(5);
  const [V, D] = [9, 6];
  const ids = Int32Array.from([3, 0, 3, 8, 1, 3, 0]);
  const table = pair(gpu, rng, [V, D]);
  const out = pair(gpu, rng, [ids.length, D]);
  gpu.embeddingForward(out[0], table[0], ids);
  ref.embeddingForward(out[1], table[1], ids);
  const dTable = pair(gpu, rng, [V, D]);
  const dOut = pair(gpu, rng, [ids.length, D]);
  gpu.embeddingBackward(dTable[0], dOut[0], ids);
  ref.embeddingBackward(dTable[1], dOut[1], ids);
  await same("embedding", gpu, [out, dTable]);
});

gpuTest("webgpu short convolution with sequence starts matches the reference", async (gpu) => {
  const rng = new Rng(6);
  // B*T = 150 rows: the weight gradient sums three row slices (64, 64, 22) that cut across sequences
  const [B, T, C, W] = [3, 50, 5, 4];
  const starts = Uint8Array.from(
    { length: B * T },
    (_, i) => (i % T === 0 || i === 5 || i === T + 3 || i === 2 * T + 17 ? 1 : 0),
  );
  const x = pair(gpu, rng, [B, T, C]);
  const w = pair(gpu, rng, [C, W]);
  const out = pair(gpu, rng, [B, T, C]);
  gpu.shortConvForward(out[0], x[0], w[0], starts);
  ref.shortConvForward(out[1], x[1], w[1], starts);
  const dx = pair(gpu, rng, [B, T, C]);
  const dw = pair(gpu, rng, [C, W]);
  const dOut = pair(gpu, rng, [B, T, C]);
  gpu.shortConvBackward(dx[0], dw[0], dOut[0], x[0], w[0], starts);
  ref.shortConvBackward(dx[1], dw[1], dOut[1], x[1], w[1], starts);
  await same("shortConv", gpu, [out, dx, dw]);
});

gpuTest("webgpu cross-entropy forward and backward (zero-weight rows) match the reference", async (gpu) => {
  const rng = new Rng(7);
  const [N, V] = [6, 19];
  const logits = pair(gpu, rng, [N, V], 3);
  const targets = Int32Array.from([4, 0, 18, -1, 7, 7]);
  const weights = Float32Array.from([1, 0.5, 2, 0, 1, 1]);
  const losses = pair(gpu, rng, [N]);
  gpu.crossEntropyForward(losses[0], logits[0], targets, weights);
  ref.crossEntropyForward(losses[1], logits[1], targets, weights);
  const dl = pair(gpu, rng, [N, V]);
  gpu.crossEntropyBackward(dl[0], logits[0], targets, weights);
  ref.crossEntropyBackward(dl[1], logits[1], targets, weights);
  await same("crossEntropy", gpu, [losses, dl]);
});

gpuTest("webgpu causal attention with RoPE and sequence starts matches the reference", async (gpu) => {
  const rng = new Rng(8);
  const [B, T, H, D] = [2, 7, 2, 6];
  const starts = Uint8Array.from({ length: B * T }, (_, i) => (i % T === 0 || i === 4 ? 1 : 0));
  const q = pair(gpu, rng, [B, T, H, D]);
  const k = pair(gpu, rng, [B, T, H, D]);
  const v = pair(gpu, rng, [B, T, H, D]);
  const out = pair(gpu, rng, [B, T, H, D]);
  const lse = pair(gpu, rng, [B, T, H]);
  gpu.attentionForward(out[0], lse[0], q[0], k[0], v[0], 100, starts);
  ref.attentionForward(out[1], lse[1], q[1], k[1], v[1], 100, starts);
  const dq = pair(gpu, rng, [B, T, H, D]);
  const dk = pair(gpu, rng, [B, T, H, D]);
  const dv = pair(gpu, rng, [B, T, H, D]);
  const dOut = pair(gpu, rng, [B, T, H, D]);
  gpu.attentionBackward(dq[0], dk[0], dv[0], dOut[0], out[0], lse[0], q[0], k[0], v[0], 100, starts);
  ref.attentionBackward(dq[1], dk[1], dv[1], dOut[1], out[1], lse[1], q[1], k[1], v[1], 100, starts);
  await same("attention", gpu, [out, lse, dq, dk, dv], 1e-5);
});

gpuTest("webgpu AdamW (with and without decay) and sumSquares match the reference", async (gpu) => {
  const rng = new Rng(9);
  const shape = [5, 7];
  for (const decay of [true, false]) {
    const p = pair(gpu, rng, shape);
    const g = pair(gpu, rng, shape);
    const m = pair(gpu, rng, shape, 0.1);
    const v = [
      gpu.fromArray(new Float64Array(35).fill(0.04), shape),
      ref.fromArray(new Float64Array(35).fill(0.04), shape),
    ] as [
      Tensor,
      Tensor,
    ];
    const params = {
      lr: 1e-2,
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-8,
      weightDecay: 0.1,
      step: 3,
      gradScale: 0.5,
    };
    gpu.adamw(p[0], g[0], m[0], v[0], params, decay);
    ref.adamw(p[1], g[1], m[1], v[1], params, decay);
    await same(`adamw decay=${decay}`, gpu, [p, m, v]);
  }
  const x = pair(gpu, rng, [1001]);
  const a = await gpu.sumSquares(x[0]);
  const b = await ref.sumSquares(x[1]);
  assertRelL2("sumSquares", [a], [b], 1e-6);
});

gpuTest(
  "webgpu accumulateSum and the guarded AdamW (device clipping, halt on a non-finite sum) match the reference",
  async (gpu) => {
    const rng = new Rng(10);
    const shape = [7, 9];
    const params = {
      lr: 1e-2,
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-8,
      weightDecay: 0.1,
      step: 2,
      gradScale: 0.25,
    };
    // clipNorm 1 clips (the norm of a 63-element normal gradient is ~8 before normScale); 100 does not
    for (const [clipNorm, poison] of [[1, false], [100, false], [1, true]] as const) {
      const losses = pair(gpu, rng, [1001]);
      const g = pair(gpu, rng, shape);
      const stats = pair(gpu, rng, [2]);
      for (const be of [0, 1]) {
        const b = be === 0 ? gpu : ref;
        b.fill(stats[be], 0);
        b.accumulateSum(stats[be], 0, [losses[be]], false);
        b.accumulateSum(stats[be], 1, [g[be], losses[be]], true); // several tensors into one sum
        b.accumulateSum(stats[be], 1, [g[be]], true); // accumulates onto it
        if (poison) b.fill(stats[be], NaN);
      }
      await same(`accumulateSum clip=${clipNorm}`, gpu, poison ? [] : [stats], 1e-6);
      const p = pair(gpu, rng, shape);
      const m = pair(gpu, rng, shape, 0.1);
      const v = pair(gpu, rng, shape, 0.1).map((t, be) => {
        (be === 0 ? gpu : ref).mul(t, t, t); // second moments are non-negative
        return t;
      }) as [Tensor, Tensor];
      const halted = [gpu.zeros([1]), ref.zeros([1])];
      const before = await gpu.read(p[0]);
      for (const be of [0, 1]) {
        const guard = { stats: stats[be], halted: halted[be], normScale: 0.5, clipNorm };
        (be === 0 ? gpu : ref).adamw(p[be], g[be], m[be], v[be], params, true, guard);
      }
      await same(`guarded adamw clip=${clipNorm} poison=${poison}`, gpu, [p, m, v], 1e-5);
      const flag = (await gpu.read(halted[0]))[0];
      if (flag !== (poison ? 1 : 0)) throw new Error(`halted flag ${flag}, expected ${poison ? 1 : 0}`);
      const after = await gpu.read(p[0]);
      const changed = after.some((x, i) => x !== before[i]);
      if (changed === poison) {
        throw new Error(`poison=${poison} but the parameters ${changed ? "changed" : "did not change"}`);
      }
    }
  },
);
