/**
 * Gradients of the chunk-parallel form against central finite differences in float64 (SPEC
 * section 5), with the coupled ridge off so that no stop-gradient statistic is involved.
 */

import { ALIGNMENTS, isWindowRule, ruleConfig, RULES } from "../config.ts";
import { Rng } from "../../testing/compare.ts";
import { chunkForm } from "./chunk.ts";
import { randomHeadInputs } from "./chunk_random.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";

for (const rule of RULES) {
  Deno.test(`chunkForm backward of ${rule} matches central finite differences (coupling off, starts, carry)`, () => {
    let seed = 700;
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment, coupling: false, window: 3 });
      const T = 9, dk = 3, dv = 2;
      const inputs = randomHeadInputs(config, {
        T,
        dk,
        dv,
        seed: seed++,
        starts: [6],
        s0: true,
        carry: true,
      });
      const dO = new Rng(seed++).normals(T * dv);
      const loss = () => {
        const o = chunkForm.forward(config, inputs, 4).o;
        let s = 0;
        for (let i = 0; i < o.length; i++) s += o[i] * dO[i];
        return s;
      };
      for (const C of isWindowRule(rule) ? [1, 4] : [4]) {
        const g = chunkForm.backward(config, inputs, dO, C);
        const check = (name: string, analytic: Float64Array, x: Float64Array) =>
          assertGradientClose(
            `${rule}/${alignment} C=${C} ${name}`,
            analytic,
            numericGradient(loss, x),
            1e-7,
            1e-9,
          );
        check("dq", g.dq, inputs.q);
        check("dk", g.dk, inputs.k);
        check("dv", g.dv, inputs.v);
        check("dbeta", g.dbeta, inputs.beta);
        check("dlambdabar", g.dlambdabar, inputs.lambdabar);
        check("ds0", g.ds0, inputs.s0);
        check("dCarryState", g.dCarryState, inputs.carry!.state);
      }
    }
  });
}

Deno.test("chunkForm backward without a carry: ds0 sums the fresh start and every later start", () => {
  const config = ruleConfig("falcon1", { coupling: false, alignment: "same-step" });
  const T = 8, dk = 3, dv = 2;
  const inputs = randomHeadInputs(config, { T, dk, dv, seed: 5, starts: [3, 5], s0: true });
  const dO = new Rng(6).normals(T * dv);
  const loss = () => {
    const o = chunkForm.forward(config, inputs, 3).o;
    return o.reduce((s, v, i) => s + v * dO[i], 0);
  };
  const g = chunkForm.backward(config, inputs, dO, 3);
  assertGradientClose("ds0", g.ds0, numericGradient(loss, inputs.s0), 1e-7, 1e-9);
  if (g.dCarryState.some((x) => x !== 0)) throw new Error("dCarryState must be zero without a carry");
});
