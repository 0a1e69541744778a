/** The top eigenpair: eigen-equation residual, maximality, and closed form vs Jacobi. */

import { assertClose, Rng } from "../../testing/compare.ts";
import { topEigenpair, topEigenpairJacobi } from "./top_eigen.ts";

function randomGram(rng: Rng, n: number, m: number): Float64Array {
  const x = rng.normals(n * m);
  const g = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      for (let k = 0; k < m; k++) g[i * n + j] += x[i * m + k] * x[j * m + k];
    }
  }
  return g;
}

function matVec(a: Float64Array, u: Float64Array, n: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) out[i] += a[i * n + j] * u[j];
  return out;
}

Deno.test("topEigenpair() solves A u = lambda u with a unit u, for sizes 1 to 6", () => {
  const rng = new Rng(4);
  for (let n = 1; n <= 6; n++) {
    for (let trial = 0; trial < 20; trial++) {
      const a = randomGram(rng, n, 5);
      const { value, vector } = topEigenpair(a, n);
      const norm = Math.hypot(...vector);
      if (Math.abs(norm - 1) > 1e-14) throw new Error(`n=${n}: |u| = ${norm}`);
      assertClose(`n=${n} A u`, matVec(a, vector, n), vector.map((x) => value * x), {
        rtol: 1e-12,
        atol: 1e-12 * value,
      });
    }
  }
});

Deno.test("topEigenpair() returns the largest eigenvalue: no Rayleigh quotient exceeds it", () => {
  const rng = new Rng(5);
  for (const n of [2, 3, 4]) {
    const a = randomGram(rng, n, 3);
    const { value } = topEigenpair(a, n);
    for (let trial = 0; trial < 200; trial++) {
      const w = rng.normals(n);
      const quotient = w.reduce((s, x, i) => s + x * matVec(a, w, n)[i], 0) /
        w.reduce((s, x) => s + x * x, 0);
      if (quotient > value * (1 + 1e-12)) throw new Error(`n=${n}: quotient ${quotient} > top ${value}`);
    }
  }
});

Deno.test("the 2x2 closed form agrees with Jacobi, including diagonal and tied matrices", () => {
  const rng = new Rng(6);
  const matrices = [
    ...Array.from({ length: 20 }, () => randomGram(rng, 2, 3)),
    Float64Array.of(1, 0, 0, 3),
    Float64Array.of(2, 0, 0, 2),
    Float64Array.of(0, 0, 0, 0),
  ];
  for (const a of matrices) {
    const closed = topEigenpair(a, 2);
    const jacobi = topEigenpairJacobi(a, 2);
    if (Math.abs(closed.value - jacobi.value) > 1e-12 * Math.max(1, jacobi.value)) {
      throw new Error(`[${a}]: closed form ${closed.value}, Jacobi ${jacobi.value}`);
    }
    assertClose(`[${a}] A u`, matVec(a, closed.vector, 2), closed.vector.map((x) => closed.value * x), {
      rtol: 1e-12,
      atol: 1e-12,
    });
  }
});

Deno.test("topEigenpair() rejects a matrix whose size does not match", () => {
  let error: unknown;
  try {
    topEigenpair(new Float64Array(5), 2);
  } catch (e) {
    error = e;
  }
  if (!(error instanceof RangeError) || !error.message.includes("5 entries")) {
    throw new Error(`expected a RangeError naming 5 entries, got ${error}`);
  }
});
