/** Masked log-space decay ratios: values, exact zeros where masked, finite gradients under the clamp. */

import { assertClose, Rng } from "../../testing/compare.ts";
import { Tape } from "./autodiff.ts";
import { checkTapeGradient } from "./autodiff_check.ts";
import { clampedLogDecay, type DecaySegments, startDecay, stepDecay } from "./decay.ts";

const rng = new Rng(7);

/** Segments of 6 steps with a sequence start at local step 3. */
const SEG: DecaySegments = {
  n: 6,
  segId: Int32Array.of(-1, -1, -1, 3, 3, 3),
  segFirst: Int32Array.of(0, 0, 0, 3, 3, 3),
};
const ALL = [0, 1, 2, 3, 4, 5];

function product(gamma: Float64Array, lo: number, hi: number): number {
  let p = 1;
  for (let r = lo; r <= hi; r++) p *= gamma[r];
  return p;
}

Deno.test("stepDecay and startDecay equal the products of gamma and are 0 across a start", () => {
  const gamma = rng.uniforms(6, 0.2, 1);
  const tape = new Tape();
  const lg = tape.constant(6, 1, gamma.map(Math.log));
  const gam = stepDecay(lg, SEG, ALL, ALL, "gam");
  const gp = stepDecay(lg, SEG, ALL, ALL, "gp");
  const wantGam = new Float64Array(36), wantGp = new Float64Array(36);
  for (let t = 0; t < 6; t++) {
    for (let s = 0; s < 6; s++) {
      if (SEG.segId[t] !== SEG.segId[s]) continue;
      if (s <= t) wantGam[t * 6 + s] = product(gamma, s + 1, t);
      if (s < t) wantGp[t * 6 + s] = product(gamma, s + 1, t - 1);
    }
  }
  assertClose("Gam", gam.value, wantGam, { rtol: 1e-14, atol: 0 });
  assertClose("Gp", gp.value, wantGp, { rtol: 1e-14, atol: 0 });
  const c = startDecay(lg, SEG, ALL, "c");
  const cp = startDecay(lg, SEG, ALL, "cp");
  const first = [0, 0, 0, 3, 3, 3];
  assertClose("c", c.value, ALL.map((t) => product(gamma, first[t], t)), { rtol: 1e-14, atol: 0 });
  assertClose("cp", cp.value, ALL.map((t) => product(gamma, first[t], t - 1)), { rtol: 1e-14, atol: 0 });
});

Deno.test("decay ratios have exact gradients with respect to log gamma", () => {
  const lg = rng.uniforms(6, -2, 0);
  checkTapeGradient("Gam", [[6, 1, lg]], ([l]) => stepDecay(l, SEG, ALL, ALL, "gam"));
  checkTapeGradient(
    "Gp (instance rows)",
    [[6, 1, lg]],
    ([l]) => stepDecay(l, SEG, [0, 1, 1, 4, 5], [0, 1, 2, 2, 4, 5], "gp"),
  );
  checkTapeGradient("c", [[6, 1, lg]], ([l]) => startDecay(l, SEG, ALL, "c"));
  checkTapeGradient("cp", [[6, 1, lg]], ([l]) => startDecay(l, SEG, ALL, "cp"));
});

Deno.test("with the clamp binding over 400 steps the masked ratios stay finite, values and gradients", () => {
  const n = 400;
  const seg: DecaySegments = { n, segId: new Int32Array(n), segFirst: new Int32Array(n) };
  const steps = Array.from({ length: n }, (_, i) => i);
  const tape = new Tape();
  const alpha = tape.leaf(n, 1, new Float64Array(n).fill(5)); // far above 1 - eps_gamma
  const lg = clampedLogDecay(alpha, 1e-3);
  assertClose("log gamma at the clamp", lg.value, new Float64Array(n).fill(Math.log(1e-3)), {
    rtol: 0,
    atol: 0,
  });
  const gam = stepDecay(lg, seg, steps, steps, "gam");
  const ones = new Float64Array(n * n).fill(1);
  tape.backward([[gam, ones]]);
  for (let t = 0; t < n; t++) {
    for (let s = t + 1; s < n; s++) {
      if (gam.value[t * n + s] !== 0) throw new Error(`Gam[${t}, ${s}] is not 0`);
    }
  }
  if (!gam.value.every(Number.isFinite)) throw new Error("Gam has a non-finite entry");
  if (!alpha.grad!.every((g) => g === 0)) throw new Error("clamped alpha got a gradient");
});

Deno.test("clampedLogDecay is log(1 - alpha) below the clamp with gradient -1 / (1 - alpha)", () => {
  const alpha = rng.uniforms(5, 0, 0.9);
  const tape = new Tape();
  const out = clampedLogDecay(tape.constant(5, 1, alpha), 1e-3);
  assertClose("log gamma", out.value, alpha.map((a) => Math.log(1 - a)), { rtol: 1e-14, atol: 1e-16 });
  checkTapeGradient("clampedLogDecay", [[5, 1, alpha]], ([a]) => clampedLogDecay(a, 1e-3));
});
