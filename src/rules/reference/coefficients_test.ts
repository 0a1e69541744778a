/** Step coefficients: the table of SPEC sections 3 and 6, the clamp, the no-ops and the backward. */

import { assertClose, Rng, TOLERANCE } from "../../testing/compare.ts";
import { isFalconRule, isPerColumnRule, ruleConfig, type RuleName, RULES } from "../config.ts";
import { stepCoefficients, stepCoefficientsBackward, type StepScalars } from "./coefficients.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";

const HEAD = { mambaA: 0.7, retnetG: 0.96875 };
const DV = 3;

function scalars(rule: RuleName, beta: number[], extra: Partial<StepScalars> = {}): StepScalars {
  return {
    beta: Float64Array.from(isPerColumnRule(rule) ? beta : [beta[0]]),
    lambdabar: 0.4,
    stat: 2.5,
    count: 1,
    sentinel: false,
    ...extra,
  };
}

Deno.test("Falcon-1: eta = beta / (E + lambda + eps), lambda = lambdabar E, gamma = 1 - eta lambda", () => {
  const config = ruleConfig("falcon1");
  const c = stepCoefficients(config, HEAD, DV, scalars("falcon1", [0.8]));
  const lambda = 0.4 * 2.5;
  const eta = 0.8 / (2.5 + lambda + 1e-6);
  assertClose("a", c.a, [eta, eta, eta], TOLERANCE.f64);
  assertClose("b", c.b, [eta, eta, eta], TOLERANCE.f64);
  assertClose("gamma", c.gamma, new Array(DV).fill(1 - eta * lambda), TOLERANCE.f64);
});

Deno.test("additive rules write without the prediction term, window rules divide by B_t", () => {
  const c1a = stepCoefficients(ruleConfig("falcon1a"), HEAD, DV, scalars("falcon1a", [0.8]));
  if (c1a.a.some((x) => x !== 0)) throw new Error(`falcon1a a = ${c1a.a}`);
  const c3 = stepCoefficients(ruleConfig("falcon3"), HEAD, DV, scalars("falcon3", [0.8], { count: 4 }));
  const c1 = stepCoefficients(ruleConfig("falcon1"), HEAD, DV, scalars("falcon1", [0.8]));
  assertClose("falcon3 a", c3.a, c1.a.map((x) => x / 4), TOLERANCE.f64);
  assertClose("falcon3 gamma", c3.gamma, c1.gamma, TOLERANCE.f64);
});

Deno.test("Falcon-2 has one step size and decay per value column", () => {
  const c = stepCoefficients(ruleConfig("falcon2"), HEAD, DV, scalars("falcon2", [0.2, 0.9, 1.5]));
  const den = 2.5 + 0.4 * 2.5 + 1e-6;
  assertClose("eta", c.eta, [0.2 / den, 0.9 / den, 1.5 / den], TOLERANCE.f64);
});

Deno.test("the baselines' coefficients follow SPEC section 6", () => {
  const beta = 0.6;
  const lb = 0.3;
  const expected: Record<string, [number, number, number]> = {
    linear: [1, 0, 1],
    retnet: [HEAD.retnetG, 0, 1],
    mamba2: [Math.exp(-beta * HEAD.mambaA), 0, beta],
    deltanet: [1, beta, beta],
    gated_deltanet: [Math.exp(-lb), Math.exp(-lb) * beta, beta],
  };
  for (const [rule, [gamma, a, b]] of Object.entries(expected)) {
    const c = stepCoefficients(
      ruleConfig(rule as RuleName),
      HEAD,
      DV,
      scalars(rule as RuleName, [beta], { lambdabar: lb }),
    );
    assertClose(`${rule} gamma`, c.gamma, new Array(DV).fill(gamma), TOLERANCE.f64);
    assertClose(`${rule} a`, c.a, new Array(DV).fill(a), TOLERANCE.f64);
    assertClose(`${rule} b`, c.b, new Array(DV).fill(b), TOLERANCE.f64);
  }
});

