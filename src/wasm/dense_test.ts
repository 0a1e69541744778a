/**
 * The WASM backend's dense ops against the float64 reference backend: every op of DenseOps, odd
 * sizes (no multiple of 4), every matmul transpose with and without accumulate, single and multi
 * threaded GEMM (row bands, and column bands for thin products), sequence starts for the convolution
 * and attention. Float32 tolerance: relative L2 1e-5 (GEMM with long K: 2e-5). Backward ops are checked to accumulate into non-zero gradients.
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertRelL2, Rng } from "../testing/compare.ts";
import { createWasmBackend, type WasmBackend } from "./backend.ts";

const TOL = 1e-5;

/** The same data in both backends. */
class Pair {
  constructor(readonly wasm: WasmBackend, readonly ref: Backend, readonly rng: Rng) {}
  tensor(shape: number[], scale = 1, data?: Float64Array): [Tensor, Tensor] {
    const n = shape.reduce((a, b) => a * b, 1);
    const d = data ?? this.rng.normals(n, scale);
    return [this.wasm.fromArray(d, shape), this.ref.fromArray(d, shape)];
  }
  async check(name: string, t: [Tensor, Tensor], tol = TOL) {
    assertRelL2(name, await this.wasm.read(t[0]), await this.ref.read(t[1]), tol);
  }
}

async function withPair(threads: number, fn: (p: Pair) => Promise<void>, flavour?: "simd") {
  const wasm = await createWasmBackend({ threads, flavour });
  try {
    await fn(new Pair(wasm, createRefBackend(), new Rng(threads * 7 + 1)));
  } finally {
    wasm.close();
  }
}

for (const threads of [1, 2]) {
  Deno.test(`matmul matches the reference for every transpose, accumulate and odd size (${threads} thread(s))`, async () => {
    await withPair(threads, async (p) => {
      for (
        const [M, K, N] of [
          [1, 1, 1],
          [5, 3, 7],
          [13, 17, 19],
          [67, 300, 70],
          [130, 9, 2050],
          [5, 257, 257],
          [1, 300, 1025],
        ]
      ) {
        for (const transA of [false, true]) {
          for (const transB of [false, true]) {
            for (const accumulate of [false, true]) {
              const a = p.tensor(transA ? [K, M] : [M, K]);
              const b = p.tensor(transB ? [N, K] : [K, N]);
              const out = p.tensor([M, N]);
              const opts = { transA, transB, accumulate };
              p.wasm.matmul(out[0], a[0], b[0], opts);
              p.ref.matmul(out[1], a[1], b[1], opts);
              await p.check(`matmul ${M}x${K}x${N} ${JSON.stringify(opts)}`, out, 2e-5);
            }
          }
        }
      }
    });
  });
}

Deno.test("the plain-SIMD build's matmul matches the reference (odd sizes, every transpose)", async () => {
  await withPair(2, async (p) => {
    for (const [M, K, N] of [[5, 3, 7], [67, 300, 70]]) {
      for (const transA of [false, true]) {
        for (const transB of [false, true]) {
          const a = p.tensor(transA ? [K, M] : [M, K]);
          const b = p.tensor(transB ? [N, K] : [K, N]);
          const out = p.tensor([M, N]);
          p.wasm.matmul(out[0], a[0], b[0], { transA, transB, accumulate: true });
          p.ref.matmul(out[1], a[1], b[1], { transA, transB, accumulate: true });
          await p.check(`plain matmul ${M}x${K}x${N} ${transA} ${transB}`, out, 2e-5);
        }
      }
    }
  }, "simd");
});

Deno.test("matmul flattens leading dimensions into rows", async () => {
  await withPair(1, async (p) => {
    const a = p.tensor([2, 3, 5]);
    const b = p.tensor([5, 6]);
    const out = p.tensor([2, 3, 6]);
    p.wasm.matmul(out[0], a[0], b[0]);
    p.ref.matmul(out[1], a[1], b[1]);
    await p.check("matmul [2,3,5]x[5,6]", out);
  });
});

