/** The tape ops of `autodiff.ts` against central finite differences and known values. */

import { assertClose, Rng } from "../../testing/compare.ts";
import {
  add,
  addScalar,
  concatCols,
  concatRows,
  div,
  exp,
  gatherCols,
  gatherRows,
  matmul,
  mul,
  rowSumSq,
  scale,
  solveUnitLower,
  stopGrad,
  sub,
  symmetricTopEigen,
  Tape,
  topEigenvalue,
  transpose,
} from "./autodiff.ts";
import { checkTapeGradient } from "./autodiff_check.ts";

const rng = new Rng(42);

Deno.test("matmul, transpose and broadcasting element-wise ops have exact gradients", () => {
  checkTapeGradient("matmul", [[3, 4, rng.normals(12)], [4, 2, rng.normals(8)]], ([a, b]) => matmul(a, b));
  checkTapeGradient("transpose", [[3, 2, rng.normals(6)]], ([a]) => transpose(a));
  checkTapeGradient(
    "broadcast",
    [[3, 4, rng.normals(12)], [3, 1, rng.uniforms(3, 1, 2)], [1, 4, rng.normals(4)], [1, 1, rng.normals(1)]],
    ([a, col, row, s]) => sub(div(mul(add(a, row), s), col), addScalar(scale(exp(col), 0.5), 1)),
  );
  checkTapeGradient("rowSumSq", [[3, 4, rng.normals(12)]], ([a]) => rowSumSq(a));
});

Deno.test("gather and concat ops route gradients to their sources (-1 rows get none)", () => {
  checkTapeGradient(
    "gather/concat",
    [[3, 2, rng.normals(6)], [2, 2, rng.normals(4)]],
    ([a, b]) =>
      concatCols([
        gatherRows(concatRows([a, b]), [4, -1, 0, 0, 2]),
        gatherCols(gatherRows(b, [1, 0, 1, 1, 0]), [1]),
      ]),
  );
  const tape = new Tape();
  const a = tape.leaf(2, 2, Float64Array.of(1, 2, 3, 4));
  const g = gatherRows(a, [-1, 1]);
  assertClose("gather -1 row", g.value, [0, 0, 3, 4], { rtol: 0, atol: 0 });
});

Deno.test("stopGrad passes the value and blocks the gradient", () => {
  const tape = new Tape();
  const a = tape.leaf(1, 2, Float64Array.of(2, 3));
  const out = mul(a, stopGrad(a));
  tape.backward([[out, Float64Array.of(1, 1)]]);
  assertClose("stopGrad value", out.value, [4, 9], { rtol: 0, atol: 0 });
  assertClose("stopGrad gradient", a.grad!, [2, 3], { rtol: 0, atol: 0 });
});

Deno.test("solveUnitLower solves (I + A) X = B and differentiates A's strictly lower part only", () => {
  const n = 5;
  const A = rng.normals(n * n, 0.4);
  const B = rng.normals(n * 2);
  const tape = new Tape();
  const x = solveUnitLower(tape.constant(n, n, A), tape.constant(n, 2, B));
  // residual (I + strictly_lower(A)) X - B
  const recon = new Float64Array(n * 2);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < 2; j++) {
      let s = x.value[i * 2 + j];
      for (let p = 0; p < i; p++) s += A[i * n + p] * x.value[p * 2 + j];
      recon[i * 2 + j] = s;
    }
  }
  assertClose("solve residual", recon, B, { rtol: 1e-13, atol: 1e-13 });
  const lower = A.map((v, k) => (k % n < Math.floor(k / n) ? v : 0));
  checkTapeGradient("solveUnitLower", [[n, n, lower], [n, 2, B]], ([a, b]) => solveUnitLower(a, b));
  const t2 = new Tape();
  const aLeaf = t2.leaf(n, n, A);
  const out = solveUnitLower(aLeaf, t2.constant(n, 2, B));
  t2.backward([[out, new Float64Array(n * 2).fill(1)]]);
  for (let i = 0; i < n; i++) {
    for (let p = i; p < n; p++) {
      if (aLeaf.grad![i * n + p] !== 0) {
        throw new Error(`gradient reached A[${i}, ${p}] on or above the diagonal`);
      }
    }
  }
});

Deno.test("symmetricTopEigen returns the top eigenpair for sizes 1 to 6", () => {
  for (let n = 1; n <= 6; n++) {
    const x = rng.normals(n * 3);
    const g = new Float64Array(n * n); // Gram matrix of n random 3-vectors
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) for (let k = 0; k < 3; k++) g[i * n + j] += x[i * 3 + k] * x[j * 3 + k];
    }
    const { value, vector } = symmetricTopEigen(g, n);
    const gv = new Float64Array(n);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) gv[i] += g[i * n + j] * vector[j];
    assertClose(`G u = lambda u (n = ${n})`, gv, vector.map((u) => value * u), { rtol: 1e-12, atol: 1e-12 });
    // the largest: the trace bounds it below by trace/n, and power iteration agrees
    let p = new Float64Array(n).fill(1);
    for (let it = 0; it < 2000; it++) {
      const q = new Float64Array(n);
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) q[i] += g[i * n + j] * p[j];
      const norm = Math.hypot(...q);
      p = q.map((v) => v / norm);
    }
    let rayleigh = 0;
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) rayleigh += p[i] * g[i * n + j] * p[j];
    assertClose(`top eigenvalue (n = ${n})`, [value], [rayleigh], { rtol: 1e-9, atol: 1e-12 });
  }
});

Deno.test("topEigenvalue of a Gram matrix X X^T / B has gradient 2 X^T u u^T / B w.r.t. X", () => {
  for (const n of [1, 2, 3, 4]) {
    checkTapeGradient(
      `mu (B = ${n})`,
      [[n, 5, rng.normals(n * 5)]],
      ([x]) => scale(topEigenvalue(matmul(x, transpose(x))), 1 / n),
    );
  }
});
