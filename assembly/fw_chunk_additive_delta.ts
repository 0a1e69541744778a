/**
 * The additive and delta families' segment kernels of the chunk-parallel form (falcon1a, linear,
 * retnet, mamba2: additive, `a = 0`; falcon1, deltanet, gated_deltanet: delta, the `(I + A)^-1`
 * solve), forward and backward, on the sub-problem of fw_chunk_context.ts (all value columns, or one
 * for the per-column family, which reuses these kernels per column: fw_chunk_per_column.ts). The
 * formulas are in fw_chunk.ts.
 */

import {
  expF,
  expF32x4,
  FULL,
  gram,
  hadamard,
  LOWER,
  mm,
  scaleF,
  scaleRows,
  transpose,
  UPPER,
} from "./chunk_mm";
// AssemblyScript has no type-only imports
// deno-lint-ignore verbatim-module-syntax
import { ChunkContext, elementAt, row } from "./fw_chunk_context";
import {
  coefGrads,
  coefs,
  DK,
  DO0,
  DV,
  GRAD_E,
  isStart,
  kRowOff,
  lamOff,
  PREFIX,
  sqnorm,
  V0,
  vOff,
  vRowOff,
} from "./fw_common";
import { G_BW_H, G_DBETA, G_DLAM, G_DV, OUT_O, xPtr } from "./fw_recurrent";
import { axpyF, dotF, fillF, ldd, ldf, std, stf } from "./simd";

/** Below this a decay counts as zero for its gradient (its log is floored; see decayGrads). */
const TINY_GAMMA: f64 = 1e-20;

/** Log decay used where gamma underflowed to 0 (every product through it underflows too). */
const LOG_ZERO: f64 = -1e4;

/**
 * Gather the segment's rows and coefficients: X, X^T, Y, E and gamma, a, b (of the scalar rules, or
 * of every column into ctx.columnCoefs for a per-column rule).
 */
export function loadRows(ctx: ChunkContext, a: i32, n: i32): void {
  const dk = DK;
  const dv = DV;
  const dvb = <usize> dv << 2;
  const cfb = (<usize> ctx.chunk * <usize> dv) << 2;
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const start = isStart(t);
    const x = xPtr(t, start, ctx.keyHat, ctx.zeroKey);
    memory.copy(row(ctx.features, i, dk), x, <usize> dk << 2);
    memory.copy(row(ctx.values, i, dv), V0 + vOff(t), dvb);
    const E = sqnorm(x, dk);
    std(ctx.featureNormSq, i, E);
    if (ctx.perColumn) {
      const r = row(ctx.columnCoefs, i, dv);
      coefs(t, PREFIX && start, E, r, r + cfb, r + 2 * cfb);
      continue;
    }
    coefs(t, PREFIX && start, E, ctx.coefOut, ctx.coefOut + dvb, ctx.coefOut + 2 * dvb, 1);
    stf(ctx.gamma, i, ldf(ctx.coefOut, 0));
    stf(ctx.aCoef, i, ldf(ctx.coefOut + dvb, 0));
    stf(ctx.bCoef, i, ldf(ctx.coefOut + 2 * dvb, 0));
  }
  transpose(ctx.featuresT, ctx.features, n, dk, ctx.chunk);
}

/**
 * The decays of the current sub-problem: c, a * cp, the decay matrix Gam (zero above the diagonal)
 * and Gam[e, :]. Scalar rules take Gam from the log-sums Lc (masked before exp); a per-column rule,
 * which needs one Gam per value column, builds it by the row recursion `Gam[i, :] = gamma_i
 * Gam[i-1, :]` (products of decays only: nothing overflows, nothing divides, and no exp or log).
 */
