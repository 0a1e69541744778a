/** QK normalisation: the three options' values and their backward against finite differences. */

import { assertClose, Rng, TOLERANCE } from "../../testing/compare.ts";
import { QK_NORMS } from "../config.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";
import { L2_NORM_FLOOR, normalizeRows, normalizeRowsBackward } from "./qk_norm.ts";

const EPS_RMS = 1e-6;

function rowSquares(a: Float64Array, rows: number, dim: number): number[] {
  return Array.from({ length: rows }, (_, r) => {
    let s = 0;
    for (let i = 0; i < dim; i++) s += a[r * dim + i] ** 2;
    return s;
  });
}

Deno.test("rms normalisation gives rows of mean square ||u||^2 / (||u||^2 + dim eps)", () => {
  const u = new Rng(1).normals(4 * 5, 3);
  const n = normalizeRows(u, 4, 5, "rms", EPS_RMS);
  const raw = rowSquares(u, 4, 5);
  rowSquares(n, 4, 5).forEach((s, r) => {
    const expected = 5 * raw[r] / (raw[r] + 5 * EPS_RMS);
    if (Math.abs(s - expected) > 1e-12) throw new Error(`row ${r}: ||n||^2 = ${s}, expected ${expected}`);
  });
});

Deno.test("l2 normalisation gives unit rows, floored near zero; none is the identity", () => {
  const u = new Rng(2).normals(3 * 4);
  u.fill(1e-9, 8, 12); // a row below the floor: divided by 1e-6, not by its norm
  const n = normalizeRows(u, 3, 4, "l2", EPS_RMS);
  const squares = rowSquares(n, 3, 4);
  for (const r of [0, 1]) if (Math.abs(squares[r] - 1) > 1e-14) throw new Error(`row ${r} not unit`);
  assertClose("floored row", n.slice(8), u.slice(8).map((x) => x / L2_NORM_FLOOR), TOLERANCE.f64);
  assertClose("none", normalizeRows(u, 3, 4, "none", EPS_RMS), u, { rtol: 0, atol: 0 });
});

Deno.test("a zero row stays zero under every normalisation", () => {
  for (const norm of QK_NORMS) {
    const n = normalizeRows(new Float64Array(6), 2, 3, norm, EPS_RMS);
    if (n.some((x) => x !== 0)) throw new Error(`${norm}: zero row became ${n}`);
  }
});

Deno.test("normalizeRowsBackward() matches finite differences for rms, l2 and none", () => {
  const rng = new Rng(3);
  for (const norm of QK_NORMS) {
    const u = rng.normals(3 * 4);
    u.fill(2e-7, 8, 12); // an l2-floored row
    const dn = rng.normals(3 * 4);
    const f = () => {
      const n = normalizeRows(u, 3, 4, norm, EPS_RMS);
      return n.reduce((s, x, i) => s + x * dn[i], 0);
    };
    const analytic = normalizeRowsBackward(u, dn, 3, 4, norm, EPS_RMS);
    assertGradientClose(norm, analytic, numericGradient(f, u, 1e-9), 1e-6, 1e-6);
  }
});
