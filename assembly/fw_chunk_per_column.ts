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
import {
  ACP,
  AV,
  BV,
  CC,
  COLB,
  CV,
  DA,
  DB,
  DC,
  DGAM,
  DQ,
  DR,
  DSIN,
  DSR,
  DST,
  DW,
  DX,
  el,
  GAMM,
  GE,
  KQX,
  kRowOff,
  KXX,
  LDO,
  MQ,
  QH,
  REG,
  row,
  selectColumn,
  ST,
  WSTORE,
  WW,
  X,
  YC,
} from "./fw_chunk_context";
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
import { DK, DO0, DV, vOff } from "./fw_common";
import { G_DV, OUT_O } from "./fw_recurrent";
import { axpyF, dotF, fillF, ldf, stf } from "./simd";

// absolute pointers of the per-column work arrays (set by columnSetup)
let CE: usize = 0;
let XSF: usize = 0;
let QSF: usize = 0;
let GWF: usize = 0;
let PF: usize = 0;
let DOC: usize = 0;
let DRF: usize = 0;
let DKQX: usize = 0;
let DKXX: usize = 0;

/** Set the per-column work pointers from the chunk work area at `base`. */
export function columnSetup(base: usize): void {
  CE = base + L.W_CE;
  XSF = base + L.W_XSF;
  QSF = base + L.W_QSF;
  GWF = base + L.W_GWF;
  PF = base + L.W_PF;
  DOC = base + L.W_DOC;
  DRF = base + L.W_DRF;
  DKQX = base + L.W_DKQX;
  DKXX = base + L.W_DKXX;
}

/** Zero Gam and Mq once per segment: every column then writes the same lower triangles. */
function zeroTriangles(n: i32): void {
  fillF(GAMM, 0, n * CC);
  fillF(MQ, 0, n * CC);
}

/** Element `(i, j)` of a `[C, Dv]` work array. */
function at(p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> DV + <usize> j) << 2);
}

/** `m[r, :] ⊙= CE` (or `dst[r, :] += src[r, :] ⊙ CE` with `src`) for the `Dk` rows of a state. */
function scaleColumns(dst: usize, src: usize): void {
  const dv = DV;
  const from = src != 0 ? src : dst;
  for (let r = 0; r < DK; r++) {
    const d = row(dst, r, dv);
    const s = row(from, r, dv);
    let j = 0;
    for (; j + 4 <= dv; j += 4) {
      const p = <usize> j << 2;
      const v = f32x4.mul(v128.load(s + p), v128.load(CE + p));
      v128.store(d + p, src != 0 ? f32x4.add(v128.load(d + p), v) : v);
    }
    for (; j < dv; j++) {
      const v = ldf(s, j) * ldf(CE, j);
      stf(d, j, src != 0 ? ldf(d, j) + v : v);
    }
  }
}

/** Pseudo-values of the current column: `WW = b ⊙ y - (a cp) ⊙ XSF[:, j]`, then the solve. */
function columnW(n: i32, j: i32): void {
  for (let i = 0; i < n; i++) {
    let w = ldf(BV, i) * ldf(YC, i);
    if (REG) w -= ldf(ACP, i) * load<f32>(at(XSF, i, j));
    stf(WW, i, w);
  }
  if (REG) {
    buildA(n);
    forwardSubstitute(n);
  }
}