export function loadDecays(ctx: ChunkContext, n: i32): void {
  const gamma = ctx.gamma;
  const aPrevDecay = ctx.aPrevDecay;
  const aCoef = ctx.aCoef;
  const perColumn = ctx.perColumn;
  const logDecay = ctx.logDecay;
  const cumDecay = ctx.cumDecay;
  const decayMatrix = ctx.decayMatrix;
  const chunk = ctx.chunk;
  const decayToEnd = ctx.decayToEnd;
  // c_i as a running product (float64; it only underflows where exp(Lc_i) would)
  let lc: f64 = 0;
  let c: f64 = 1;
  for (let i = 0; i < n; i++) {
    const g = ldf(gamma, i);
    stf(aPrevDecay, i, <f32> (<f64> ldf(aCoef, i) * c));
    if (!perColumn) {
      lc += g > 0 ? Math.log(<f64> g) : LOG_ZERO;
      std(logDecay, i, lc);
    }
    c *= <f64> g;
    stf(cumDecay, i, <f32> c);
  }
  // a per-column rule zeroes Gam once per segment (every column writes the same lower triangle)
  if (!perColumn) fillF(decayMatrix, 0, n * chunk);
  for (let i = 0; i < n; i++) {
    const r = elementAt(chunk, decayMatrix, i, 0);
    // masked before exp: only j < i, where Lc_i - Lc_j <= 0 (a sum of log decays)
    if (!perColumn) decayRow(ctx, r, ldd(logDecay, i), i);
    else if (i > 0) scaleRow(r, r - (<usize> chunk << 2), ldf(gamma, i), i);
    stf(r, i, 1);
  }
  for (let j = 0; j < n; j++) stf(decayToEnd, j, load<f32>(elementAt(chunk, decayMatrix, n - 1, j)));
}

/** `dst[j] = s * src[j]` for `j < n` (4 lanes at a time). */
function scaleRow(dst: usize, src: usize, s: f32, n: i32): void {
  const sv = f32x4.splat(s);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> j << 2;
    v128.store(dst + o, f32x4.mul(sv, v128.load(src + o)));
  }
  for (; j < n; j++) stf(dst, j, s * ldf(src, j));
}

/** `row[j] = exp(li - Lc_j)` for `j < n`: differences in float64, exp in float32 (4 lanes at a time). */
function decayRow(ctx: ChunkContext, row: usize, li: f64, n: i32): void {
  const logDecay = ctx.logDecay;
  const lv = f64x2.splat(li);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const p = logDecay + (<usize> j << 3);
    const lo = f32x4.demote_f64x2_zero(f64x2.sub(lv, v128.load(p)));
    const hi = f32x4.demote_f64x2_zero(f64x2.sub(lv, v128.load(p + 16)));
    const d = v128.shuffle<i32>(lo, hi, 0, 1, 4, 5);
    v128.store(row + (<usize> j << 2), expF32x4(d));
  }
  for (; j < n; j++) stf(row, j, <f32> (li - ldd(logDecay, j)));
  expF(row + (<usize> (n & ~3) << 2), n & 3);
}

/**
 * Pseudo-values W of the segment entering with `S`. Regression rules: `R = diag(b) Y - diag(a cp) X S`,
 * `A = diag(a) (X X^T ⊙ Gp)` (strictly lower; ctx.negSolveMatrix keeps `-A`, ctx.keyGram keeps Kxx) and forward substitution
 * `W_i = R_i - sum_{j<i} A[i, j] W_j`. Additive rules: `W = diag(b) Y`.
 */
function solveW(ctx: ChunkContext, S: usize, n: i32): void {
  const dk = DK;
  const dv = ctx.subWidth;
  scaleRows(ctx.pseudoValues, dv, ctx.subValues, dv, ctx.bCoef, n, dv);
  if (!ctx.deltaWrite) return;
  mm(ctx.featuresState, dv, ctx.features, dk, 1, S, dv, n, dk, dv, false, FULL);
  for (let i = 0; i < n; i++) {
    axpyF(row(ctx.pseudoValues, i, dv), row(ctx.featuresState, i, dv), -ldf(ctx.aPrevDecay, i), dv);
  }
  buildA(ctx, n);
  forwardSubstitute(ctx, n);
}

