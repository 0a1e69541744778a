/**
 * Kernel probe of the WASM CPU backend on ONE thread, timed by the process's CPU time
 * (`process.cpuUsage()`), which stays steady on a machine that other jobs share (wall time does not):
 * GEMM GFLOP/s for square, thin (`M = 1`) and training-size products; Falcon-1 and Falcon-3 (window 4)
 * recurrent forward and backward at B = 1, T = 2048, H = 4, d = 64 (ms and in-kernel head-steps/s);
 * decoding of B = 16, H = 4 heads, one position per call from the carry (us per head-step, including the
 * per-call TypeScript work).
 * Each figure is the median of 7 timed repeats after a warm-up. Run it in two trees to compare them:
 *
 * ```sh
 * deno run --allow-read --allow-env bench/wasm_kernels.ts
 * ```
 *
 * @module
 */

import process from "node:process";
import { ruleConfig } from "../src/rules/config.ts";
import { Rng } from "../src/testing/compare.ts";
import { createWasmBackend, type WasmBackend } from "../src/wasm/backend.ts";

/** Milliseconds of CPU time (user + system) used by this process so far. */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3;
}

/** Median CPU milliseconds of `fn` over 7 repeats after one warm-up. */
function median(fn: () => void): number {
  fn();
  const ts: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t0 = cpuMs();
    fn();
    ts.push(cpuMs() - t0);
  }
  ts.sort((a, b) => a - b);
  return ts[3];
}

/** GFLOP/s of `out[M, N] = op(a) op(b)` (`reps` products per timed repeat). */
function gemm(be: WasmBackend, M: number, K: number, N: number, transB: boolean, reps: number): number {
  const rng = new Rng(1);
  const a = be.fromArray(rng.normals(M * K), [M, K]);
  const b = be.fromArray(rng.normals(K * N), transB ? [N, K] : [K, N]);
  const c = be.zeros([M, N]);
  const ms = median(() => {
    for (let i = 0; i < reps; i++) be.matmul(c, a, b, { transB });
  });
  for (const t of [a, b, c]) be.dispose(t);
  return (2 * M * N * K * reps) / (ms * 1e6);
}

/** Recurrent forward and backward times of a rule at B = 1, T = 2048, H = 4, d = 64. */
function falcon(be: WasmBackend, rule: "falcon1" | "falcon3") {
  const config = ruleConfig(rule);
  const [T, H, d] = [2048, 4, 64];
  const n = T * H;
  const rng = new Rng(2);
  const inputs = {
    q: be.fromArray(rng.normals(n * d), [1, T, H, d]),
    k: be.fromArray(rng.normals(n * d), [1, T, H, d]),
    v: be.fromArray(rng.normals(n * d), [1, T, H, d]),
    beta: be.fromArray(rng.uniforms(n, 0.2, 1.8), [1, T, H]),
    lambdabar: be.fromArray(rng.uniforms(n, 0, 0.5), [1, T, H]),
  };
  const dO = be.fromArray(rng.normals(n * d), [1, T, H, d]);
  const forwardMs = median(() => {
    const { o, carry } = be.fastWeightForward(config, inputs, { form: "recurrent" });
    for (const t of [o, carry.state, carry.lastKey, carry.windowX, carry.windowY]) be.dispose(t);
  });
  const backwardMs = median(() => {
    const g = be.fastWeightBackward(config, inputs, dO, { form: "recurrent" });
    for (const t of Object.values(g)) be.dispose(t);
  });
  return { forwardMs, backwardMs, forwardHeadStepsPerSecond: n / (forwardMs / 1e3) };
}

/** Microseconds per head-step of decoding B x H heads, one position per call. */
function decoding(be: WasmBackend, B: number, H: number, calls: number): number {
  const config = ruleConfig("falcon1");
  const d = 64;
  const m = B * H;
  const rng = new Rng(3);
  const inputs = {
    q: be.fromArray(rng.normals(m * d), [B, 1, H, d]),
    k: be.fromArray(rng.normals(m * d), [B, 1, H, d]),
    v: be.fromArray(rng.normals(m * d), [B, 1, H, d]),
    beta: be.fromArray(rng.uniforms(m, 0.2, 1.8), [B, 1, H]),
    lambdabar: be.fromArray(rng.uniforms(m, 0, 0.5), [B, 1, H]),
  };
  let { carry } = be.fastWeightForward(config, inputs);
  const ms = median(() => {
    for (let s = 0; s < calls; s++) {
      const out = be.fastWeightForward(config, { ...inputs, carry });
      for (const t of [out.o, carry.state, carry.lastKey, carry.windowX, carry.windowY]) be.dispose(t);
      carry = out.carry;
    }
  });
  return (ms * 1e3) / (calls * m);
}

if (import.meta.main) {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const report = {
      gemmGflops: {
        N256: gemm(be, 256, 256, 256, false, 10),
        N1024: gemm(be, 1024, 1024, 1024, false, 1),
        M1_N1024_K1024: gemm(be, 1, 1024, 1024, false, 50),
        M1_N1024_K1024_transB: gemm(be, 1, 1024, 1024, true, 50),
        M512_K64_N64: gemm(be, 512, 64, 64, false, 50),
        M512_K64_N256: gemm(be, 512, 64, 256, false, 20),
      },
      falcon1: falcon(be, "falcon1"),
      falcon3: falcon(be, "falcon3"),
      decodingMicrosecondsPerHeadStep: { B16_H4: decoding(be, 16, 4, 100) },
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    be.close();
  }
}
