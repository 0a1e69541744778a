/**
 * Chunk-parallel form of the per-column rules falcon2 (regression) and falcon2a (additive): one
 * segment forward and backward, called by fw_chunk.ts (which cuts the segments, keeps the chunk
 * checkpoints and scatters the row gradients). Value column j has its own gamma_j, a_j, b_j (SPEC
 * section 4), hence its own decays `Lc_j`, `c_j`, `Gam_j` and solve matrix
 * `A_j = strictly_lower(diag(a_j) (X X^T ⊙ Gp_j))`; per column, on the column `S[:, j]` of the state:
 *
 *   W_j = (I + A_j)^-1 [b_j ⊙ Y_j - (a_j cp_j) ⊙ (X S_a)_j],
 *   O_j = c_j ⊙ (Q S_a)_j + (Q X^T ⊙ Gam_j) W_j,   S_e[:, j] = c_e,j S_a[:, j] + X^T (Gam_j[e, :] ⊙ W_j).
 *
 * Every product of width Dk runs once for all columns (`X S_a`, `Q S_a`, the state update, and in the
 * backward `X dS_e`, `dO S^T`, `Q^T dO`...); only the `C x C` work (decays, solve, masked readout and
 * their gradients) runs column by column, on the [C, 1] work arrays of fw_chunk.ts, and the Gram
 * gradients of the columns are summed before they reach dQ and dX. Additive falcon2a: `a = 0`, no
 * solve. Shapes as in fw_chunk.ts; `[C, Dv]` work arrays have row stride Dv.
 */

import { FULL, LOWER, mm, transpose, UPPER } from "./chunk_mm";
// AssemblyScript has no type-only imports
// deno-lint-ignore verbatim-module-syntax
import { ChunkContext, el, elementAt, row } from "./fw_chunk_context";
import {
  backSubstitute,
  buildA,
  decayGrads,
  forwardSubstitute,
  gramQ,
  gramX,
  keepColumnGrads,
  loadDecays,
  readoutMask,
  storeW,
} from "./fw_chunk_additive_delta";
import * as L from "./fw_chunk_layout";
import { DK, DO0, DV, kRowOff, vOff } from "./fw_common";
import { G_DV, OUT_O } from "./fw_recurrent";
import { axpyF, dotF, fillF, ldf, stf } from "./simd";

/** Set the per-column work pointers from the chunk work area at `base`. */
export function columnSetup(ctx: ChunkContext, base: usize): void {
  ctx.columnEndDecay = base + L.W_COLUMN_END_DECAY;
  ctx.columnsFeaturesState = base + L.W_COLUMNS_FEATURES_STATE;
  ctx.columnsQueriesState = base + L.W_COLUMNS_QUERIES_STATE;
  ctx.columnsEndWeighted = base + L.W_COLUMNS_END_WEIGHTED;
  ctx.columnsFeaturesDState = base + L.W_COLUMNS_FEATURES_DSTATE;
  ctx.columnsDecayedDOut = base + L.W_COLUMNS_DECAYED_DOUT;
  ctx.columnsScaledDRhs = base + L.W_COLUMNS_SCALED_DRHS;
  ctx.columnsDQueryKeyGram = base + L.W_COLUMNS_DQUERY_KEY_GRAM;
  ctx.columnsDKeyGram = base + L.W_COLUMNS_DKEY_GRAM;
}

/** Make value column `j` the current sub-problem (its gamma, a, b and values). */
function selectColumn(ctx: ChunkContext, j: i32, n: i32): void {
  const dv = DV;
  const cfb = (<usize> ctx.chunk * <usize> dv) << 2;
  ctx.columnByte = <usize> j << 2;
  for (let i = 0; i < n; i++) {
    const r = row(ctx.columnCoefs, i, dv) + ctx.columnByte;
    stf(ctx.gamma, i, load<f32>(r));
    stf(ctx.aCoef, i, load<f32>(r + cfb));
    stf(ctx.bCoef, i, load<f32>(r + 2 * cfb));
    stf(ctx.columnValues, i, load<f32>(row(ctx.values, i, dv) + ctx.columnByte));
  }
}