/** `keyGram = X X^T` (strictly lower) of the segment. */
export function gramX(ctx: ChunkContext, n: i32): void {
  gram(ctx.keyGram, ctx.chunk, ctx.features, DK, ctx.featuresT, ctx.chunk, n, DK, true);
}

/** `negSolveMatrix = -A = -diag(a) (Kxx ⊙ Gp)` (strictly lower) of the sub-problem (Kxx: the segment's, or fresh). */
export function buildA(ctx: ChunkContext, n: i32): void {
  const perColumn = ctx.perColumn;
  const aCoef = ctx.aCoef;
  const chunk = ctx.chunk;
  const negSolveMatrix = ctx.negSolveMatrix;
  const keyGram = ctx.keyGram;
  const decayMatrix = ctx.decayMatrix;
  if (!perColumn) gramX(ctx, n);
  for (let i = 1; i < n; i++) {
    const ai = ldf(aCoef, i);
    const am = elementAt(chunk, negSolveMatrix, i, 0);
    const kx = elementAt(chunk, keyGram, i, 0);
    const gp = elementAt(chunk, decayMatrix, i - 1, 0);
    const a4 = f32x4.splat(-ai);
    let j = 0;
    for (; j + 4 <= i; j += 4) {
      const o = <usize> j << 2;
      v128.store(am + o, f32x4.mul(a4, f32x4.mul(v128.load(kx + o), v128.load(gp + o))));
    }
    for (; j < i; j++) stf(am, j, -ai * ldf(kx, j) * ldf(gp, j));
  }
}

/**
 * `W <- (I + A)^-1 W` (negSolveMatrix holds `-A`), in blocks of 4 rows: the rows above a block enter through one
 * product, the block's own triangle by row updates.
 */
export function forwardSubstitute(ctx: ChunkContext, n: i32): void {
  const subWidth = ctx.subWidth;
  const pseudoValues = ctx.pseudoValues;
  const chunk = ctx.chunk;
  const negSolveMatrix = ctx.negSolveMatrix;
  const dv = subWidth;
  if (dv == 1) {
    // one column: W_i += (-A)[i, :i] . W[:i]
    for (let i = 1; i < n; i++) {
      stf(
        pseudoValues,
        i,
        ldf(pseudoValues, i) + dotF(elementAt(chunk, negSolveMatrix, i, 0), pseudoValues, i),
      );
    }
    return;
  }
  for (let i0 = 0; i0 < n; i0 += 4) {
    const i1 = min(n, i0 + 4);
    mm(
      row(pseudoValues, i0, dv),
      dv,
      elementAt(chunk, negSolveMatrix, i0, 0),
      chunk,
      1,
      pseudoValues,
      dv,
      i1 - i0,
      i0,
      dv,
      true,
      FULL,
    );
    for (let i = i0 + 1; i < i1; i++) {
      for (let j = i0; j < i; j++) {
        axpyF(
          row(pseudoValues, i, dv),
          row(pseudoValues, j, dv),
          load<f32>(elementAt(chunk, negSolveMatrix, i, j)),
          dv,
        );
      }
    }
  }
}

/** `dR <- (I + A)^-T dR` (negSolveMatrix holds `-A`), in blocks of 4 rows from the bottom, as forwardSubstitute. */
export function backSubstitute(ctx: ChunkContext, n: i32): void {
  const subWidth = ctx.subWidth;
  const dRhs = ctx.dRhs;
  const chunk = ctx.chunk;
  const negSolveMatrix = ctx.negSolveMatrix;
  const dv = subWidth;
  if (dv == 1) {
    // one column: once dR_i is final, dR[:i] += (-A)[i, :i] dR_i
    for (let i = n - 1; i > 0; i--) axpyF(dRhs, elementAt(chunk, negSolveMatrix, i, 0), ldf(dRhs, i), i);
    return;
  }
  for (let j1 = n; j1 > 0; j1 -= 4) {
    const j0 = max(0, j1 - 4);
    mm(
      row(dRhs, j0, dv),
      dv,
      elementAt(chunk, negSolveMatrix, j1, j0),
      1,
      chunk,
      row(dRhs, j1, dv),
      dv,
      j1 - j0,
      n - j1,
      dv,
      true,
      FULL,
    );
    for (let i = j1 - 1; i > j0; i--) {
      for (let j = j0; j < i; j++) {
        axpyF(row(dRhs, j, dv), row(dRhs, i, dv), load<f32>(elementAt(chunk, negSolveMatrix, i, j)), dv);
      }
    }
  }
}

