/**
 * The dense-op half of the parity suite: every {@linkcode DenseOps} method of a fast backend against
 * the float64 reference on the same random inputs, at shapes that are not multiples of 4 or of a
 * tile. Backward ops start from random gradients, so an op that overwrites instead of
 * accumulating fails.
 *
 * @module
 */

import type { Activation, Backend, Tensor } from "../rules/backend.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { relativeL2, Rng } from "./compare.ts";
import { type TestLevel, testLevelFromEnv } from "./level.ts";

/** Tolerance (relative L2) of a float32 dense op against float64. */
export const DENSE_TOLERANCE = 1e-5;

/** One dense-op case: runs the op on a backend and returns the named outputs to compare. */
export interface DenseCase {
  /** Label, e.g. `matmul transA accumulate 13x9x7`. */
  readonly name: string;
  /** Run on a backend with inputs from `data`; return tensors to compare, by name. */
  run(backend: Backend, data: DenseData): Promise<Record<string, Tensor | number>>;
}

/** Seeded random arrays, identical for every backend of one case. */
export class DenseData {
  #seed: number;
  #cache = new Map<string, Float64Array>();
  /** Seed every array of the case from `seed`. */
  constructor(seed: number) {
    this.#seed = seed;
  }
  /** A named random array (the same on every call with the same name). */
  normals(name: string, n: number, scale = 1): Float64Array {
    const key = `${name}:${n}:${scale}`;
    let out = this.#cache.get(key);
    if (!out) {
      let h = this.#seed;
      for (const ch of key) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
      out = new Rng(h).normals(n, scale);
      this.#cache.set(key, out);
    }
    return out;
  }
  /** A named random tensor on `backend`. */
  tensor(backend: Backend, name: string, shape: number[], scale = 1): Tensor {
    return backend.fromArray(this.normals(name, shape.reduce((a, b) => a * b, 1), scale), shape);
  }
}

function ids(n: number, vocab: number, seed: number): Int32Array {
  const rng = new Rng(seed);
  return Int32Array.from({ length: n }, () => Math.floor(rng.uniform() * vocab));
}

function startsOf(B: number, T: number, mid: number): Uint8Array {
  const s = new Uint8Array(B * T);
  for (let b = 0; b < B; b++) {
    s[b * T] = 1;
    s[b * T + mid] = 1;
  }
  return s;
}

/**
 * The matmul cases: at the full level every (transA, transB, accumulate); at the small level every
 * transpose once, accumulating on two of them (each variant is a pipeline, seconds to compile on a
 * software GPU adapter; these are the variants `wgpu/dense_test.ts` compiles too).
 */
function matmulCases(level: TestLevel): DenseCase[] {
  const cases: DenseCase[] = [];
  for (const transA of [false, true]) {
    for (const transB of [false, true]) {
      for (const accumulate of [false, true]) {
        if (level === "small" && accumulate !== (transA !== transB)) continue;
        cases.push(matmulCase(transA, transB, accumulate));
      }
    }
  }
  return cases;
}

function matmulCase(transA: boolean, transB: boolean, accumulate: boolean): DenseCase {
  const [M, K, N] = [13, 9, 7];
  return {
    name: `matmul${transA ? " transA" : ""}${transB ? " transB" : ""}${
      accumulate ? " accumulate" : ""
    } ${M}x${K}x${N}`,
    run(be, d) {
      const out = d.tensor(be, "out", [M, N]);
      const a = d.tensor(be, "a", transA ? [K, M] : [M, K]);
      const b = d.tensor(be, "b", transB ? [N, K] : [K, N]);
      be.matmul(out, a, b, { transA, transB, accumulate });
      return Promise.resolve({ out });
    },
  };
}

const activationCases: DenseCase[] = (["sigmoid", "softplus", "silu"] as Activation[]).map((kind) => ({
  name: `activation ${kind} forward and backward (scale 1.7)`,
  run(be, d) {
    const x = d.tensor(be, "x", [5, 11], 2);
    const out = be.zeros([5, 11]);
    be.activationForward(kind, out, x, 1.7);
    const dx = d.tensor(be, "dx", [5, 11]);
    be.activationBackward(kind, dx, d.tensor(be, "dOut", [5, 11]), x, 1.7);
    return Promise.resolve({ out, dx });
  },
}));

/** Every dense case of the suite at a level (the levels differ in the matmul variants only). */
export function denseCases(level: TestLevel = "small"): DenseCase[] {
  return [...matmulCases(level), ...OTHER_CASES];
}

