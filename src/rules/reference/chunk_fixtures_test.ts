/**
 * The chunk-parallel and masked-parallel forms against the float64 test vectors of
 * `fixtures/vectors/` (an independent implementation): every file of `index.json`, chunk sizes
 * 1, 16 and 64, outputs, final state and every gradient to a relative L2 error of 1e-10.
 */

import { assertRelL2 } from "../../testing/compare.ts";
import { parseVectorFile, type VectorCase } from "../../vectors/load.ts";
import { chunkForm, parallelForm } from "./chunk.ts";
import type { HeadForm } from "./head.ts";

const VECTORS = new URL("../../../fixtures/vectors/", import.meta.url);
const TOL = 1e-10;

function checkForm(name: string, form: HeadForm, vec: VectorCase, chunkSize: number): void {
  const { config, head, dO, expected } = vec;
  const fwd = form.forward(config, head, chunkSize);
  assertRelL2(`${name} o`, fwd.o, expected.o, TOL);
  assertRelL2(`${name} S_final`, fwd.carry.state, expected.sFinal, TOL);
  const g = form.backward(config, head, dO, chunkSize);
  assertRelL2(`${name} dq`, g.dq, expected.grads.q, TOL);
  assertRelL2(`${name} dk`, g.dk, expected.grads.k, TOL);
  assertRelL2(`${name} dv`, g.dv, expected.grads.v, TOL);
  assertRelL2(`${name} dbeta`, g.dbeta, expected.grads.beta, TOL);
  assertRelL2(`${name} dlambdabar`, g.dlambdabar, expected.grads.lambdabar, TOL);
  assertRelL2(`${name} ds0`, g.ds0, expected.grads.S0, TOL);
}

const index: { file: string }[] = JSON.parse(Deno.readTextFileSync(new URL("index.json", VECTORS)));

Deno.test("fixtures/vectors/index.json lists the 22 rule x alignment files", () => {
  if (index.length !== 22) throw new Error(`index.json lists ${index.length} files, expected 22`);
});

for (const { file } of index) {
  Deno.test(`chunkForm (C = 1, 16, 64) and parallelForm match ${file} to 1e-10`, () => {
    const vec = parseVectorFile(file, JSON.parse(Deno.readTextFileSync(new URL(file, VECTORS))));
    for (const c of [1, 16, 64]) checkForm(`${file} chunk C=${c}`, chunkForm, vec, c);
    checkForm(`${file} parallel`, parallelForm, vec, 64);
  });
}
