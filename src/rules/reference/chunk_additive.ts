/**
 * One chunk of an additive rule (SPEC section 4: Falcon-1A/2A/3A, linear attention, RetNet,
 * Mamba-2): no solve, one decay-and-window mask.
 *
 * `M[t, j] = sum_{s = max(j, a)}^{min(t, j+B-1)} Gam[t, s] g_s` over the pairs `j` the steps write,
 * including the `B-1` pairs before the chunk, i.e. `M = Gam diag(g) H` with `H[s, j] = 1` where
 * step `s` writes pair `j` (computed as a banded sum, {@linkcode windowWeights}). Then `O = diag(c) Q S_base + (Q X^T * M) Y` and
 * `S_e = c_e S_base + X^T diag(M[e, :]) Y`. With one chunk over the whole sequence this is the
 * masked-parallel form (`c` is `delta`).
 *
 * @module
 */

import { add, gatherRows, matmul, mul, type Node, transpose } from "./autodiff.ts";
import { baseTerms } from "./chunk_base.ts";
import type { ChunkResult, ChunkSystem } from "./chunk_delta.ts";
import type { ChunkLayout } from "./chunk_layout.ts";
import { stepDecay } from "./decay.ts";

/**
 * `M = Gam diag(g) H` `[n, np]` without a dense product: column `p` sums the at most `B` columns
 * `s` of `Gam` whose step writes pair `p`, weighted by `g_s`.
 */
export function windowWeights(gam: Node, g: Node, layout: ChunkLayout): Node {
  const { n, np, H } = layout;
  const writers: number[][] = Array.from({ length: np }, () => []);
  for (let s = 0; s < n; s++) for (let p = 0; p < np; p++) if (H[s * np + p]) writers[p].push(s);
  const value = new Float64Array(n * np);
  const gv = g.value, mv = gam.value;
  for (let t = 0; t < n; t++) {
    for (let p = 0; p < np; p++) {
      let acc = 0;
      for (const s of writers[p]) acc += mv[t * n + s] * gv[s];
      value[t * np + p] = acc;
    }
  }
  return gam.tape.op(n, np, value, [gam, g], (out) => {
    const dm = out.grad!;
    const dgam = gam.needsGrad ? gam.gradBuffer() : null;
    const dg = g.needsGrad ? g.gradBuffer() : null;
    for (let t = 0; t < n; t++) {
      for (let p = 0; p < np; p++) {
        const d = dm[t * np + p];
        if (d === 0) continue;
        for (const s of writers[p]) {
          if (dgam) dgam[t * n + s] += d * gv[s];
          if (dg) dg[s] += d * mv[t * n + s];
        }
      }
    }
  });
}

/** One chunk of an additive rule; `scores` reuses `Q X^T` `[n, np]` across value columns. */
export function additiveChunk(sys: ChunkSystem, scores?: Node): ChunkResult {
  const { layout, seg, lg, q, xPairs, yPairs } = sys;
  const { n } = layout;
  const all = Array.from({ length: n }, (_, i) => i);
  const gam = stepDecay(lg, seg, all, all, "gam");
  const m = windowWeights(gam, sys.gb, layout);
  const base = baseTerms(q, lg, seg, layout, sys.sa, sys.s0);
  const qx = scores ?? matmul(q, transpose(xPairs));
  const o = add(base.o, matmul(mul(qx, m), yPairs));
  const mE = transpose(gatherRows(m, [n - 1]));
  const se = add(base.se, matmul(transpose(xPairs), mul(yPairs, mE)));
  return { o, se };
}