const OTHER_CASES: readonly DenseCase[] = [
  ...activationCases,
  {
    name: "rmsNorm forward and backward with weight, rows of 13",
    run(be, d) {
      const [N, D] = [6, 13];
      const x = d.tensor(be, "x", [N, D]);
      const w = d.tensor(be, "w", [D]);
      const out = be.zeros([N, D]);
      const rstd = be.zeros([N]);
      be.rmsNormForward(out, rstd, x, w, 1e-6);
      const dx = d.tensor(be, "dx", [N, D]);
      const dw = d.tensor(be, "dw", [D]);
      be.rmsNormBackward(dx, dw, d.tensor(be, "dOut", [N, D]), x, w, rstd);
      return Promise.resolve({ out, rstd, dx, dw });
    },
  },
  {
    name: "rmsNorm forward and backward without weight",
    run(be, d) {
      const [N, D] = [3, 7];
      const x = d.tensor(be, "x", [N, D]);
      const out = be.zeros([N, D]);
      const rstd = be.zeros([N]);
      be.rmsNormForward(out, rstd, x, null, 1e-6);
      const dx = d.tensor(be, "dx", [N, D]);
      be.rmsNormBackward(dx, null, d.tensor(be, "dOut", [N, D]), x, null, rstd);
      return Promise.resolve({ out, dx });
    },
  },
  {
    name: "swiglu forward and backward",
    run(be, d) {
      const gate = d.tensor(be, "gate", [7, 9]);
      const up = d.tensor(be, "up", [7, 9]);
      const out = be.zeros([7, 9]);
      be.swigluForward(out, gate, up);
      const dGate = d.tensor(be, "dGate", [7, 9]);
      const dUp = d.tensor(be, "dUp", [7, 9]);
      be.swigluBackward(dGate, dUp, d.tensor(be, "dOut", [7, 9]), gate, up);
      return Promise.resolve({ out, dGate, dUp });
    },
  },
  {
    name: "add, mul, axpy, fill, copy",
    run(be, d) {
      const a = d.tensor(be, "a", [23]);
      const b = d.tensor(be, "b", [23]);
      const sum = be.zeros([23]);
      const prod = be.zeros([23]);
      be.add(sum, a, b);
      be.mul(prod, a, b);
      const y = d.tensor(be, "y", [23]);
      be.axpy(y, a, -0.37);
      const filled = be.zeros([23]);
      be.fill(filled, 2.5);
      const copied = be.zeros([23]);
      be.copy(copied, b);
      return Promise.resolve({ sum, prod, y, filled, copied });
    },
  },
  {
    name: "embedding forward and backward with repeated ids",
    run(be, d) {
      const [V, D, N] = [11, 5, 9];
      const table = d.tensor(be, "table", [V, D]);
      const tokens = ids(N, V, 3);
      tokens[4] = tokens[1];
      const out = be.zeros([N, D]);
      be.embeddingForward(out, table, tokens);
      const dTable = d.tensor(be, "dTable", [V, D]);
      be.embeddingBackward(dTable, d.tensor(be, "dOut", [N, D]), tokens);
      return Promise.resolve({ out, dTable });
    },
  },
  {
    name: "shortConv (width 4, SiLU) forward and backward, cut at a start",
    run(be, d) {
      const [B, T, C] = [2, 9, 5];
      const starts = startsOf(B, T, 5);
      const x = d.tensor(be, "x", [B, T, C]);
      const w = d.tensor(be, "w", [C, 4], 0.5);
      const out = be.zeros([B, T, C]);
      be.shortConvForward(out, x, w, starts);
      const dx = d.tensor(be, "dx", [B, T, C]);
      const dw = d.tensor(be, "dw", [C, 4]);
      be.shortConvBackward(dx, dw, d.tensor(be, "dOut", [B, T, C]), x, w, starts);
      return Promise.resolve({ out, dx, dw });
    },
  },
  {
    name: "crossEntropy forward and backward with zero-weight rows",
    run(be, d) {
      const [N, V] = [7, 13];
      const logits = d.tensor(be, "logits", [N, V], 3);
      const targets = ids(N, V, 5);
      const weights = Float32Array.from([1, 0, 0.5, 1, 2, 0, 1]);
      const losses = be.zeros([N]);
      be.crossEntropyForward(losses, logits, targets, weights);
      const dLogits = d.tensor(be, "dLogits", [N, V]);
      be.crossEntropyBackward(dLogits, logits, targets, weights);
      return Promise.resolve({ losses, dLogits });
    },
  },
  {
    name: "attention (RoPE, causal, packed) forward and backward",
    run(be, d) {
      const [B, T, H, D] = [2, 7, 2, 6];
      const starts = startsOf(B, T, 4);
      const q = d.tensor(be, "q", [B, T, H, D]);
      const k = d.tensor(be, "k", [B, T, H, D]);
      const v = d.tensor(be, "v", [B, T, H, D]);
      const out = be.zeros([B, T, H, D]);
      const lse = be.zeros([B, T, H]);
      be.attentionForward(out, lse, q, k, v, 10000, starts);
      const dq = d.tensor(be, "dq", [B, T, H, D]);
      const dk = d.tensor(be, "dk", [B, T, H, D]);
      const dv = d.tensor(be, "dv", [B, T, H, D]);
      be.attentionBackward(dq, dk, dv, d.tensor(be, "dOut", [B, T, H, D]), out, lse, q, k, v, 10000, starts);
      return Promise.resolve({ out, lse, dq, dk, dv });
    },
  },
  {
    name: "adamw step with and without decay",
    run(be, d) {
      const params = {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weightDecay: 0.1,
        step: 3,
        gradScale: 0.5,
      };
      const p1 = d.tensor(be, "p", [17]);
      const m1 = d.tensor(be, "m", [17], 0.1);
      const v1 = be.fromArray(d.normals("v", 17).map((x) => x * x), [17]);
      be.adamw(p1, d.tensor(be, "g", [17]), m1, v1, params, true);
      const p2 = d.tensor(be, "p", [17]);
      const m2 = d.tensor(be, "m", [17], 0.1);
      const v2 = be.fromArray(d.normals("v", 17).map((x) => x * x), [17]);
      be.adamw(p2, d.tensor(be, "g", [17]), m2, v2, params, false);
      return Promise.resolve({ p1, m1, v1, p2 });
    },
  },
  {
    name: "sumSquares of 1001 elements",
    async run(be, d) {
      return { sumSquares: await be.sumSquares(d.tensor(be, "x", [1001])) };
    },
  },
];

