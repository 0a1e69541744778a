/** The shared state update and readout: the formula and its backward against finite differences. */

import { assertClose, Rng, TOLERANCE } from "../../testing/compare.ts";
import type { StepCoefficients } from "./coefficients.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";
import { readout, readoutBackward, stateUpdate, stateUpdateBackward } from "./state_update.ts";

const DK = 3;
const DV = 2;

function coefficients(rng: Rng): StepCoefficients {
  return {
    gamma: rng.uniforms(DV, 0.5, 1),
    a: rng.uniforms(DV, 0.1, 0.5),
    b: rng.uniforms(DV, 0.1, 0.5),
    noop: false,
    lambda: 0,
    den: 0,
    eta: new Float64Array(DV),
    clamped: new Uint8Array(DV),
  };
}

Deno.test("one pair: S' = gamma S - a x (x^T S) + b x y^T, column by column", () => {
  const rng = new Rng(10);
  const s = rng.normals(DK * DV);
  const x = rng.normals(DK);
  const y = rng.normals(DV);
  const c = coefficients(rng);
  const next = stateUpdate(s, DK, DV, c, [x], [y]);
  const expected = new Float64Array(DK * DV);
  for (let j = 0; j < DV; j++) {
    let xs = 0;
    for (let i = 0; i < DK; i++) xs += x[i] * s[i * DV + j];
    for (let i = 0; i < DK; i++) {
      expected[i * DV + j] = c.gamma[j] * s[i * DV + j] - c.a[j] * x[i] * xs + c.b[j] * x[i] * y[j];
    }
  }
  assertClose("S'", next, expected, TOLERANCE.f64);
});

Deno.test("window pairs all read the pre-update state (the update is a sum over pairs)", () => {
  const rng = new Rng(11);
  const s = rng.normals(DK * DV);
  const xs = [rng.normals(DK), rng.normals(DK)];
  const ys = [rng.normals(DV), rng.normals(DV)];
  const c = coefficients(rng);
  const both = stateUpdate(s, DK, DV, c, xs, ys);
  const noDecay = { ...c, gamma: new Float64Array(DV) };
  const first = stateUpdate(s, DK, DV, noDecay, [xs[0]], [ys[0]]);
  const second = stateUpdate(s, DK, DV, c, [xs[1]], [ys[1]]);
  assertClose("sum of pairs", both, first.map((v, i) => v + second[i]), TOLERANCE.f64);
});

Deno.test("stateUpdateBackward() and readoutBackward() match finite differences", () => {
  const rng = new Rng(12);
  const s = rng.normals(DK * DV);
  const xs = [rng.normals(DK), rng.normals(DK), rng.normals(DK)];
  const ys = [rng.normals(DV), rng.normals(DV), rng.normals(DV)];
  const c = coefficients(rng);
  const q = rng.normals(DK);
  const dO = rng.normals(DV);
  const dNextDirect = rng.normals(DK * DV);
  // L = <S', dNextDirect> + <S'^T q, dO>
  const f = () => {
    const next = stateUpdate(s, DK, DV, c, xs, ys);
    const o = readout(next, q, DK, DV);
    return next.reduce((acc, v, i) => acc + v * dNextDirect[i], 0) +
      o.reduce((acc, v, j) => acc + v * dO[j], 0);
  };
  const next = stateUpdate(s, DK, DV, c, xs, ys);
  const dNext = dNextDirect.slice();
  const dq = readoutBackward(next, q, dO, dNext, DK, DV);
  const g = stateUpdateBackward(s, DK, DV, c, xs, ys, dNext);
  assertGradientClose("dq", dq, numericGradient(f, q));
  assertGradientClose("dPrev", g.dPrev, numericGradient(f, s));
  assertGradientClose("dgamma", g.dgamma, numericGradient(f, c.gamma));
  assertGradientClose("da", g.da, numericGradient(f, c.a));
  assertGradientClose("db", g.db, numericGradient(f, c.b));
  xs.forEach((x, p) => assertGradientClose(`dx[${p}]`, g.dxs[p], numericGradient(f, x)));
  ys.forEach((y, p) => assertGradientClose(`dy[${p}]`, g.dys[p], numericGradient(f, y)));
});
