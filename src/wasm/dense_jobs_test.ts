/**
 * The dense ops as thread-pool jobs (dense_jobs.ts, assembly/dense_tasks.ts) and their two-lane
 * float64 kernels (assembly/exp_f64x2.ts):
 * - every job op gives bit-identical results on 1, 2 and 4 threads at sizes that cut into bands
 *   (odd lengths, odd channel counts, bands that start on odd channels), with sequence starts, repeated
 *   embedding ids and cross-entropy rows of weight 0;
 * - the two-lane float64 `exp` and sigmoid give exactly the bits of the scalar `Math.exp` and sigmoid,
 *   in both builds, over inputs that reach every branch of `exp`: signed zeros, tiny and huge
 *   magnitudes, infinities, NaN;
 * - the two-lane sigmoid, SiLU and SwiGLU kernels give, lane by lane, exactly the float32 results of the
 *   scalar path (a lone element runs the scalar tail).
 * Accuracy against the float64 reference is dense_test.ts's job.
 */

import type { Tensor } from "../rules/backend.ts";
import { Rng } from "../testing/compare.ts";
import { createWasmBackend, type WasmBackend } from "./backend.ts";
import { Heap } from "./heap.ts";
import { createMemory, instantiate, type WasmFlavour, wasmModule } from "./module.ts";

