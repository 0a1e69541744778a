/**
 * The recurrent form against the independent float64 test vectors of `fixtures/vectors/`:
 * outputs, final state, every gradient and (where stored) the per-step statistic, step size and
 * decay agree to a relative L2 error of 1e-10 per array.
 */

import { assertRelL2 } from "../../testing/compare.ts";
import { parseVectorFile, type VectorCase } from "../../vectors/load.ts";
import { recurrentForm, recurrentTrace } from "./recurrent.ts";

const VECTOR_DIR = new URL("../../../fixtures/vectors/", import.meta.url);
const REL_L2 = 1e-10;

const index = JSON.parse(await Deno.readTextFile(new URL("index.json", VECTOR_DIR))) as { file: string }[];

async function loadCase(file: string): Promise<VectorCase> {
  return parseVectorFile(file, JSON.parse(await Deno.readTextFile(new URL(file, VECTOR_DIR))));
}

/** The first value column of a `[T, Dv]` trace (the scalar rules' per-step value). */
function firstColumn(a: Float64Array, T: number): Float64Array {
  const dv = a.length / T;
  return Float64Array.from({ length: T }, (_, t) => a[t * dv]);
}

Deno.test("the vector index lists every rule under both alignments", () => {
  const pairs = new Set(index.map((e) => e.file.split("__").slice(0, 2).join("__")));
  if (pairs.size !== 22) throw new Error(`index has ${pairs.size} rule/alignment pairs, expected 22`);
});

for (const { file } of index) {
  Deno.test(`recurrentForm matches ${file} (o, S_final, every gradient)`, async () => {
    const c = await loadCase(file);
    const fwd = recurrentForm.forward(c.config, c.head, 64);
    assertRelL2(`${file} o`, fwd.o, c.expected.o, REL_L2);
    assertRelL2(`${file} S_final`, fwd.carry.state, c.expected.sFinal, REL_L2);
    const g = recurrentForm.backward(c.config, c.head, c.dO, 64);
    const e = c.expected.grads;
    assertRelL2(`${file} grads.q`, g.dq, e.q, REL_L2);
    assertRelL2(`${file} grads.k`, g.dk, e.k, REL_L2);
    assertRelL2(`${file} grads.v`, g.dv, e.v, REL_L2);
    assertRelL2(`${file} grads.beta`, g.dbeta, e.beta, REL_L2);
    assertRelL2(`${file} grads.lambdabar`, g.dlambdabar, e.lambdabar, REL_L2);
    assertRelL2(`${file} grads.S0`, g.ds0, e.S0, REL_L2);
    if (c.aux) {
      const trace = recurrentTrace(c.config, c.head);
      const perColumn = c.aux.eta.length !== c.head.T;
      const shaped = (a: Float64Array) => perColumn ? a : firstColumn(a, c.head.T);
      assertRelL2(`${file} aux.stat`, trace.stat, c.aux.stat, REL_L2);
      assertRelL2(`${file} aux.eta`, shaped(trace.eta), c.aux.eta, REL_L2);
      assertRelL2(`${file} aux.gamma`, shaped(trace.gamma), c.aux.gamma, REL_L2);
    }
  });
}
