/**
 * Test helper: check the gradients of a computation written on the tape of `autodiff.ts` against
 * central finite differences.
 *
 * @module
 */

import { Rng } from "../../testing/compare.ts";
import { type Node, Tape } from "./autodiff.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";

/** Shapes and values of the leaves of one check. */
export type LeafSpec = [rows: number, cols: number, value: Float64Array];

/**
 * Build `f` on fresh tapes: the gradient of `sum(w * f(leaves))` from `Tape.backward` must match
 * central differences for every leaf.
 */
export function checkTapeGradient(
  name: string,
  specs: LeafSpec[],
  f: (leaves: Node[]) => Node,
  seed = 1,
): void {
  const values = specs.map(([, , v]) => v.slice());
  const evaluate = () => {
    const tape = new Tape();
    const leaves = specs.map(([r, c], i) => tape.leaf(r, c, values[i]));
    return { tape, leaves, out: f(leaves) };
  };
  const first = evaluate();
  const w = new Rng(seed).normals(first.out.value.length);
  first.tape.backward([[first.out, w]]);
  const loss = () => {
    const out = evaluate().out.value;
    let s = 0;
    for (let i = 0; i < out.length; i++) s += w[i] * out[i];
    return s;
  };
  values.forEach((v, i) => {
    const analytic = first.leaves[i].grad ?? new Float64Array(v.length);
    assertGradientClose(`${name} leaf ${i}`, analytic, numericGradient(loss, v, 1e-6), 1e-7, 1e-9);
  });
}
