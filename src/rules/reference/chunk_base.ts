/**
 * The base-state terms of a chunk (SPEC section 4): the readout `diag(c) Q S_base` and the state
 * `c_e S_base` carried to the end of the chunk, where `S_base` is the state entering the chunk
 * (`S_a`) for steps still in the sequence that entered it, and `S0` for steps of a sequence that
 * started inside the chunk.
 *
 * @module
 */

import { add, gatherRows, matmul, mul, type Node } from "./autodiff.ts";
import type { ChunkLayout } from "./chunk_layout.ts";
import { type DecaySegments, startDecay } from "./decay.ts";

/** Base-state contributions to the chunk readout `[n, Dv]` and end state `[Dk, Dv]`. */
export interface BaseTerms {
  /** `diag(c) Q S_base` `[n, Dv]`. */
  o: Node;
  /** `c_e S_base(e)` `[Dk, Dv]`. */
  se: Node;
}

/** Per-step masks selecting `S_a` (`base0 = 0`) or `S0` (`base0 = 1`), as `[rows, 1]` values. */
export function baseMasks(layout: ChunkLayout, steps: ArrayLike<number>): [Float64Array, Float64Array] {
  const fromSa = new Float64Array(steps.length);
  const fromS0 = new Float64Array(steps.length);
  for (let i = 0; i < steps.length; i++) {
    if (layout.base0[steps[i]]) fromS0[i] = 1;
    else fromSa[i] = 1;
  }
  return [fromSa, fromS0];
}

/** `sum_base rows(rowScale * mask_base) * left @ S_base`: the rows of `left` applied to their base state. */
export function applyBase(
  left: Node,
  rowScale: Node,
  masks: readonly [Float64Array, Float64Array],
  sa: Node,
  s0: Node,
): Node | null {
  let out: Node | null = null;
  const states = [sa, s0];
  for (let b = 0; b < 2; b++) {
    if (!masks[b].some((m) => m !== 0)) continue;
    const mask = left.tape.constant(masks[b].length, 1, masks[b]);
    const term = matmul(mul(left, mul(rowScale, mask)), states[b]);
    out = out ? add(out, term) : term;
  }
  return out;
}

/** The base terms of a chunk with queries `q` `[n, Dk]` and `log gamma` `lg` `[n, 1]`. */
export function baseTerms(
  q: Node,
  lg: Node,
  seg: DecaySegments,
  layout: ChunkLayout,
  sa: Node,
  s0: Node,
): BaseTerms {
  const n = layout.n;
  const steps = Array.from({ length: n }, (_, i) => i);
  const c = startDecay(lg, seg, steps, "c");
  const masks = baseMasks(layout, steps);
  const o = applyBase(q, c, masks, sa, s0)!;
  const se = mul(layout.base0[n - 1] ? s0 : sa, gatherRows(c, [n - 1]));
  return { o, se };
}
