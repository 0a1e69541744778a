/**
 * One chunk of a delta rule over instance rows (SPEC section 4, regression family and the
 * DeltaNet baselines), one triangular solve per chunk (the WY/UT form).
 *
 * Instance rows `i = (s, j)`: step `s` writes pair `j` (`j = s` for every rule but Falcon-3,
 * whose steps write their whole window). With `w_i = gb_s y_j - ga_s x_j^T S_{s-1}` and
 * `S_s = gamma_s S_{s-1} + sum_{i at s} x_{j(i)} w_i^T`, unrolling `S_{s-1}` inside the chunk gives
 *
 * - `A = strictly_lower(diag(ga_I) (X_I X_I^T * Gp_I))` (`Gp_I[i, i'] = Gp[s(i), s(i')]`, zero
 *   for `s(i') >= s(i)`: updates of one step do not see each other),
 * - `W = (I + A)^-1 [diag(gb_I) Y_I - diag(ga_I * cp_I) X_I S_base]`,
 * - `O = diag(c) Q S_base + (Q X_I^T * Gam_I) W`, `S_e = c_e S_base + X_I^T diag(Gam[e, s(i)]) W`.
 *
 * Shapes: `n` steps, `np` pairs, `nI` instance rows, `Dk`, `Dv` (one column for Falcon-2).
 *
 * @module
 */

import { add, gatherRows, matmul, mul, type Node, solveUnitLower, sub, transpose } from "./autodiff.ts";
import { applyBase, baseMasks, baseTerms } from "./chunk_base.ts";
import type { ChunkLayout } from "./chunk_layout.ts";
import { type DecaySegments, startDecay, stepDecay } from "./decay.ts";

/** Operands of one chunk system (one value column for Falcon-2/2A, all columns otherwise). */
export interface ChunkSystem {
  /** Normalised queries `[n, Dk]`. */
  q: Node;
  /** Pair features `[np, Dk]`. */
  xPairs: Node;
  /** Pair targets `[np, Dv]`. */
  yPairs: Node;
  /** State entering the chunk `[Dk, Dv]`. */
  sa: Node;
  /** Reset state `[Dk, Dv]`. */
  s0: Node;
  /** `log gamma` `[n, 1]`. */
  lg: Node;
  /** Residual gain `[n, 1]` (delta rules only). */
  ga: Node | null;
  /** Target gain `[n, 1]`. */
  gb: Node;
  /** Chunk layout. */
  layout: ChunkLayout;
  /** Segments for the decay ratios. */
  seg: DecaySegments;
}

/** Result of one chunk. */
export interface ChunkResult {
  /** Readout `[n, Dv]`. */
  o: Node;
  /** State after the chunk `[Dk, Dv]`. */
  se: Node;
}

/** Instance rows `(s, p)` of a chunk: step `s` writes pair `p`, ordered by step. */
export function instanceRows(layout: ChunkLayout): { step: Int32Array; pair: Int32Array } {
  const step: number[] = [];
  const pair: number[] = [];
  for (let i = 0; i < layout.n; i++) {
    for (let p = 0; p < layout.np; p++) {
      if (layout.H[i * layout.np + p]) {
        step.push(i);
        pair.push(p);
      }
    }
  }
  return { step: Int32Array.from(step), pair: Int32Array.from(pair) };
}

/** Products of the instance features shared by the value columns of Falcon-2. */
export interface InstanceProducts {
  /** Instance features `X_I` `[nI, Dk]`. */
  xI: Node;
  /** Gram matrix `X_I X_I^T` `[nI, nI]`. */
  gram: Node;
  /** Scores `Q X_I^T` `[n, nI]`. */
  scores: Node;
}

/** `X_I`, its Gram matrix and the scores `Q X_I^T` of a chunk. */
export function instanceProducts(q: Node, xPairs: Node, layout: ChunkLayout): InstanceProducts {
  const { pair } = instanceRows(layout);
  const xI = gatherRows(xPairs, pair);
  const xIt = transpose(xI);
  return { xI, gram: matmul(xI, xIt), scores: matmul(q, xIt) };
}

/** One chunk of a delta rule; `shared` reuses the instance products across value columns. */
export function deltaChunk(sys: ChunkSystem, shared?: InstanceProducts): ChunkResult {
  const { layout, seg, lg, q } = sys;
  if (!sys.ga) throw new TypeError("deltaChunk: the rule has no residual gain (an additive rule)");
  const n = layout.n;
  const { step, pair } = instanceRows(layout);
  const { xI, gram, scores } = shared ?? instanceProducts(q, sys.xPairs, layout);
  const yI = gatherRows(sys.yPairs, pair);
  const aI = gatherRows(sys.ga, step);
  const bI = gatherRows(sys.gb, step);
  const A = mul(mul(gram, stepDecay(lg, seg, step, step, "gp")), aI);
  let rhs = mul(yI, bI);
  const fromBase = applyBase(
    xI,
    mul(aI, startDecay(lg, seg, step, "cp")),
    baseMasks(layout, step),
    sys.sa,
    sys.s0,
  );
  if (fromBase) rhs = sub(rhs, fromBase);
  const w = solveUnitLower(A, rhs);
  const all = Array.from({ length: n }, (_, i) => i);
  const base = baseTerms(q, lg, seg, layout, sys.sa, sys.s0);
  const o = add(base.o, matmul(mul(scores, stepDecay(lg, seg, all, step, "gam")), w));
  const gamE = transpose(stepDecay(lg, seg, [n - 1], step, "gam"));
  const se = add(base.se, matmul(transpose(xI), mul(w, gamE)));
  return { o, se };
}