/** Forward of the segment `a..a+n-1` of a per-column rule on the state `S` (updated in place). */
export function columnForward(a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = DV;
  const ldo = LDO;
  if (REG) {
    gramX(n);
    mm(XSF, dv, X, dk, 1, S, dv, n, dk, dv, false, FULL);
  }
  if (readout) {
    gramQ(a, n);
    mm(QSF, dv, QH + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
  }
  zeroTriangles(n);
  for (let j = 0; j < dv; j++) {
    selectColumn(j, n);
    loadDecays(n);
    columnW(n, j);
    if (WSTORE != 0) storeW(a, n, true);
    if (readout) {
      readoutMask(a, n);
      const o = OUT_O + vOff(a) + COLB;
      for (let i = 0; i < n; i++) {
        const v = ldf(CV, i) * load<f32>(at(QSF, i, j)) + dotF(el(MQ, i, 0), WW, i + 1);
        store<f32>(o + ((<usize> i * <usize> ldo) << 2), v);
      }
    }
    for (let i = 0; i < n; i++) store<f32>(at(GWF, i, j), ldf(GE, i) * ldf(WW, i));
    stf(CE, j, ldf(CV, n - 1));
  }
  selectColumn(0, 0); // back to column offset 0
  scaleColumns(S, 0);
  mm(S, dv, X, 1, dk, GWF, dv, dk, n, dv, true, FULL);
}

/**
 * Gradients of the current column `j` through its readout, state update and solve, given dO and
 * `dS_e` (DSR, full width) and `P = X dS_e` (PF): its dgamma (in DC), da, db, its dv; adds its share
 * of dGam and dKqx, dKxx (DKQX, DKXX) and keeps `diag(c) dO` (DOC), `Gam[e, :] ⊙ W` (GWF),
 * `-diag(a cp) dR` (DRF) and `c_e` (CE) of the column for the full-width products of columnBackward.
 */
function columnBackStep(a: i32, n: i32, j: i32, S: usize): void {
  const dk = DK;
  const ldo = LDO;
  const dO = DO0 + vOff(a) + COLB;
  // dW = Mq^T dO_j + ge ⊙ P_j; dge_k = P_k W_k
  fillF(DW, 0, n);
  for (let i = 0; i < n; i++) {
    axpyF(DW, el(MQ, i, 0), load<f32>(dO + ((<usize> i * <usize> ldo) << 2)), i + 1);
  }
  fillF(DGAM, 0, n * CC);
  for (let k = 0; k < n; k++) {
    const p = load<f32>(at(PF, k, j));
    stf(DW, k, ldf(DW, k) + ldf(GE, k) * p);
    store<f32>(el(DGAM, n - 1, k), p * ldf(WW, k));
    store<f32>(at(GWF, k, j), ldf(GE, k) * ldf(WW, k));
  }
  // dMq = dO_j W^T (lower): dGam += dMq ⊙ Kqx, dKqx += dMq ⊙ Gam; dc_i = dO_ij (Q S_a)_ij
  for (let i = 0; i < n; i++) {
    const d = load<f32>(dO + ((<usize> i * <usize> ldo) << 2));
    const g = el(DGAM, i, 0);
    const kq = el(KQX, i, 0);
    const dq = el(DKQX, i, 0);
    const gm = el(GAMM, i, 0);
    const dv4 = f32x4.splat(d);
    let k = 0;
    for (; k + 4 <= i + 1; k += 4) {
      const o = <usize> k << 2;
      const dm = f32x4.mul(dv4, v128.load(WW + o));
      v128.store(g + o, f32x4.add(v128.load(g + o), f32x4.mul(dm, v128.load(kq + o))));
      v128.store(dq + o, f32x4.add(v128.load(dq + o), f32x4.mul(dm, v128.load(gm + o))));
    }
    for (; k <= i; k++) {
      const dm = d * ldf(WW, k);
      stf(g, k, ldf(g, k) + dm * ldf(kq, k));
      stf(dq, k, ldf(dq, k) + dm * ldf(gm, k));
    }
    stf(DC, i, d * load<f32>(at(QSF, i, j)));
    store<f32>(at(DOC, i, j), ldf(CV, i) * d);
  }
  // dc_e += <dS_e[:, j], S_a[:, j]>
  let se: f32 = 0;
  for (let r = 0; r < dk; r++) se += load<f32>(at(DSR, r, j)) * load<f32>(at(S, r, j));
  stf(DC, n - 1, ldf(DC, n - 1) + se);
  stf(CE, j, ldf(CV, n - 1));
  // the solve: dR = (I + A)^-T dW; db, dv
  memory.copy(DR, DW, <usize> n << 2);
  if (REG) backSubstitute(n);
  for (let i = 0; i < n; i++) {
    const r = ldf(DR, i);
    stf(DB, i, r * ldf(YC, i));
    store<f32>(G_DV + vOff(a + i) + COLB, ldf(BV, i) * r);
    stf(DA, i, 0);
  }
  if (!REG) return;
  // u_i = -dR_i (X S_a)_ij is the gradient of (a cp)_i
  let cpi: f64 = 1;
  for (let i = 0; i < n; i++) {
    const r = ldf(DR, i);
    const u = -<f64> r * <f64> load<f32>(at(XSF, i, j));
    stf(DA, i, <f32> (u * cpi));
    if (i > 0) stf(DC, i - 1, <f32> (<f64> ldf(DC, i - 1) + u * <f64> ldf(AV, i)));
    store<f32>(at(DRF, i, j), -ldf(ACP, i) * r);
    cpi = <f64> ldf(CV, i);
  }
  // dA[i, k] = -dR_i W_k (k < i): da, dKxx, dGp -> dGam[i-1, k]
  for (let i = 1; i < n; i++) {
    const ai = ldf(AV, i);
    const ri = -ldf(DR, i);
    const kx = el(KXX, i, 0);
    const gp = el(GAMM, i - 1, 0);
    const x = el(DKXX, i, 0);
    const g = el(DGAM, i - 1, 0);
    const r4 = f32x4.splat(ri);
    const a4 = f32x4.splat(ai);
    let acc = f32x4.splat(0);
    let k = 0;
    for (; k + 4 <= i; k += 4) {
      const o = <usize> k << 2;
      const dA = f32x4.mul(r4, v128.load(WW + o));
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
      const dA = ri * ldf(WW, k);
      const kv = ldf(kx, k);
      const gv = ldf(gp, k);
      dai += dA * kv * gv;
      stf(x, k, ldf(x, k) + dA * ai * gv);
      stf(g, k, ldf(g, k) + dA * ai * kv);
    }
    stf(DA, i, ldf(DA, i) + dai);
  }
}

/**
 * Backward of the segment `a..a+n-1` of a per-column rule entering with `S`: DSR holds dS_e on entry
 * and dS_a on return; dX, dQ (zeroed by the caller) accumulate; the coefficient gradients of every
 * column go to CG (keepColumnGrads).
 */
export function columnBackward(a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = DV;
  const q = QH + kRowOff(a);
  if (REG) {
    gramX(n);
    mm(XSF, dv, X, dk, 1, S, dv, n, dk, dv, false, FULL);
    fillF(DKXX, 0, n * CC);
  }
  gramQ(a, n);
  mm(QSF, dv, q, dk, 1, S, dv, n, dk, dv, false, FULL);
  mm(PF, dv, X, dk, 1, DSR, dv, n, dk, dv, false, FULL);
  fillF(DKQX, 0, n * CC);
  zeroTriangles(n);
  for (let j = 0; j < dv; j++) {
    selectColumn(j, n);
    loadDecays(n);
    if (REG) {
      // W was kept by the checkpoint pass; the solve's matrix is rebuilt
      storeW(a, n, false);
      buildA(n);
    } else {
      columnW(n, j);
    }
    readoutMask(a, n);
    columnBackStep(a, n, j, S);
    decayGrads(n);
    keepColumnGrads(n);
  }
  selectColumn(0, 0); // back to column offset 0
  transpose(ST, S, dk, dv, dk);
  transpose(DST, DSR, dk, dv, dk);
  // dQ += diag(c) dO S^T + dKqx X, dX += dKqx^T Q + (Gam[e, :] ⊙ W) dS_e^T
  mm(DQ, dk, DOC, dv, 1, ST, dk, n, dv, dk, true, FULL);
  mm(DQ, dk, DKQX, CC, 1, X, dk, n, n, dk, true, LOWER);
  mm(DX, dk, DKQX, 1, CC, q, dk, n, n, dk, true, UPPER);
  mm(DX, dk, GWF, dv, 1, DST, dk, n, dv, dk, true, FULL);
  // dS_a = Q^T diag(c) dO + dS_e ⊙ c_e
  fillF(DSIN, 0, dk * dv);
  mm(DSIN, dv, q, 1, dk, DOC, dv, dk, n, dv, true, FULL);
  scaleColumns(DSIN, DSR);
  if (REG) {
    // dX -= diag(a cp) dR S^T, dS_a -= X^T diag(a cp) dR, dX += dKxx X + dKxx^T X
    mm(DX, dk, DRF, dv, 1, ST, dk, n, dv, dk, true, FULL);
    mm(DSIN, dv, X, 1, dk, DRF, dv, dk, n, dv, true, FULL);
    mm(DX, dk, DKXX, CC, 1, X, dk, n, n, dk, true, LOWER);
    mm(DX, dk, DKXX, 1, CC, X, dk, n, n, dk, true, UPPER);
  }
  memory.copy(DSR, DSIN, (<usize> dk * <usize> dv) << 2);
}
