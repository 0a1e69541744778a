/**
 * The q/k normalisation of SPEC section 1 (`qk_norm.ts`) as a tape op, so that the chunk forms
 * differentiate with respect to the raw q and k rows.
 *
 * @module
 */

import type { QkNorm } from "../config.ts";
import type { Node } from "./autodiff.ts";
import { normalizeRows, normalizeRowsBackward } from "./qk_norm.ts";

/** Tape op: every row of `a` `[rows, Dk]` normalised by `norm` (`none` returns `a` itself). */
export function normalizeRowsOp(a: Node, norm: QkNorm, epsRms: number): Node {
  if (norm === "none") return a;
  const { rows, cols } = a;
  const value = normalizeRows(a.value, rows, cols, norm, epsRms);
  return a.tape.op(rows, cols, value, [a], (out) => {
    const du = normalizeRowsBackward(a.value, out.grad!, rows, cols, norm, epsRms);
    const ga = a.gradBuffer();
    for (let i = 0; i < du.length; i++) ga[i] += du[i];
  });
}