/** `queryKeyGram = Q X^T` (lower triangle) of the segment at `a`. */
export function gramQ(ctx: ChunkContext, a: i32, n: i32): void {
  gram(ctx.queryKeyGram, ctx.chunk, ctx.queryHat + kRowOff(a), DK, ctx.featuresT, ctx.chunk, n, DK, false);
}

/** `maskedReadout = queryKeyGram ⊙ Gam` (lower triangle; zero above) for the sub-problem at `a` (queryKeyGram fresh or shared). */
export function readoutMask(ctx: ChunkContext, a: i32, n: i32): void {
  if (!ctx.perColumn) {
    fillF(ctx.maskedReadout, 0, n * ctx.chunk); // a per-column rule zeroes it once per segment
    gramQ(ctx, a, n);
  }
  hadamard(ctx.maskedReadout, ctx.queryKeyGram, ctx.decayMatrix, n, ctx.chunk);
}

/** Keep (`save`) or restore the sub-problem's pseudo-values W in the `[T, Dv]` store. */
export function storeW(ctx: ChunkContext, a: i32, n: i32, save: bool): void {
  if (!ctx.perColumn) {
    const bytes = (<usize> n * <usize> ctx.subWidth) << 2;
    if (save) memory.copy(ctx.pseudoValueStore + vRowOff(a), ctx.pseudoValues, bytes);
    else memory.copy(ctx.pseudoValues, ctx.pseudoValueStore + vRowOff(a), bytes);
    return;
  }
  for (let i = 0; i < n; i++) {
    const p = ctx.pseudoValueStore + vRowOff(a + i) + ctx.columnByte;
    if (save) store<f32>(p, ldf(ctx.pseudoValues, i));
    else stf(ctx.pseudoValues, i, load<f32>(p));
  }
}

