/**
 * Decay ratios of the chunk-parallel forms (SPEC section 4) as masked log-space segment sums.
 *
 * A chunk has local steps `0..n-1` with per-step `log gamma` (`lg`, `[n, 1]`). Each ratio is
 * `exp(sum_{r=lo}^{hi} lg_r)` over one segment of steps, masked BEFORE exponentiating: entries that
 * cross a sequence start or lie above the diagonal are exactly 0 and never pass through `exp`, so
 * nothing overflows and no `inf * 0` reaches values or gradients. Nothing divides by a decay.
 *
 * - `Gam[t, s] = prod_{r=s+1}^{t} gamma_r` (`s <= t`, same segment)
 * - `Gp[t, s] = prod_{r=s+1}^{t-1} gamma_r` (`s < t`, same segment)
 * - `c_t = prod_{r=f_t}^{t} gamma_r`, `cp_t = prod_{r=f_t}^{t-1} gamma_r`, with `f_t` the first step
 *   of `t`'s segment inside the chunk (the chunk start, or the sequence start).
 *
 * @module
 */

import type { Node } from "./autodiff.ts";

/** Marks a masked (exactly zero) entry in the `lo` array of {@linkcode expSegmentSums}. */
export const MASKED: number = -1;

/**
 * `out[k] = exp(sum_{r=lo[k]}^{hi[k]} lg_r)` (an empty range gives 1), or exactly 0 where
 * `lo[k] === MASKED`. `lg` is `[n, 1]`; the result is `[rows, cols]`.
 */
export function expSegmentSums(
  lg: Node,
  rows: number,
  cols: number,
  lo: Int32Array,
  hi: Int32Array,
): Node {
  const n = lg.rows;
  if (lg.cols !== 1) throw new RangeError(`expSegmentSums: lg must be [n, 1], got [${lg.rows}, ${lg.cols}]`);
  const value = new Float64Array(rows * cols);
  // segment sums ending at `hi`, accumulated backwards from `hi` (no differences of prefix sums)
  const sums = new Map<number, Float64Array>();
  const sumsEndingAt = (end: number) => {
    let s = sums.get(end);
    if (!s) {
      s = new Float64Array(end + 2); // s[lo] = sum_{r=lo}^{end} lg_r, s[end + 1] = 0
      for (let r = end; r >= 0; r--) s[r] = s[r + 1] + lg.value[r];
      sums.set(end, s);
    }
    return s;
  };
  for (let k = 0; k < rows * cols; k++) {
    if (lo[k] === MASKED) continue;
    if (lo[k] < 0 || hi[k] >= n || hi[k] < lo[k] - 1) {
      throw new RangeError(`expSegmentSums: range [${lo[k]}, ${hi[k]}] outside 0..${n - 1}`);
    }
    value[k] = hi[k] < lo[k] ? 1 : Math.exp(sumsEndingAt(hi[k])[lo[k]]);
  }
  return lg.tape.op(rows, cols, value, [lg], (out) => {
    const g = out.grad!;
    // d/d lg_r of sum_k g_k out_k = sum over entries whose range holds r: a difference array
    const diff = new Float64Array(n + 1);
    for (let k = 0; k < rows * cols; k++) {
      if (lo[k] === MASKED || hi[k] < lo[k]) continue;
      const v = g[k] * value[k];
      diff[lo[k]] += v;
      diff[hi[k] + 1] -= v;
    }
    const glg = lg.gradBuffer();
    let run = 0;
    for (let r = 0; r < n; r++) {
      run += diff[r];
      glg[r] += run;
    }
  });
}

/**
 * `log gamma` of the positive-decay clamp (SPEC section 3): `log(1 - alpha_raw)` where
 * `alpha_raw < 1 - epsGamma`, and exactly `log(epsGamma)` (zero gradient) where the clamp binds.
 */
export function clampedLogDecay(alphaRaw: Node, epsGamma: number): Node {
  const limit = 1 - epsGamma;
  const logFloor = Math.log(epsGamma);
  const value = alphaRaw.value.map((a) => (a < limit ? Math.log1p(-a) : logFloor));
  return alphaRaw.tape.op(alphaRaw.rows, alphaRaw.cols, value, [alphaRaw], (out) => {
    const g = out.grad!;
    const ga = alphaRaw.gradBuffer();
    for (let i = 0; i < g.length; i++) {
      const a = alphaRaw.value[i];
      if (a < limit) ga[i] -= g[i] / (1 - a);
    }
  });
}

/** Segment structure of one chunk's steps, shared by every decay ratio. */
export interface DecaySegments {
  /** Steps in the chunk. */
  n: number;
  /** Segment id per step (steps with the same id belong to one sequence). */
  segId: Int32Array;
  /** Local index of the first step of each step's segment inside the chunk. */
  segFirst: Int32Array;
}

/**
 * Decay between steps: `[rows.length, cols.length]` with entry `(i, j)` the product over
 * `cols[j]+1 .. rows[i]` (`kind = "gam"`, needs `cols[j] <= rows[i]`) or `cols[j]+1 .. rows[i]-1`
 * (`kind = "gp"`, needs `cols[j] < rows[i]`), and 0 across segments. Rows and columns are local
 * step indices, so instance rows of a window rule can repeat steps.
 */
export function stepDecay(
  lg: Node,
  seg: DecaySegments,
  rows: ArrayLike<number>,
  cols: ArrayLike<number>,
  kind: "gam" | "gp",
): Node {
  const R = rows.length, C = cols.length;
  const lo = new Int32Array(R * C).fill(MASKED);
  const hi = new Int32Array(R * C);
  const shift = kind === "gam" ? 0 : 1;
  for (let i = 0; i < R; i++) {
    const t = rows[i];
    for (let j = 0; j < C; j++) {
      const s = cols[j];
      if (seg.segId[t] !== seg.segId[s] || s > t - shift) continue;
      lo[i * C + j] = s + 1;
      hi[i * C + j] = t - shift;
    }
  }
  return expSegmentSums(lg, R, C, lo, hi);
}

/**
 * Decay from the segment's first step inside the chunk: `[steps.length, 1]` with
 * `c_t = prod_{r=f_t}^{t}` (`kind = "c"`) or `cp_t = prod_{r=f_t}^{t-1}` (`kind = "cp"`).
 */
export function startDecay(lg: Node, seg: DecaySegments, steps: ArrayLike<number>, kind: "c" | "cp"): Node {
  const R = steps.length;
  const lo = new Int32Array(R);
  const hi = new Int32Array(R);
  for (let i = 0; i < R; i++) {
    lo[i] = seg.segFirst[steps[i]];
    hi[i] = kind === "c" ? steps[i] : steps[i] - 1;
  }
  return expSegmentSums(lg, R, 1, lo, hi);
}