Deno.test("element-wise ops, activations and SwiGLU match the reference (forward and accumulating backward)", async () => {
  await withPair(1, async (p) => {
    const shape = [3, 11];
    const a = p.tensor(shape, 3);
    const b = p.tensor(shape);
    const out = p.tensor(shape);
    p.wasm.add(out[0], a[0], b[0]);
    p.ref.add(out[1], a[1], b[1]);
    await p.check("add", out);
    p.wasm.mul(out[0], a[0], b[0]);
    p.ref.mul(out[1], a[1], b[1]);
    await p.check("mul", out);
    p.wasm.axpy(out[0], a[0], -0.7);
    p.ref.axpy(out[1], a[1], -0.7);
    await p.check("axpy", out);
    for (const kind of ["sigmoid", "softplus", "silu"] as const) {
      p.wasm.activationForward(kind, out[0], a[0], 1.5);
      p.ref.activationForward(kind, out[1], a[1], 1.5);
      await p.check(`${kind} forward`, out);
      const dx = p.tensor(shape);
      p.wasm.activationBackward(kind, dx[0], b[0], a[0], 1.5);
      p.ref.activationBackward(kind, dx[1], b[1], a[1], 1.5);
      await p.check(`${kind} backward`, dx);
    }
    p.wasm.swigluForward(out[0], a[0], b[0]);
    p.ref.swigluForward(out[1], a[1], b[1]);
    await p.check("swiglu forward", out);
    const dg = p.tensor(shape);
    const du = p.tensor(shape);
    const dO = p.tensor(shape);
    p.wasm.swigluBackward(dg[0], du[0], dO[0], a[0], b[0]);
    p.ref.swigluBackward(dg[1], du[1], dO[1], a[1], b[1]);
    await p.check("swiglu dGate", dg);
    await p.check("swiglu dUp", du);
    p.wasm.fill(out[0], 2.5);
    p.ref.fill(out[1], 2.5);
    await p.check("fill", out);
    const s = [await p.wasm.sumSquares(a[0]), await p.ref.sumSquares(a[1])];
    if (!(Math.abs(s[0] - s[1]) <= 1e-6 * s[1])) throw new Error(`sumSquares ${s[0]} vs ${s[1]}`);
  });
});

Deno.test("rmsNorm, embedding, cross-entropy and AdamW match the reference", async () => {
  await withPair(1, async (p) => {
    const [N, D, V] = [7, 13, 9];
    const x = p.tensor([N, D], 2);
    for (const withWeight of [true, false]) {
      const w = withWeight ? p.tensor([D]) : null;
      const out = p.tensor([N, D]);
      const rstd = p.tensor([N]);
      p.wasm.rmsNormForward(out[0], rstd[0], x[0], w ? w[0] : null, 1e-6);
      p.ref.rmsNormForward(out[1], rstd[1], x[1], w ? w[1] : null, 1e-6);
      await p.check(`rmsNorm out (weight ${withWeight})`, out);
      await p.check("rmsNorm rstd", rstd);
      const dx = p.tensor([N, D]);
      const dw = withWeight ? p.tensor([D]) : null;
      const dO = p.tensor([N, D]);
      p.wasm.rmsNormBackward(dx[0], dw ? dw[0] : null, dO[0], x[0], w ? w[0] : null, rstd[0]);
      p.ref.rmsNormBackward(dx[1], dw ? dw[1] : null, dO[1], x[1], w ? w[1] : null, rstd[1]);
      await p.check("rmsNorm dx", dx);
      if (dw) await p.check("rmsNorm dWeight", dw);
    }
    const table = p.tensor([V, D]);
    const ids = Int32Array.from([3, 0, 8, 3, 5, 1, 2]);
    const emb = p.tensor([N, D]);
    p.wasm.embeddingForward(emb[0], table[0], ids);
    p.ref.embeddingForward(emb[1], table[1], ids);
    await p.check("embedding forward", emb);
    p.wasm.embeddingBackward(table[0], emb[0], ids);
    p.ref.embeddingBackward(table[1], emb[1], ids);
    await p.check("embedding backward", table);
    const logits = p.tensor([N, V], 3);
    const targets = Int32Array.from([1, 4, 0, 8, 2, 2, 7]);
    const weights = Float32Array.from([1, 0, 0.5, 1, 2, 1, 0]);
    const losses = p.tensor([N]);
    p.wasm.crossEntropyForward(losses[0], logits[0], targets, weights);
    p.ref.crossEntropyForward(losses[1], logits[1], targets, weights);
    await p.check("crossEntropy losses", losses);
    const dl = p.tensor([N, V]);
    p.wasm.crossEntropyBackward(dl[0], logits[0], targets, weights);
    p.ref.crossEntropyBackward(dl[1], logits[1], targets, weights);
    await p.check("crossEntropy dLogits", dl);
    for (const decay of [true, false]) {
      const param = p.tensor([N, D]);
      const grad = p.tensor([N, D]);
      const m = p.tensor([N, D], 0.1);
      const v = p.tensor([N, D], 0, p.rng.uniforms(N * D, 0.01, 0.1));
      const params = {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weightDecay: 0.1,
        step: 3,
        gradScale: 0.5,
      };
      p.wasm.adamw(param[0], grad[0], m[0], v[0], params, decay);
      p.ref.adamw(param[1], grad[1], m[1], v[1], params, decay);
      await p.check(`adamw param (decay ${decay})`, param);
      await p.check("adamw m", m);
      await p.check("adamw v", v);
    }
  });
});