/** Forward of the current sub-problem (all columns, or one) of the segment on its state `S`. */
export function subForward(ctx: ChunkContext, a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = ctx.subWidth;
  loadDecays(ctx, n);
  solveW(ctx, S, n);
  if (ctx.pseudoValueStore != 0) storeW(ctx, a, n, true);
  if (readout) {
    readoutMask(ctx, a, n);
    const o = OUT_O + vOff(a) + ctx.columnByte;
    mm(o, ctx.valueStride, ctx.queryHat + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
    scaleRows(o, ctx.valueStride, o, ctx.valueStride, ctx.cumDecay, n, dv);
    mm(o, ctx.valueStride, ctx.maskedReadout, ctx.chunk, 1, ctx.pseudoValues, dv, n, n, dv, true, LOWER);
  }
  scaleRows(ctx.rowScratch, dv, ctx.pseudoValues, dv, ctx.decayToEnd, n, dv);
  scaleF(S, ldf(ctx.cumDecay, n - 1), dk * dv);
  mm(S, dv, ctx.features, 1, dk, ctx.rowScratch, dv, dk, n, dv, true, FULL);
}

// ---- backward ----

/**
 * Gradients through the readout and the state update, given dO (rows of the segment) and `dS_e` (ctx.dState):
 * dW, dMq -> dKqx (dMaskedReadout) and dGam (dDecayMatrix), dge, dc, dS_a (dStateStart, partial), dX
 * (dFeatures, partial), dQ (dQueries).
 */
function backReadout(ctx: ChunkContext, a: i32, n: i32, S: usize): void {
  const subWidth = ctx.subWidth;
  const columnByte = ctx.columnByte;
  const queryHat = ctx.queryHat;
  const featuresDState = ctx.featuresDState;
  const features = ctx.features;
  const dState = ctx.dState;
  const dPseudoValues = ctx.dPseudoValues;
  const maskedReadout = ctx.maskedReadout;
  const chunk = ctx.chunk;
  const valueStride = ctx.valueStride;
  const dDecay = ctx.dDecay;
  const dDecayMatrix = ctx.dDecayMatrix;
  const decayToEnd = ctx.decayToEnd;
  const pseudoValues = ctx.pseudoValues;
  const dMaskedReadout = ctx.dMaskedReadout;
  const pseudoValuesT = ctx.pseudoValuesT;
  const queryKeyGram = ctx.queryKeyGram;
  const decayMatrix = ctx.decayMatrix;
  const dOutStateT = ctx.dOutStateT;
  const stateT = ctx.stateT;
  const cumDecay = ctx.cumDecay;
  const dQueries = ctx.dQueries;
  const dFeatures = ctx.dFeatures;
  const rowScratch = ctx.rowScratch;
  const dStateStart = ctx.dStateStart;
  const dStateEndT = ctx.dStateEndT;
  const dk = DK;
  const dv = subWidth;
  const dO = DO0 + vOff(a) + columnByte;
  const q = queryHat + kRowOff(a);
  // P = X dS_e; dge_j = P_j . W_j; dW = Mq^T dO + diag(ge) P
  mm(featuresDState, dv, features, dk, 1, dState, dv, n, dk, dv, false, FULL);
  mm(dPseudoValues, dv, maskedReadout, 1, chunk, dO, valueStride, n, n, dv, false, UPPER);
  fillF(dDecayMatrix, 0, n * chunk);
  for (let j = 0; j < n; j++) {
    axpyF(row(dPseudoValues, j, dv), row(featuresDState, j, dv), ldf(decayToEnd, j), dv);
    const dge = dotF(row(featuresDState, j, dv), row(pseudoValues, j, dv), dv);
    store<f32>(elementAt(chunk, dDecayMatrix, n - 1, j), dge);
  }
  // dMq = dO W^T (lower): dGam += dMq ⊙ Kqx, dKqx = dMq ⊙ Gam
  gram(dMaskedReadout, chunk, dO, valueStride, pseudoValuesT, chunk, n, dv, false);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      const d = load<f32>(elementAt(chunk, dMaskedReadout, i, j));
      store<f32>(
        elementAt(chunk, dDecayMatrix, i, j),
        load<f32>(elementAt(chunk, dDecayMatrix, i, j)) + d * load<f32>(elementAt(chunk, queryKeyGram, i, j)),
      );
      store<f32>(elementAt(chunk, dMaskedReadout, i, j), d * load<f32>(elementAt(chunk, decayMatrix, i, j)));
    }
  }
  // T2 = dO S^T: dc_i = T2_i . q_i, dQ = diag(c) T2 + dKqx X, dX += dKqx^T Q
  mm(dOutStateT, dk, dO, valueStride, 1, stateT, dk, n, dv, dk, false, FULL);
  for (let i = 0; i < n; i++) {
    stf(dDecay, i, dotF(row(dOutStateT, i, dk), row(q, i, dk), dk));
  }
  scaleRows(dOutStateT, dk, dOutStateT, dk, cumDecay, n, dk);
  axpyF(dQueries, dOutStateT, 1, n * dk);
  mm(dQueries, dk, dMaskedReadout, chunk, 1, features, dk, n, n, dk, true, LOWER);
  mm(dFeatures, dk, dMaskedReadout, 1, chunk, q, dk, n, n, dk, true, UPPER);
  // dS_a += Q^T diag(c) dO + c_e dS_e; dc_e += <dS_e, S_a>
  scaleRows(rowScratch, dv, dO, valueStride, cumDecay, n, dv);
  mm(dStateStart, dv, q, 1, dk, rowScratch, dv, dk, n, dv, true, FULL);
  const ce = ldf(cumDecay, n - 1);
  axpyF(dStateStart, dState, ce, dk * dv);
  stf(dDecay, n - 1, ldf(dDecay, n - 1) + dotF(dState, S, dk * dv));
  // dX += diag(ge) W dS_e^T
  scaleRows(rowScratch, dv, pseudoValues, dv, decayToEnd, n, dv);
  mm(dFeatures, dk, rowScratch, dv, 1, dStateEndT, dk, n, dv, dk, true, FULL);
}