/** Every element of `a` and `b` is the same float32 (NaN equals NaN). */
function assertSameBits(name: string, a: Float32Array, b: Float32Array): void {
  if (a.length !== b.length) throw new Error(`${name}: length ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) throw new Error(`${name}: element ${i} differs: ${a[i]} vs ${b[i]}`);
  }
}

/** Run every job op on `be` from the same seeded data; returns the outputs by name. */
async function runOps(be: WasmBackend): Promise<Map<string, Float32Array>> {
  const rng = new Rng(11);
  const out = new Map<string, Float32Array>();
  const t = (shape: number[], scale = 1) =>
    be.fromArray(rng.normals(shape.reduce((x, y) => x * y), scale), shape);
  const keep = async (name: string, x: Tensor) => out.set(name, (await be.read(x)) as Float32Array);

  const n = 100_003; // odd: the last band ends in a scalar tail
  const a = t([n], 3);
  const b = t([n], 3);
  const y = t([n]);
  be.add(y, a, b);
  await keep("add", y);
  be.mul(y, a, b);
  await keep("mul", y);
  be.axpy(y, a, 0.37);
  await keep("axpy", y);
  be.copy(y, b);
  await keep("copy", y);
  for (const kind of ["sigmoid", "softplus", "silu"] as const) {
    be.activationForward(kind, y, a, 1.5);
    await keep(`activationForward ${kind}`, y);
    be.activationBackward(kind, y, b, a, 0.5);
    await keep(`activationBackward ${kind}`, y);
  }
  const dGate = t([n]);
  be.swigluForward(y, a, b);
  await keep("swigluForward", y);
  be.swigluBackward(dGate, y, t([n]), a, b);
  await keep("swigluBackward dGate", dGate);
  await keep("swigluBackward dUp", y);
  const m = t([n], 0.1);
  const v = be.fromArray(rng.uniforms(n, 0, 0.01), [n]);
  be.adamw(y, a, m, v, {
    lr: 1e-2,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    weightDecay: 0.1,
    step: 3,
    gradScale: 0.5,
  }, true);
  for (const [name, x] of [["adamw param", y], ["adamw m", m], ["adamw v", v]] as const) await keep(name, x);
  be.fill(y, -2.5);
  await keep("fill", y);

  const [N, D] = [1001, 67];
  const x = t([N, D], 2);
  const normed = t([N, D]);
  const rstd = t([N]);
  const w = t([D]);
  be.rmsNormForward(normed, rstd, x, w, 1e-6);
  await keep("rmsNormForward", normed);
  await keep("rmsNormForward rstd", rstd);
  const dx = t([N, D]);
  const dw = t([D]);
  be.rmsNormBackward(dx, dw, t([N, D]), x, w, rstd);
  await keep("rmsNormBackward dx", dx);
  await keep("rmsNormBackward dWeight", dw);
  be.rmsNormBackward(dx, null, t([N, D]), x, null, rstd);
  await keep("rmsNormBackward dx (no weight)", dx);

  const [B, T, C, W] = [3, 37, 131, 4]; // odd channel count: bands start on odd channels at 4 threads
  const starts = new Uint8Array(B * T);
  for (const s of [0, 5, 6, 20, 37, 40, 90]) starts[s] = 1;
  const cx = t([B, T, C]);
  const cw = t([C, W], 0.5);
  const cy = t([B, T, C]);
  be.shortConvForward(cy, cx, cw, starts);
  await keep("shortConvForward", cy);
  const cdx = t([B, T, C]);
  const cdw = t([C, W]);
  be.shortConvBackward(cdx, cdw, t([B, T, C]), cx, cw, starts);
  await keep("shortConvBackward dx", cdx);
  await keep("shortConvBackward dWeight", cdw);
  be.shortConvForward(cy, cx, cw);
  await keep("shortConvForward (no starts)", cy);

  const [rows, V, E] = [2001, 13, 67]; // repeated ids: the backward's rows must add up in order
  const ids = Int32Array.from({ length: rows }, (_, i) => (i * 7 + (i >> 3)) % V);
  const table = t([V, E]);
  const embedded = t([rows, E]);
  be.embeddingForward(embedded, table, ids);
  await keep("embeddingForward", embedded);
  be.embeddingBackward(table, t([rows, E]), ids);
  await keep("embeddingBackward", table);
  const logits = t([rows, V], 3);
  const targets = Int32Array.from({ length: rows }, (_, i) => (i * 5) % V);
  const weights = Float32Array.from({ length: rows }, (_, i) => (i % 9 === 0 ? 0 : 1 + (i % 3)));
  const losses = t([rows]);
  be.crossEntropyForward(losses, logits, targets, weights);
  await keep("crossEntropyForward", losses);
  const dLogits = t([rows, V]);
  be.crossEntropyBackward(dLogits, logits, targets, weights);
  await keep("crossEntropyBackward", dLogits);
  return out;
}

Deno.test("every dense job op gives bit-identical results on 1, 2 and 4 threads", async () => {
  const results: Map<string, Float32Array>[] = [];
  for (const threads of [1, 2, 4]) {
    const be = await createWasmBackend({ threads });
    try {
      results.push(await runOps(be));
    } finally {
      be.close();
    }
  }
  for (const [name, one] of results[0]) {
    for (const [i, threads] of [[1, 2], [2, 4]]) {
      assertSameBits(`${name} (${threads} threads)`, results[i].get(name)!, one);
    }
  }
});

/** Inputs over every branch of exp and sigmoid: signed zeros, tiny to huge magnitudes, infinities. */
function edgeInputs(): number[] {
  const xs = [
    0,
    -0,
    Infinity,
    -Infinity,
    2 ** -60,
    -(2 ** -60),
    2 ** -54,
    2 ** -53,
    1e-30,
    0.5,
    1,
    2,
    19.9,
    20.1,
  ];
  for (const m of [700, 708, 709.7, 710, 744, 745.2, 746, 800, 1e4, 3e38]) xs.push(m, -m);
  const rng = new Rng(5);
  for (let i = 0; i < 3000; i++) xs.push(rng.normals(1, 8)[0] * 10 ** Math.floor(rng.uniforms(1, -4, 3)[0]));
  const withNegations = xs.flatMap((x) => [x, -x]);
  return withNegations.length % 2 === 0 ? withNegations : [...withNegations, 1.25];
}

Deno.test("two-lane sigmoid, SiLU and SwiGLU give exactly the scalar path's bits, lane by lane", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const xs = edgeInputs();
    const n = xs.length;
    const x = be.fromArray(xs, [n]);
    const other = be.fromArray(xs.map((v, i) => (i % 7) - 3 + v / 1e3), [n]);
    const one = (v: number) => be.fromArray([v], [1]);
    const cases: [string, (out: Tensor, x: Tensor, up: Tensor) => void][] = [
      ["sigmoid", (o, a) => be.activationForward("sigmoid", o, a, 1.5)],
      ["silu", (o, a) => be.activationForward("silu", o, a, 1)],
      ["sigmoid backward", (o, a, u) => be.activationBackward("sigmoid", o, u, a, 0.75)],
      ["softplus backward", (o, a, u) => be.activationBackward("softplus", o, u, a, 1)],
      ["silu backward", (o, a, u) => be.activationBackward("silu", o, u, a, 1)],
      ["swigluForward", (o, a, u) => be.swigluForward(o, a, u)],
      ["swigluBackward dGate", (o, a, u) => be.swigluBackward(o, be.zeros(o.shape), u, a, u)],
      ["swigluBackward dUp", (o, a, u) => be.swigluBackward(be.zeros(o.shape), o, u, a, u)],
    ];
    const upValues = (await be.read(other)) as Float32Array;
    const xValues = (await be.read(x)) as Float32Array;
    for (const [name, op] of cases) {
      const whole = be.zeros([n]);
      op(whole, x, other); // pairs of lanes (n is even: no scalar tail)
      const lanes = (await be.read(whole)) as Float32Array;
      const scalar = new Float32Array(n);
      for (let i = 0; i < n; i++) {
        const o = be.zeros([1]);
        op(o, one(xValues[i]), one(upValues[i])); // a lone element: the scalar tail
        scalar[i] = (await be.read(o))[0];
      }
      assertSameBits(name, lanes, scalar);
    }
  } finally {
    be.close();
  }
});

for (const flavour of ["relaxed-simd", "simd"] as WasmFlavour[]) {
  Deno.test(`the two-lane float64 exp and sigmoid match the scalar ones bit for bit (${flavour} build)`, () => {
    const memory = createMemory();
    const ex = instantiate(memory, wasmModule(flavour).module);
    const heap = new Heap(memory, ex.heapBase());
    const xs = [
      ...edgeInputs(),
      NaN,
      -NaN,
      2 ** -1074,
      -(2 ** -1074),
      1e-320,
      709.78,
      -708.4,
      -745.13,
      512,
      -512,
    ];
    const rng = new Rng(9);
    for (let i = 0; i < 20000; i++) xs.push(rng.uniforms(1, -760, 760)[0], rng.normals(1, 3)[0]);
    if (xs.length % 2 === 1) xs.push(0.125);
    const at = heap.alloc(xs.length * 8);
    heap.f64.set(xs, at >>> 3);
    const bad = ex.exp_f64x2_mismatches(at, xs.length);
    if (bad !== 0) {
      throw new Error(`${bad} of ${2 * xs.length} two-lane exp/sigmoid results differ from the scalar ones`);
    }
  });
}