Deno.test("shortConv and attention match the reference with sequence starts", async () => {
  await withPair(1, async (p) => {
    const [B, T, C, W] = [2, 11, 5, 4];
    const starts = new Uint8Array(B * T);
    starts[3] = 1;
    starts[4] = 1;
    starts[T + 7] = 1;
    for (const st of [undefined, starts]) {
      const x = p.tensor([B, T, C]);
      const w = p.tensor([C, W]);
      const out = p.tensor([B, T, C]);
      p.wasm.shortConvForward(out[0], x[0], w[0], st);
      p.ref.shortConvForward(out[1], x[1], w[1], st);
      await p.check("shortConv forward", out);
      const dx = p.tensor([B, T, C]);
      const dw = p.tensor([C, W]);
      const dO = p.tensor([B, T, C]);
      p.wasm.shortConvBackward(dx[0], dw[0], dO[0], x[0], w[0], st);
      p.ref.shortConvBackward(dx[1], dw[1], dO[1], x[1], w[1], st);
      await p.check("shortConv dx", dx);
      await p.check("shortConv dWeight", dw);
    }
    const [H, D] = [3, 6];
    for (const st of [undefined, starts]) {
      const q = p.tensor([B, T, H, D]);
      const k = p.tensor([B, T, H, D]);
      const v = p.tensor([B, T, H, D]);
      const out = p.tensor([B, T, H, D]);
      const lse = p.tensor([B, T, H]);
      p.wasm.attentionForward(out[0], lse[0], q[0], k[0], v[0], 100, st);
      p.ref.attentionForward(out[1], lse[1], q[1], k[1], v[1], 100, st);
      await p.check("attention out", out);
      await p.check("attention lse", lse);
      const dO = p.tensor([B, T, H, D]);
      const grads = [p.tensor([B, T, H, D]), p.tensor([B, T, H, D]), p.tensor([B, T, H, D])];
      p.wasm.attentionBackward(
        grads[0][0],
        grads[1][0],
        grads[2][0],
        dO[0],
        out[0],
        lse[0],
        q[0],
        k[0],
        v[0],
        100,
        st,
      );
      p.ref.attentionBackward(
        grads[0][1],
        grads[1][1],
        grads[2][1],
        dO[1],
        out[1],
        lse[1],
        q[1],
        k[1],
        v[1],
        100,
        st,
      );
      await p.check("attention dq", grads[0]);
      await p.check("attention dk", grads[1]);
      await p.check("attention dv", grads[2]);
    }
  });
});