/**
 * Gradients through the solve and the pseudo-value targets: dR = (I + A)^-T dW (back substitution),
 * db, dY (written to dv), and for regression rules da, dA -> dKxx and dGam, dX, dS_a, dc.
 */
function backSolve(ctx: ChunkContext, a: i32, n: i32): void {
  const subWidth = ctx.subWidth;
  const dRhs = ctx.dRhs;
  const dPseudoValues = ctx.dPseudoValues;
  const deltaWrite = ctx.deltaWrite;
  const dBCoef = ctx.dBCoef;
  const subValues = ctx.subValues;
  const columnByte = ctx.columnByte;
  const bCoef = ctx.bCoef;
  const dACoef = ctx.dACoef;
  const dRhsStateT = ctx.dRhsStateT;
  const stateT = ctx.stateT;
  const features = ctx.features;
  const aCoef = ctx.aCoef;
  const dDecay = ctx.dDecay;
  const dFeatures = ctx.dFeatures;
  const aPrevDecay = ctx.aPrevDecay;
  const cumDecay = ctx.cumDecay;
  const rowScratch = ctx.rowScratch;
  const dStateStart = ctx.dStateStart;
  const dSolveMatrix = ctx.dSolveMatrix;
  const chunk = ctx.chunk;
  const pseudoValuesT = ctx.pseudoValuesT;
  const keyGram = ctx.keyGram;
  const decayMatrix = ctx.decayMatrix;
  const dDecayMatrix = ctx.dDecayMatrix;
  const dk = DK;
  const dv = subWidth;
  memory.copy(dRhs, dPseudoValues, (<usize> n * <usize> dv) << 2);
  if (deltaWrite) backSubstitute(ctx, n);
  for (let i = 0; i < n; i++) {
    const ri = row(dRhs, i, dv);
    stf(dBCoef, i, dotF(ri, row(subValues, i, dv), dv));
    const dvt = G_DV + vOff(a + i) + columnByte;
    const bi = ldf(bCoef, i);
    for (let j = 0; j < dv; j++) stf(dvt, j, bi * ldf(ri, j));
    stf(dACoef, i, 0);
  }
  if (!deltaWrite) return;
  // T1 = dR S^T: u_i = -T1_i . x_i is the gradient of (a cp)_i; dX -= diag(a cp) T1
  mm(dRhsStateT, dk, dRhs, dv, 1, stateT, dk, n, dv, dk, false, FULL);
  let cpi: f64 = 1;
  for (let i = 0; i < n; i++) {
    const u = -<f64> dotF(row(dRhsStateT, i, dk), row(features, i, dk), dk);
    const ai = <f64> ldf(aCoef, i);
    stf(dACoef, i, <f32> (u * cpi));
    if (i > 0) stf(dDecay, i - 1, <f32> (<f64> ldf(dDecay, i - 1) + u * ai));
    axpyF(row(dFeatures, i, dk), row(dRhsStateT, i, dk), -ldf(aPrevDecay, i), dk);
    cpi = <f64> ldf(cumDecay, i);
  }
  // dS_a -= X^T diag(a cp) dR
  for (let i = 0; i < n; i++) {
    const s = -ldf(aPrevDecay, i);
    const ti = row(rowScratch, i, dv);
    const ri = row(dRhs, i, dv);
    for (let j = 0; j < dv; j++) stf(ti, j, s * ldf(ri, j));
  }
  mm(dStateStart, dv, features, 1, dk, rowScratch, dv, dk, n, dv, true, FULL);
  // dA[i, j] = -dR_i . W_j (j < i): da, dKxx (in dSolveMatrix), dGp -> dGam[i-1, j]
  gram(dSolveMatrix, chunk, dRhs, dv, pseudoValuesT, chunk, n, dv, true);
  for (let i = 1; i < n; i++) {
    const ai = ldf(aCoef, i);
    let dai: f32 = 0;
    for (let j = 0; j < i; j++) {
      const dA = -load<f32>(elementAt(chunk, dSolveMatrix, i, j));
      const kx = load<f32>(elementAt(chunk, keyGram, i, j));
      const gp = load<f32>(elementAt(chunk, decayMatrix, i - 1, j));
      dai += dA * kx * gp;
      store<f32>(elementAt(chunk, dSolveMatrix, i, j), dA * ai * gp);
      const g = elementAt(chunk, dDecayMatrix, i - 1, j);
      store<f32>(g, load<f32>(g) + dA * ai * kx);
    }
    stf(dACoef, i, ldf(dACoef, i) + dai);
  }
  // dX += dKxx X + dKxx^T X
  mm(dFeatures, dk, dSolveMatrix, chunk, 1, features, dk, n, n, dk, true, LOWER);
  mm(dFeatures, dk, dSolveMatrix, 1, chunk, features, dk, n, n, dk, true, UPPER);
}

