/**
 * The thread pool's polling option: `spinMs` outside 0..10 is refused with its value named, and a
 * two-thread GEMM gives bit-identical results whether the threads poll before sleeping (default) or
 * sleep at once (`spinMs: 0`), over many back-to-back jobs (the case the polling is for).
 */

import { Rng } from "../testing/compare.ts";
import { createWasmBackend } from "./backend.ts";

Deno.test("spinMs outside 0..10 is refused and names the value", async () => {
  for (const spinMs of [-1, 11, NaN]) {
    let message = "";
    try {
      const be = await createWasmBackend({ threads: 2, spinMs });
      be.close();
    } catch (e) {
      message = (e as Error).message;
    }
    if (!message.includes("spinMs") || !message.includes(String(spinMs))) {
      throw new Error(`spinMs ${spinMs}: expected a RangeError naming it, got "${message}"`);
    }
  }
});

Deno.test("back-to-back 2-thread GEMMs are bit-identical with and without polling", async () => {
  const rng = new Rng(5);
  const [M, K, N] = [130, 70, 90];
  const a = rng.normals(M * K);
  const b = rng.normals(K * N);
  const results: ArrayLike<number>[] = [];
  for (const spinMs of [0, 0.05]) {
    const be = await createWasmBackend({ threads: 2, spinMs });
    try {
      const ta = be.fromArray(a, [M, K]);
      const tb = be.fromArray(b, [K, N]);
      const out = be.zeros([M, N]);
      for (let i = 0; i < 200; i++) be.matmul(out, ta, tb, { accumulate: true });
      results.push(await be.read(out));
    } finally {
      be.close();
    }
  }
  const [x, y] = results;
  for (let i = 0; i < x.length; i++) {
    if (!(x[i] === y[i] && Number.isFinite(x[i]))) {
      throw new Error(`element ${i}: ${x[i]} without polling vs ${y[i]} with polling`);
    }
  }
  if (Array.from(x).every((v) => v === 0)) throw new Error("the product is all zeros");
});