/** Zero Gam and Mq once per segment: every column then writes the same lower triangles. */
function zeroTriangles(ctx: ChunkContext, n: i32): void {
  const decayMatrix = ctx.decayMatrix;
  const chunk = ctx.chunk;
  const maskedReadout = ctx.maskedReadout;
  fillF(decayMatrix, 0, n * chunk);
  fillF(maskedReadout, 0, n * chunk);
}

/** Element `(i, j)` of a `[C, Dv]` work array. */
function at(p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> DV + <usize> j) << 2);
}

/** `m[r, :] ⊙= columnEndDecay` (or `dst[r, :] += src[r, :] ⊙ columnEndDecay` with `src`) for the `Dk` rows of a state. */
function scaleColumns(ctx: ChunkContext, dst: usize, src: usize): void {
  const columnEndDecay = ctx.columnEndDecay;
  const dv = DV;
  const from = src != 0 ? src : dst;
  for (let r = 0; r < DK; r++) {
    const d = row(dst, r, dv);
    const s = row(from, r, dv);
    let j = 0;
    for (; j + 4 <= dv; j += 4) {
      const p = <usize> j << 2;
      const v = f32x4.mul(v128.load(s + p), v128.load(columnEndDecay + p));
      v128.store(d + p, src != 0 ? f32x4.add(v128.load(d + p), v) : v);
    }
    for (; j < dv; j++) {
      const v = ldf(s, j) * ldf(columnEndDecay, j);
      stf(d, j, src != 0 ? ldf(d, j) + v : v);
    }
  }
}

/** Pseudo-values of the current column: `pseudoValues = b ⊙ y - (a cp) ⊙ columnsFeaturesState[:, j]`, then the solve. */
function columnW(ctx: ChunkContext, n: i32, j: i32): void {
  const bCoef = ctx.bCoef;
  const columnValues = ctx.columnValues;
  const deltaWrite = ctx.deltaWrite;
  const aPrevDecay = ctx.aPrevDecay;
  const columnsFeaturesState = ctx.columnsFeaturesState;
  const pseudoValues = ctx.pseudoValues;
  for (let i = 0; i < n; i++) {
    let w = ldf(bCoef, i) * ldf(columnValues, i);
    if (deltaWrite) w -= ldf(aPrevDecay, i) * load<f32>(at(columnsFeaturesState, i, j));
    stf(pseudoValues, i, w);
  }
  if (deltaWrite) {
    buildA(ctx, n);
    forwardSubstitute(ctx, n);
  }
}