/**
 * Gradient of every decay of the segment: `dLc_i = dc_i c_i + sum_j H[i, j] - sum_k H[k, i]` with
 * `H = dGam ⊙ Gam`, then `dlog gamma_r = sum_{i >= r} dLc_i` and `dgamma_r = dlog gamma_r / gamma_r`
 * (written to ctx.dDecay; zero where gamma is below TINY_GAMMA, whose every use in coefGrads is scaled by it).
 */
export function decayGrads(ctx: ChunkContext, n: i32): void {
  const dLogDecay = ctx.dLogDecay;
  const dDecay = ctx.dDecay;
  const cumDecay = ctx.cumDecay;
  const chunk = ctx.chunk;
  const dDecayMatrix = ctx.dDecayMatrix;
  const decayMatrix = ctx.decayMatrix;
  const gamma = ctx.gamma;
  for (let i = 0; i < n; i++) std(dLogDecay, i, <f64> ldf(dDecay, i) * <f64> ldf(cumDecay, i));
  for (let i = 1; i < n; i++) {
    const dg = elementAt(chunk, dDecayMatrix, i, 0);
    const gm = elementAt(chunk, decayMatrix, i, 0);
    let rs = f32x4.splat(0);
    let j = 0;
    for (; j + 4 <= i; j += 4) {
      const o = <usize> j << 2;
      const h = f32x4.mul(v128.load(dg + o), v128.load(gm + o));
      rs = f32x4.add(rs, h);
      const p = dLogDecay + (<usize> j << 3);
      v128.store(p, f64x2.sub(v128.load(p), f64x2.promote_low_f32x4(h)));
      const hh = v128.shuffle<i32>(h, h, 2, 3, 0, 1);
      v128.store(p + 16, f64x2.sub(v128.load(p + 16), f64x2.promote_low_f32x4(hh)));
    }
    let rowSum: f64 = <f64> f32x4.extract_lane(rs, 0) + <f64> f32x4.extract_lane(rs, 1) +
      <f64> f32x4.extract_lane(rs, 2) + <f64> f32x4.extract_lane(rs, 3);
    for (; j < i; j++) {
      const h = <f64> (ldf(dg, j) * ldf(gm, j));
      rowSum += h;
      std(dLogDecay, j, ldd(dLogDecay, j) - h);
    }
    std(dLogDecay, i, ldd(dLogDecay, i) + rowSum);
  }
  let acc: f64 = 0;
  for (let r = n - 1; r >= 0; r--) {
    acc += ldd(dLogDecay, r);
    const g = <f64> ldf(gamma, r);
    stf(dDecay, r, g > TINY_GAMMA ? <f32> (acc / g) : 0);
  }
}