/** Run one case on `backend` and on the reference; returns the relative L2 error per output. */
export async function runDenseCase(
  backend: Backend,
  c: DenseCase,
  ref: Backend = createRefBackend(),
): Promise<{ name: string; error: number }[]> {
  const seed = [...c.name].reduce((h, ch) => Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0, 2166136261);
  const fast = await c.run(backend, new DenseData(seed));
  const slow = await c.run(ref, new DenseData(seed));
  const results: { name: string; error: number }[] = [];
  for (const [name, value] of Object.entries(slow)) {
    const got = fast[name];
    if (typeof value === "number") {
      results.push({ name, error: Math.abs((got as number) - value) / Math.max(Math.abs(value), 1e-30) });
      continue;
    }
    const a = await backend.read(got as Tensor);
    const e = await ref.read(value);
    results.push({ name, error: a.every(Number.isFinite) ? relativeL2(a, e) : Infinity });
  }
  return results;
}

/**
 * Register the dense half of the suite with `Deno.test` (see `registerFastWeightParity`), at `level`
 * (default: the environment's, {@linkcode testLevelFromEnv}).
 */
export async function registerDenseParity(
  name: string,
  makeBackend: () => Promise<Backend | null>,
  close: (backend: Backend) => void | Promise<void> = () => {},
  level: TestLevel = testLevelFromEnv(),
): Promise<void> {
  const backend = await makeBackend();
  if (!backend) {
    Deno.test({
      name: `${name}: dense-op parity (SKIPPED: backend unavailable here)`,
      ignore: true,
      fn() {},
    });
    return;
  }
  const ref = createRefBackend();
  Deno.test({
    name: `${name}: every dense op matches the float64 reference`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      try {
        for (const c of denseCases(level)) {
          await t.step(c.name, async () => {
            const bad = (await runDenseCase(backend, c, ref)).filter((r) => !(r.error <= DENSE_TOLERANCE));
            if (bad.length > 0) {
              throw new Error(
                bad.map((r) => `${r.name}: rel L2 ${r.error.toExponential(2)} > ${DENSE_TOLERANCE}`).join(
                  "; ",
                ),
              );
            }
          });
        }
      } finally {
        await close(backend);
      }
    },
  });
}