/** Forward of the segment `a..a+n-1` of a per-column rule on the state `S` (updated in place). */
export function columnForward(ctx: ChunkContext, a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = DV;
  const ldo = ctx.valueStride;
  if (ctx.deltaWrite) {
    gramX(ctx, n);
    mm(ctx.columnsFeaturesState, dv, ctx.features, dk, 1, S, dv, n, dk, dv, false, FULL);
  }
  if (readout) {
    gramQ(ctx, a, n);
    mm(ctx.columnsQueriesState, dv, ctx.queryHat + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
  }
  zeroTriangles(ctx, n);
  for (let j = 0; j < dv; j++) {
    selectColumn(ctx, j, n);
    loadDecays(ctx, n);
    columnW(ctx, n, j);
    if (ctx.pseudoValueStore != 0) storeW(ctx, a, n, true);
    if (readout) {
      readoutMask(ctx, a, n);
      const o = OUT_O + vOff(a) + ctx.columnByte;
      for (let i = 0; i < n; i++) {
        const v = ldf(ctx.cumDecay, i) * load<f32>(at(ctx.columnsQueriesState, i, j)) +
          dotF(el(ctx, ctx.maskedReadout, i, 0), ctx.pseudoValues, i + 1);
        store<f32>(o + ((<usize> i * <usize> ldo) << 2), v);
      }
    }
    for (let i = 0; i < n; i++) {
      store<f32>(at(ctx.columnsEndWeighted, i, j), ldf(ctx.decayToEnd, i) * ldf(ctx.pseudoValues, i));
    }
    stf(ctx.columnEndDecay, j, ldf(ctx.cumDecay, n - 1));
  }
  selectColumn(ctx, 0, 0); // back to column offset 0
  scaleColumns(ctx, S, 0);
  mm(S, dv, ctx.features, 1, dk, ctx.columnsEndWeighted, dv, dk, n, dv, true, FULL);
}

/**
 * Gradients of the current column `j` through its readout, state update and solve, given dO and
 * `dS_e` (ctx.dState, full width) and `P = X dS_e` (ctx.columnsFeaturesDState): its dgamma (in ctx.dDecay), da, db, its dv; adds its share
 * of dGam and dKqx, dKxx (columnsDQueryKeyGram, columnsDKeyGram) and keeps `diag(c) dO` (columnsDecayedDOut),
 * `Gam[e, :] ⊙ W` (columnsEndWeighted),
 * `-diag(a cp) dR` (columnsScaledDRhs) and `c_e` (columnEndDecay) of the column for the full-width products of columnBackward.
 */
function columnBackStep(ctx: ChunkContext, a: i32, n: i32, j: i32, S: usize): void {
  const valueStride = ctx.valueStride;
  const columnByte = ctx.columnByte;
  const dPseudoValues = ctx.dPseudoValues;
  const chunk = ctx.chunk;
  const maskedReadout = ctx.maskedReadout;
  const dDecay = ctx.dDecay;
  const dDecayMatrix = ctx.dDecayMatrix;
  const columnsFeaturesDState = ctx.columnsFeaturesDState;
  const decayToEnd = ctx.decayToEnd;
  const pseudoValues = ctx.pseudoValues;
  const columnsEndWeighted = ctx.columnsEndWeighted;
  const queryKeyGram = ctx.queryKeyGram;
  const columnsDQueryKeyGram = ctx.columnsDQueryKeyGram;
  const decayMatrix = ctx.decayMatrix;
  const columnsQueriesState = ctx.columnsQueriesState;
  const columnsDecayedDOut = ctx.columnsDecayedDOut;
  const cumDecay = ctx.cumDecay;
  const dState = ctx.dState;
  const columnEndDecay = ctx.columnEndDecay;
  const dRhs = ctx.dRhs;
  const deltaWrite = ctx.deltaWrite;
  const dBCoef = ctx.dBCoef;
  const columnValues = ctx.columnValues;
  const bCoef = ctx.bCoef;
  const dACoef = ctx.dACoef;
  const columnsFeaturesState = ctx.columnsFeaturesState;
  const aCoef = ctx.aCoef;
  const columnsScaledDRhs = ctx.columnsScaledDRhs;
  const aPrevDecay = ctx.aPrevDecay;
  const keyGram = ctx.keyGram;
  const columnsDKeyGram = ctx.columnsDKeyGram;
  const dk = DK;
  const ldo = valueStride;
  const dO = DO0 + vOff(a) + columnByte;
  // dW = Mq^T dO_j + ge ⊙ P_j; dge_k = P_k W_k
  fillF(dPseudoValues, 0, n);
  for (let i = 0; i < n; i++) {
    axpyF(
      dPseudoValues,
      elementAt(chunk, maskedReadout, i, 0),
      load<f32>(dO + ((<usize> i * <usize> ldo) << 2)),
      i + 1,
    );
  }
  fillF(dDecayMatrix, 0, n * chunk);
  for (let k = 0; k < n; k++) {
    const p = load<f32>(at(columnsFeaturesDState, k, j));
    stf(dPseudoValues, k, ldf(dPseudoValues, k) + ldf(decayToEnd, k) * p);
    store<f32>(elementAt(chunk, dDecayMatrix, n - 1, k), p * ldf(pseudoValues, k));
    store<f32>(at(columnsEndWeighted, k, j), ldf(decayToEnd, k) * ldf(pseudoValues, k));
  }
  // dMq = dO_j W^T (lower): dGam += dMq ⊙ Kqx, dKqx += dMq ⊙ Gam; dc_i = dO_ij (Q S_a)_ij
  for (let i = 0; i < n; i++) {
    const d = load<f32>(dO + ((<usize> i * <usize> ldo) << 2));
    const g = elementAt(chunk, dDecayMatrix, i, 0);
    const kq = elementAt(chunk, queryKeyGram, i, 0);
    const dq = elementAt(chunk, columnsDQueryKeyGram, i, 0);
    const gm = elementAt(chunk, decayMatrix, i, 0);
    const dv4 = f32x4.splat(d);
    let k = 0;
    for (; k + 4 <= i + 1; k += 4) {
      const o = <usize> k << 2;
      const dm = f32x4.mul(dv4, v128.load(pseudoValues + o));
      v128.store(g + o, f32x4.add(v128.load(g + o), f32x4.mul(dm, v128.load(kq + o))));
      v128.store(dq + o, f32x4.add(v128.load(dq + o), f32x4.mul(dm, v128.load(gm + o))));
    }
    for (; k <= i; k++) {
      const dm = d * ldf(pseudoValues, k);
      stf(g, k, ldf(g, k) + dm * ldf(kq, k));
      stf(dq, k, ldf(dq, k) + dm * ldf(gm, k));
    }
    stf(dDecay, i, d * load<f32>(at(columnsQueriesState, i, j)));
    store<f32>(at(columnsDecayedDOut, i, j), ldf(cumDecay, i) * d);
  }
  // dc_e += <dS_e[:, j], S_a[:, j]>
  let se: f32 = 0;
  for (let r = 0; r < dk; r++) se += load<f32>(at(dState, r, j)) * load<f32>(at(S, r, j));
  stf(dDecay, n - 1, ldf(dDecay, n - 1) + se);
  stf(columnEndDecay, j, ldf(cumDecay, n - 1));
  // the solve: dR = (I + A)^-T dW; db, dv
  memory.copy(dRhs, dPseudoValues, <usize> n << 2);
  if (deltaWrite) backSubstitute(ctx, n);
  for (let i = 0; i < n; i++) {
    const r = ldf(dRhs, i);
    stf(dBCoef, i, r * ldf(columnValues, i));
    store<f32>(G_DV + vOff(a + i) + columnByte, ldf(bCoef, i) * r);
    stf(dACoef, i, 0);
  }
  if (!deltaWrite) return;
  // u_i = -dR_i (X S_a)_ij is the gradient of (a cp)_i
  let cpi: f64 = 1;
  for (let i = 0; i < n; i++) {
    const r = ldf(dRhs, i);
    const u = -<f64> r * <f64> load<f32>(at(columnsFeaturesState, i, j));
    stf(dACoef, i, <f32> (u * cpi));
    if (i > 0) stf(dDecay, i - 1, <f32> (<f64> ldf(dDecay, i - 1) + u * <f64> ldf(aCoef, i)));
    store<f32>(at(columnsScaledDRhs, i, j), -ldf(aPrevDecay, i) * r);
    cpi = <f64> ldf(cumDecay, i);
  }
  // dA[i, k] = -dR_i W_k (k < i): da, dKxx, dGp -> dGam[i-1, k]
  for (let i = 1; i < n; i++) {
    const ai = ldf(aCoef, i);
    const ri = -ldf(dRhs, i);
    const kx = elementAt(chunk, keyGram, i, 0);
    const gp = elementAt(chunk, decayMatrix, i - 1, 0);
    const x = elementAt(chunk, columnsDKeyGram, i, 0);
    const g = elementAt(chunk, dDecayMatrix, i - 1, 0);
    const r4 = f32x4.splat(ri);
    const a4 = f32x4.splat(ai);
    let acc = f32x4.splat(0);
    let k = 0;
    for (; k + 4 <= i; k += 4) {
      const o = <usize> k << 2;
      const dA = f32x4.mul(r4, v128.load(pseudoValues + o));
      const kv = v128.load(kx + o);
      const gv = v128.load(gp + o);
      acc = f32x4.add(acc, f32x4.mul(f32x4.mul(dA, kv), gv));
      const da = f32x4.mul(dA, a4);
      v128.store(x + o, f32x4.add(v128.load(x + o), f32x4.mul(da, gv)));
      v128.store(g + o, f32x4.add(v128.load(g + o), f32x4.mul(da, kv)));
    }
    let dai: f32 = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) +
      f32x4.extract_lane(acc, 3);
    for (; k < i; k++) {
      const dA = ri * ldf(pseudoValues, k);
      const kv = ldf(kx, k);
      const gv = ldf(gp, k);
      dai += dA * kv * gv;
      stf(x, k, ldf(x, k) + dA * ai * gv);
      stf(g, k, ldf(g, k) + dA * ai * kv);
    }
    stf(dACoef, i, ldf(dACoef, i) + dai);
  }
}