/** Per-column rule: keep the current column's coefficient gradients (dgamma in dDecay, da, db) in columnCoefGrads. */
export function keepColumnGrads(ctx: ChunkContext, n: i32): void {
  const dv = DV;
  const cgb = (<usize> ctx.chunk * <usize> dv) << 2;
  for (let i = 0; i < n; i++) {
    const r = row(ctx.columnCoefGrads, i, dv) + ctx.columnByte;
    store<f32>(r, ldf(ctx.dDecay, i));
    store<f32>(r + cgb, ldf(ctx.dACoef, i));
    store<f32>(r + 2 * cgb, ldf(ctx.dBCoef, i));
  }
}

/** Per position of the segment: coefficient gradients (dbeta, dlambdabar), the E term of dx, scatter dq, dk. */
export function scatterRows(ctx: ChunkContext, a: i32, n: i32, dqh: usize, dkh: usize): void {
  const dk = DK;
  const dvb = <usize> DV << 2;
  const cgb = (<usize> ctx.chunk * <usize> DV) << 2;
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const start = isStart(t);
    let g = ctx.coefGradIn;
    if (ctx.perColumn) {
      g = row(ctx.columnCoefGrads, i, DV);
    } else {
      stf(ctx.coefGradIn, 0, ldf(ctx.dDecay, i));
      stf(ctx.coefGradIn + dvb, 0, ldf(ctx.dACoef, i));
      stf(ctx.coefGradIn + 2 * dvb, 0, ldf(ctx.dBCoef, i));
    }
    const gb = ctx.perColumn ? cgb : dvb;
    coefGrads(
      t,
      PREFIX && start,
      ldd(ctx.featureNormSq, i),
      g,
      g + gb,
      g + 2 * gb,
      G_DBETA + ((<usize> t * <usize> G_BW_H) << 2),
      G_DLAM + lamOff(t),
      ctx.perColumn ? 0 : 1,
    );
    const dx = row(ctx.dFeatures, i, dk);
    const ge = <f32> (2 * GRAD_E);
    if (ge != 0) axpyF(dx, row(ctx.features, i, dk), ge, dk);
    if (!PREFIX) axpyF(dkh + kRowOff(t), dx, 1, dk);
    else if (!start && t > 0) axpyF(dkh + kRowOff(t - 1), dx, 1, dk);
    memory.copy(dqh + kRowOff(t), row(ctx.dQueries, i, dk), <usize> dk << 2);
  }
}

/**
 * Backward of the current sub-problem of the segment entering with `S`: ctx.dState holds its dS_e on entry
 * and dS_a on return; dX, dQ accumulate; dgamma (in ctx.dDecay), da, db of its positions.
 */
export function subBackward(ctx: ChunkContext, a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = ctx.subWidth;
  loadDecays(ctx, n);
  if (ctx.deltaWrite) {
    // W of the regression rules was kept by the checkpoint pass; the solve's matrix is rebuilt
    storeW(ctx, a, n, false);
    buildA(ctx, n);
  } else {
    solveW(ctx, S, n);
  }
  readoutMask(ctx, a, n);
  transpose(ctx.stateT, S, dk, dv, dk);
  transpose(ctx.dStateEndT, ctx.dState, dk, dv, dk);
  transpose(ctx.pseudoValuesT, ctx.pseudoValues, n, dv, ctx.chunk);
  fillF(ctx.dStateStart, 0, dk * dv);
  backReadout(ctx, a, n, S);
  backSolve(ctx, a, n);
  decayGrads(ctx, n);
  memory.copy(ctx.dState, ctx.dStateStart, (<usize> dk * <usize> dv) << 2);
}