Deno.test("the clamp holds gamma at eps_gamma exactly and passes no gradient through it", () => {
  const config = ruleConfig("falcon1", { coupling: false });
  const step = scalars("falcon1", [1.5], { lambdabar: 1e5 });
  const c = stepCoefficients(config, HEAD, DV, step);
  if (c.gamma.some((g) => g !== config.epsGamma) || c.clamped.some((x) => x !== 1)) {
    throw new Error(`gamma ${c.gamma}, clamped ${c.clamped}`);
  }
  const g = stepCoefficientsBackward(
    config,
    HEAD,
    step,
    c,
    Float64Array.of(1, 1, 1),
    new Float64Array(DV),
    new Float64Array(DV),
  );
  if (g.dbeta[0] !== 0 || g.dlambdabar !== 0 || g.dstat !== 0) {
    throw new Error(`gradient through the clamp: ${g.dbeta[0]}, ${g.dlambdabar}, ${g.dstat}`);
  }
});

Deno.test("the sentinel and a zero Falcon statistic are no-ops: gamma = 1, a = b = 0", () => {
  for (const rule of RULES) {
    const cases = [scalars(rule, [0.5, 0.5, 0.5], { sentinel: true })];
    if (isFalconRule(rule)) cases.push(scalars(rule, [0.5, 0.5, 0.5], { stat: 0 }));
    for (const step of cases) {
      const c = stepCoefficients(ruleConfig(rule), HEAD, DV, step);
      const ok = c.noop && c.gamma.every((g) => g === 1) && c.a.every((x) => x === 0) &&
        c.b.every((x) => x === 0);
      if (!ok) throw new Error(`${rule}: not a no-op (${c.gamma}, ${c.a}, ${c.b})`);
    }
  }
});

Deno.test("stepCoefficientsBackward() matches finite differences for every rule (coupling off)", () => {
  const rng = new Rng(9);
  for (const rule of RULES) {
    const config = ruleConfig(rule, { coupling: false });
    const step = scalars(rule, [0.7, 1.1, 0.3], { count: 2 });
    const lbBox = Float64Array.of(step.lambdabar);
    const statBox = Float64Array.of(step.stat);
    const [wg, wa, wb] = [rng.normals(DV), rng.normals(DV), rng.normals(DV)];
    const f = () => {
      const c = stepCoefficients(config, HEAD, DV, { ...step, lambdabar: lbBox[0], stat: statBox[0] });
      let s = 0;
      for (let j = 0; j < DV; j++) s += wg[j] * c.gamma[j] + wa[j] * c.a[j] + wb[j] * c.b[j];
      return s;
    };
    const g = stepCoefficientsBackward(
      config,
      HEAD,
      step,
      stepCoefficients(config, HEAD, DV, step),
      wg,
      wa,
      wb,
    );
    assertGradientClose(`${rule} dbeta`, g.dbeta, numericGradient(f, step.beta));
    assertGradientClose(`${rule} dlambdabar`, [g.dlambdabar], numericGradient(f, lbBox));
    assertGradientClose(`${rule} dstat`, [g.dstat], numericGradient(f, statBox));
  }
});

Deno.test("with coupling on, dstat is the denominator path only (the ridge's statistic is a constant)", () => {
  const coupled = ruleConfig("falcon2");
  const step = scalars("falcon2", [0.7, 1.1, 0.3]);
  const w = Float64Array.of(0.3, -1.2, 0.8);
  const g = stepCoefficientsBackward(coupled, HEAD, step, stepCoefficients(coupled, HEAD, DV, step), w, w, w);
  // The same step with lambda = lambdabar * stat frozen, differentiated uncoupled:
  const frozen = ruleConfig("falcon2", { coupling: false });
  const fixed = { ...step, lambdabar: step.lambdabar * step.stat };
  const h = stepCoefficientsBackward(frozen, HEAD, fixed, stepCoefficients(frozen, HEAD, DV, fixed), w, w, w);
  assertClose("dstat", [g.dstat], [h.dstat], TOLERANCE.f64);
  assertClose("dlambdabar", [g.dlambdabar], [h.dlambdabar * step.stat], TOLERANCE.f64);
});