/**
 * Backward of the segment `a..a+n-1` of a per-column rule entering with `S`: ctx.dState holds dS_e on entry
 * and dS_a on return; dX, dQ (zeroed by the caller) accumulate; the coefficient gradients of every
 * column go to ctx.columnCoefGrads (keepColumnGrads).
 */
export function columnBackward(ctx: ChunkContext, a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = DV;
  const q = ctx.queryHat + kRowOff(a);
  if (ctx.deltaWrite) {
    gramX(ctx, n);
    mm(ctx.columnsFeaturesState, dv, ctx.features, dk, 1, S, dv, n, dk, dv, false, FULL);
    fillF(ctx.columnsDKeyGram, 0, n * ctx.chunk);
  }
  gramQ(ctx, a, n);
  mm(ctx.columnsQueriesState, dv, q, dk, 1, S, dv, n, dk, dv, false, FULL);
  mm(ctx.columnsFeaturesDState, dv, ctx.features, dk, 1, ctx.dState, dv, n, dk, dv, false, FULL);
  fillF(ctx.columnsDQueryKeyGram, 0, n * ctx.chunk);
  zeroTriangles(ctx, n);
  for (let j = 0; j < dv; j++) {
    selectColumn(ctx, j, n);
    loadDecays(ctx, n);
    if (ctx.deltaWrite) {
      // W was kept by the checkpoint pass; the solve's matrix is rebuilt
      storeW(ctx, a, n, false);
      buildA(ctx, n);
    } else {
      columnW(ctx, n, j);
    }
    readoutMask(ctx, a, n);
    columnBackStep(ctx, a, n, j, S);
    decayGrads(ctx, n);
    keepColumnGrads(ctx, n);
  }
  selectColumn(ctx, 0, 0); // back to column offset 0
  transpose(ctx.stateT, S, dk, dv, dk);
  transpose(ctx.dStateEndT, ctx.dState, dk, dv, dk);
  // dQ += diag(c) dO S^T + dKqx X, dX += dKqx^T Q + (Gam[e, :] ⊙ W) dS_e^T
  mm(ctx.dQueries, dk, ctx.columnsDecayedDOut, dv, 1, ctx.stateT, dk, n, dv, dk, true, FULL);
  mm(ctx.dQueries, dk, ctx.columnsDQueryKeyGram, ctx.chunk, 1, ctx.features, dk, n, n, dk, true, LOWER);
  mm(ctx.dFeatures, dk, ctx.columnsDQueryKeyGram, 1, ctx.chunk, q, dk, n, n, dk, true, UPPER);
  mm(ctx.dFeatures, dk, ctx.columnsEndWeighted, dv, 1, ctx.dStateEndT, dk, n, dv, dk, true, FULL);
  // dS_a = Q^T diag(c) dO + dS_e ⊙ c_e
  fillF(ctx.dStateStart, 0, dk * dv);
  mm(ctx.dStateStart, dv, q, 1, dk, ctx.columnsDecayedDOut, dv, dk, n, dv, true, FULL);
  scaleColumns(ctx, ctx.dStateStart, ctx.dState);
  if (ctx.deltaWrite) {
    // dX -= diag(a cp) dR S^T, dS_a -= X^T diag(a cp) dR, dX += dKxx X + dKxx^T X
    mm(ctx.dFeatures, dk, ctx.columnsScaledDRhs, dv, 1, ctx.stateT, dk, n, dv, dk, true, FULL);
    mm(ctx.dStateStart, dv, ctx.features, 1, dk, ctx.columnsScaledDRhs, dv, dk, n, dv, true, FULL);
    mm(ctx.dFeatures, dk, ctx.columnsDKeyGram, ctx.chunk, 1, ctx.features, dk, n, n, dk, true, LOWER);
    mm(ctx.dFeatures, dk, ctx.columnsDKeyGram, 1, ctx.chunk, ctx.features, dk, n, n, dk, true, UPPER);
  }
  memory.copy(ctx.dState, ctx.dStateStart, (<usize> dk * <usize> dv) << 2);
}
