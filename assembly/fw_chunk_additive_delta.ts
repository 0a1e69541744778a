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
import {
  ACP,
  AM,
  AV,
  BV,
  CC,
  CF,
  CG,
  COL,
  COLB,
  CV,
  DA,
  DAM,
  DB,
  DC,
  DGAM,
  DLC,
  DMQ,
  DQ,
  DR,
  DSIN,
  DSR,
  DST,
  DW,
  DX,
  el,
  EV,
  GAM,
  GAMM,
  GE,
  KH,
  KQX,
  kRowOff,
  KXX,
  LC,
  LDO,
  MQ,
  NV,
  PP,
  QH,
  REG,
  row,
  ST,
  T1,
  T2,
  TMP,
  VC,
  VG,
  vRowOff,
  WSTORE,
  WT,
  WW,
  X,
  XS,
  XT,
  Y,
  YS,
  ZERO,
} from "./fw_chunk_context";
import {
  coefGrads,
  coefs,
  DK,
  DO0,
  DV,
  GRAD_E,
  isStart,
  lamOff,
  PREFIX,
  sqnorm,
  V0,
  vOff,
} from "./fw_common";
import { G_BW_H, G_DBETA, G_DLAM, G_DV, OUT_O, xPtr } from "./fw_recurrent";
import { axpyF, dotF, fillF, ldd, ldf, std, stf } from "./simd";

/** Below this a decay counts as zero for its gradient (its log is floored; see decayGrads). */
const TINY_GAMMA: f64 = 1e-20;

/** Log decay used where gamma underflowed to 0 (every product through it underflows too). */
const LOG_ZERO: f64 = -1e4;

/**
 * Gather the segment's rows and coefficients: X, X^T, Y, E and gamma, a, b (of the scalar rules, or
 * of every column into CF for a per-column rule).
 */
export function loadRows(a: i32, n: i32): void {
  const dk = DK;
  const dv = DV;
  const dvb = <usize> dv << 2;
  const cfb = (<usize> CC * <usize> dv) << 2;
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const start = isStart(t);
    const x = xPtr(t, start, KH, ZERO);
    memory.copy(row(X, i, dk), x, <usize> dk << 2);
    memory.copy(row(Y, i, dv), V0 + vOff(t), dvb);
    const E = sqnorm(x, dk);
    std(EV, i, E);
    if (COL) {
      const r = row(CF, i, dv);
      coefs(t, PREFIX && start, E, r, r + cfb, r + 2 * cfb);
      continue;
    }
    coefs(t, PREFIX && start, E, VC, VC + dvb, VC + 2 * dvb, 1);
    stf(GAM, i, ldf(VC, 0));
    stf(AV, i, ldf(VC + dvb, 0));
    stf(BV, i, ldf(VC + 2 * dvb, 0));
  }
  transpose(XT, X, n, dk, CC);
}

/**
 * The decays of the current sub-problem: c, a * cp, the decay matrix Gam (zero above the diagonal)
 * and Gam[e, :]. Scalar rules take Gam from the log-sums Lc (masked before exp); a per-column rule,
 * which needs one Gam per value column, builds it by the row recursion `Gam[i, :] = gamma_i
 * Gam[i-1, :]` (products of decays only: nothing overflows, nothing divides, and no exp or log).
 */
export function loadDecays(n: i32): void {
  // c_i as a running product (float64; it only underflows where exp(Lc_i) would)
  let lc: f64 = 0;
  let c: f64 = 1;
  for (let i = 0; i < n; i++) {
    const g = ldf(GAM, i);
    stf(ACP, i, <f32> (<f64> ldf(AV, i) * c));
    if (!COL) {
      lc += g > 0 ? Math.log(<f64> g) : LOG_ZERO;
      std(LC, i, lc);
    }
    c *= <f64> g;
    stf(CV, i, <f32> c);
  }
  // a per-column rule zeroes Gam once per segment (every column writes the same lower triangle)
  if (!COL) fillF(GAMM, 0, n * CC);
  for (let i = 0; i < n; i++) {
    const r = el(GAMM, i, 0);
    // masked before exp: only j < i, where Lc_i - Lc_j <= 0 (a sum of log decays)
    if (!COL) decayRow(r, ldd(LC, i), i);
    else if (i > 0) scaleRow(r, r - (<usize> CC << 2), ldf(GAM, i), i);
    stf(r, i, 1);
  }
  for (let j = 0; j < n; j++) stf(GE, j, load<f32>(el(GAMM, n - 1, j)));
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
function decayRow(row: usize, li: f64, n: i32): void {
  const lv = f64x2.splat(li);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const p = LC + (<usize> j << 3);
    const lo = f32x4.demote_f64x2_zero(f64x2.sub(lv, v128.load(p)));
    const hi = f32x4.demote_f64x2_zero(f64x2.sub(lv, v128.load(p + 16)));
    const d = v128.shuffle<i32>(lo, hi, 0, 1, 4, 5);
    v128.store(row + (<usize> j << 2), expF32x4(d));
  }
  for (; j < n; j++) stf(row, j, <f32> (li - ldd(LC, j)));
  expF(row + (<usize> (n & ~3) << 2), n & 3);
}

/**
 * Pseudo-values W of the segment entering with `S`. Regression rules: `R = diag(b) Y - diag(a cp) X S`,
 * `A = diag(a) (X X^T ⊙ Gp)` (strictly lower; AM keeps `-A`, KXX keeps Kxx) and forward substitution
 * `W_i = R_i - sum_{j<i} A[i, j] W_j`. Additive rules: `W = diag(b) Y`.
 */
function solveW(S: usize, n: i32): void {
  const dk = DK;
  const dv = NV;
  scaleRows(WW, dv, YS, dv, BV, n, dv);
  if (!REG) return;
  mm(XS, dv, X, dk, 1, S, dv, n, dk, dv, false, FULL);
  for (let i = 0; i < n; i++) axpyF(row(WW, i, dv), row(XS, i, dv), -ldf(ACP, i), dv);
  buildA(n);
  forwardSubstitute(n);
}

/** `KXX = X X^T` (strictly lower) of the segment. */
export function gramX(n: i32): void {
  gram(KXX, CC, X, DK, XT, CC, n, DK, true);
}

/** `AM = -A = -diag(a) (Kxx ⊙ Gp)` (strictly lower) of the sub-problem (Kxx: the segment's, or fresh). */
export function buildA(n: i32): void {
  if (!COL) gramX(n);
  for (let i = 1; i < n; i++) {
    const ai = ldf(AV, i);
    const am = el(AM, i, 0);
    const kx = el(KXX, i, 0);
    const gp = el(GAMM, i - 1, 0);
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
 * `W <- (I + A)^-1 W` (AM holds `-A`), in blocks of 4 rows: the rows above a block enter through one
 * product, the block's own triangle by row updates.
 */
export function forwardSubstitute(n: i32): void {
  const dv = NV;
  if (dv == 1) {
    // one column: W_i += (-A)[i, :i] . W[:i]
    for (let i = 1; i < n; i++) stf(WW, i, ldf(WW, i) + dotF(el(AM, i, 0), WW, i));
    return;
  }
  for (let i0 = 0; i0 < n; i0 += 4) {
    const i1 = min(n, i0 + 4);
    mm(row(WW, i0, dv), dv, el(AM, i0, 0), CC, 1, WW, dv, i1 - i0, i0, dv, true, FULL);
    for (let i = i0 + 1; i < i1; i++) {
      for (let j = i0; j < i; j++) axpyF(row(WW, i, dv), row(WW, j, dv), load<f32>(el(AM, i, j)), dv);
    }
  }
}

/** `dR <- (I + A)^-T dR` (AM holds `-A`), in blocks of 4 rows from the bottom, as forwardSubstitute. */
export function backSubstitute(n: i32): void {
  const dv = NV;
  if (dv == 1) {
    // one column: once dR_i is final, dR[:i] += (-A)[i, :i] dR_i
    for (let i = n - 1; i > 0; i--) axpyF(DR, el(AM, i, 0), ldf(DR, i), i);
    return;
  }
  for (let j1 = n; j1 > 0; j1 -= 4) {
    const j0 = max(0, j1 - 4);
    mm(row(DR, j0, dv), dv, el(AM, j1, j0), 1, CC, row(DR, j1, dv), dv, j1 - j0, n - j1, dv, true, FULL);
    for (let i = j1 - 1; i > j0; i--) {
      for (let j = j0; j < i; j++) axpyF(row(DR, j, dv), row(DR, i, dv), load<f32>(el(AM, i, j)), dv);
    }
  }
}

/** `KQX = Q X^T` (lower triangle) of the segment at `a`. */
export function gramQ(a: i32, n: i32): void {
  gram(KQX, CC, QH + kRowOff(a), DK, XT, CC, n, DK, false);
}

/** `MQ = KQX ⊙ Gam` (lower triangle; zero above) for the sub-problem at `a` (KQX fresh or shared). */
export function readoutMask(a: i32, n: i32): void {
  if (!COL) {
    fillF(MQ, 0, n * CC); // a per-column rule zeroes it once per segment
    gramQ(a, n);
  }
  hadamard(MQ, KQX, GAMM, n, CC);
}

/** Keep (`save`) or restore the sub-problem's pseudo-values W in the `[T, Dv]` store. */
export function storeW(a: i32, n: i32, save: bool): void {
  if (!COL) {
    const bytes = (<usize> n * <usize> NV) << 2;
    if (save) memory.copy(WSTORE + vRowOff(a), WW, bytes);
    else memory.copy(WW, WSTORE + vRowOff(a), bytes);
    return;
  }
  for (let i = 0; i < n; i++) {
    const p = WSTORE + vRowOff(a + i) + COLB;
    if (save) store<f32>(p, ldf(WW, i));
    else stf(WW, i, load<f32>(p));
  }
}

/** Forward of the current sub-problem (all columns, or one) of the segment on its state `S`. */
export function subForward(a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = NV;
  loadDecays(n);
  solveW(S, n);
  if (WSTORE != 0) storeW(a, n, true);
  if (readout) {
    readoutMask(a, n);
    const o = OUT_O + vOff(a) + COLB;
    mm(o, LDO, QH + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
    scaleRows(o, LDO, o, LDO, CV, n, dv);
    mm(o, LDO, MQ, CC, 1, WW, dv, n, n, dv, true, LOWER);
  }
  scaleRows(TMP, dv, WW, dv, GE, n, dv);
  scaleF(S, ldf(CV, n - 1), dk * dv);
  mm(S, dv, X, 1, dk, TMP, dv, dk, n, dv, true, FULL);
}

// ---- backward ----

/**
 * Gradients through the readout and the state update, given dO (rows of the segment) and `dS_e` (DSR):
 * dW, dMq -> dKqx (DMQ) and dGam (DGAM), dge, dc, dS_a (DSIN, partial), dX (DX, partial), dQ (DQ).
 */
function backReadout(a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = NV;
  const dO = DO0 + vOff(a) + COLB;
  const q = QH + kRowOff(a);
  // P = X dS_e; dge_j = P_j . W_j; dW = Mq^T dO + diag(ge) P
  mm(PP, dv, X, dk, 1, DSR, dv, n, dk, dv, false, FULL);
  mm(DW, dv, MQ, 1, CC, dO, LDO, n, n, dv, false, UPPER);
  fillF(DGAM, 0, n * CC);
  for (let j = 0; j < n; j++) {
    axpyF(row(DW, j, dv), row(PP, j, dv), ldf(GE, j), dv);
    const dge = dotF(row(PP, j, dv), row(WW, j, dv), dv);
    store<f32>(el(DGAM, n - 1, j), dge);
  }
  // dMq = dO W^T (lower): dGam += dMq ⊙ Kqx, dKqx = dMq ⊙ Gam
  gram(DMQ, CC, dO, LDO, WT, CC, n, dv, false);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      const d = load<f32>(el(DMQ, i, j));
      store<f32>(el(DGAM, i, j), load<f32>(el(DGAM, i, j)) + d * load<f32>(el(KQX, i, j)));
      store<f32>(el(DMQ, i, j), d * load<f32>(el(GAMM, i, j)));
    }
  }
  // T2 = dO S^T: dc_i = T2_i . q_i, dQ = diag(c) T2 + dKqx X, dX += dKqx^T Q
  mm(T2, dk, dO, LDO, 1, ST, dk, n, dv, dk, false, FULL);
  for (let i = 0; i < n; i++) {
    stf(DC, i, dotF(row(T2, i, dk), row(q, i, dk), dk));
  }
  scaleRows(T2, dk, T2, dk, CV, n, dk);
  axpyF(DQ, T2, 1, n * dk);
  mm(DQ, dk, DMQ, CC, 1, X, dk, n, n, dk, true, LOWER);
  mm(DX, dk, DMQ, 1, CC, q, dk, n, n, dk, true, UPPER);
  // dS_a += Q^T diag(c) dO + c_e dS_e; dc_e += <dS_e, S_a>
  scaleRows(TMP, dv, dO, LDO, CV, n, dv);
  mm(DSIN, dv, q, 1, dk, TMP, dv, dk, n, dv, true, FULL);
  const ce = ldf(CV, n - 1);
  axpyF(DSIN, DSR, ce, dk * dv);
  stf(DC, n - 1, ldf(DC, n - 1) + dotF(DSR, S, dk * dv));
  // dX += diag(ge) W dS_e^T
  scaleRows(TMP, dv, WW, dv, GE, n, dv);
  mm(DX, dk, TMP, dv, 1, DST, dk, n, dv, dk, true, FULL);
}

/**
 * Gradients through the solve and the pseudo-value targets: dR = (I + A)^-T dW (back substitution),
 * db, dY (written to dv), and for regression rules da, dA -> dKxx and dGam, dX, dS_a, dc.
 */
function backSolve(a: i32, n: i32): void {
  const dk = DK;
  const dv = NV;
  memory.copy(DR, DW, (<usize> n * <usize> dv) << 2);
  if (REG) backSubstitute(n);
  for (let i = 0; i < n; i++) {
    const ri = row(DR, i, dv);
    stf(DB, i, dotF(ri, row(YS, i, dv), dv));
    const dvt = G_DV + vOff(a + i) + COLB;
    const bi = ldf(BV, i);
    for (let j = 0; j < dv; j++) stf(dvt, j, bi * ldf(ri, j));
    stf(DA, i, 0);
  }
  if (!REG) return;
  // T1 = dR S^T: u_i = -T1_i . x_i is the gradient of (a cp)_i; dX -= diag(a cp) T1
  mm(T1, dk, DR, dv, 1, ST, dk, n, dv, dk, false, FULL);
  let cpi: f64 = 1;
  for (let i = 0; i < n; i++) {
    const u = -<f64> dotF(row(T1, i, dk), row(X, i, dk), dk);
    const ai = <f64> ldf(AV, i);
    stf(DA, i, <f32> (u * cpi));
    if (i > 0) stf(DC, i - 1, <f32> (<f64> ldf(DC, i - 1) + u * ai));
    axpyF(row(DX, i, dk), row(T1, i, dk), -ldf(ACP, i), dk);
    cpi = <f64> ldf(CV, i);
  }
  // dS_a -= X^T diag(a cp) dR
  for (let i = 0; i < n; i++) {
    const s = -ldf(ACP, i);
    const ti = row(TMP, i, dv);
    const ri = row(DR, i, dv);
    for (let j = 0; j < dv; j++) stf(ti, j, s * ldf(ri, j));
  }
  mm(DSIN, dv, X, 1, dk, TMP, dv, dk, n, dv, true, FULL);
  // dA[i, j] = -dR_i . W_j (j < i): da, dKxx (in DAM), dGp -> dGam[i-1, j]
  gram(DAM, CC, DR, dv, WT, CC, n, dv, true);
  for (let i = 1; i < n; i++) {
    const ai = ldf(AV, i);
    let dai: f32 = 0;
    for (let j = 0; j < i; j++) {
      const dA = -load<f32>(el(DAM, i, j));
      const kx = load<f32>(el(KXX, i, j));
      const gp = load<f32>(el(GAMM, i - 1, j));
      dai += dA * kx * gp;
      store<f32>(el(DAM, i, j), dA * ai * gp);
      const g = el(DGAM, i - 1, j);
      store<f32>(g, load<f32>(g) + dA * ai * kx);
    }
    stf(DA, i, ldf(DA, i) + dai);
  }
  // dX += dKxx X + dKxx^T X
  mm(DX, dk, DAM, CC, 1, X, dk, n, n, dk, true, LOWER);
  mm(DX, dk, DAM, 1, CC, X, dk, n, n, dk, true, UPPER);
}

/**
 * Gradient of every decay of the segment: `dLc_i = dc_i c_i + sum_j H[i, j] - sum_k H[k, i]` with
 * `H = dGam ⊙ Gam`, then `dlog gamma_r = sum_{i >= r} dLc_i` and `dgamma_r = dlog gamma_r / gamma_r`
 * (written to DC; zero where gamma is below TINY_GAMMA, whose every use in coefGrads is scaled by it).
 */
export function decayGrads(n: i32): void {
  for (let i = 0; i < n; i++) std(DLC, i, <f64> ldf(DC, i) * <f64> ldf(CV, i));
  for (let i = 1; i < n; i++) {
    const dg = el(DGAM, i, 0);
    const gm = el(GAMM, i, 0);
    let rs = f32x4.splat(0);
    let j = 0;
    for (; j + 4 <= i; j += 4) {
      const o = <usize> j << 2;
      const h = f32x4.mul(v128.load(dg + o), v128.load(gm + o));
      rs = f32x4.add(rs, h);
      const p = DLC + (<usize> j << 3);
      v128.store(p, f64x2.sub(v128.load(p), f64x2.promote_low_f32x4(h)));
      const hh = v128.shuffle<i32>(h, h, 2, 3, 0, 1);
      v128.store(p + 16, f64x2.sub(v128.load(p + 16), f64x2.promote_low_f32x4(hh)));
    }
    let rowSum: f64 = <f64> f32x4.extract_lane(rs, 0) + <f64> f32x4.extract_lane(rs, 1) +
      <f64> f32x4.extract_lane(rs, 2) + <f64> f32x4.extract_lane(rs, 3);
    for (; j < i; j++) {
      const h = <f64> (ldf(dg, j) * ldf(gm, j));
      rowSum += h;
      std(DLC, j, ldd(DLC, j) - h);
    }
    std(DLC, i, ldd(DLC, i) + rowSum);
  }
  let acc: f64 = 0;
  for (let r = n - 1; r >= 0; r--) {
    acc += ldd(DLC, r);
    const g = <f64> ldf(GAM, r);
    stf(DC, r, g > TINY_GAMMA ? <f32> (acc / g) : 0);
  }
}

/** Per-column rule: keep the current column's coefficient gradients (dgamma in DC, da, db) in CG. */
export function keepColumnGrads(n: i32): void {
  const dv = DV;
  const cgb = (<usize> CC * <usize> dv) << 2;
  for (let i = 0; i < n; i++) {
    const r = row(CG, i, dv) + COLB;
    store<f32>(r, ldf(DC, i));
    store<f32>(r + cgb, ldf(DA, i));
    store<f32>(r + 2 * cgb, ldf(DB, i));
  }
}

/** Per position of the segment: coefficient gradients (dbeta, dlambdabar), the E term of dx, scatter dq, dk. */
export function scatterRows(a: i32, n: i32, dqh: usize, dkh: usize): void {
  const dk = DK;
  const dvb = <usize> DV << 2;
  const cgb = (<usize> CC * <usize> DV) << 2;
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const start = isStart(t);
    let g = VG;
    if (COL) {
      g = row(CG, i, DV);
    } else {
      stf(VG, 0, ldf(DC, i));
      stf(VG + dvb, 0, ldf(DA, i));
      stf(VG + 2 * dvb, 0, ldf(DB, i));
    }
    const gb = COL ? cgb : dvb;
    coefGrads(
      t,
      PREFIX && start,
      ldd(EV, i),
      g,
      g + gb,
      g + 2 * gb,
      G_DBETA + ((<usize> t * <usize> G_BW_H) << 2),
      G_DLAM + lamOff(t),
      COL ? 0 : 1,
    );
    const dx = row(DX, i, dk);
    const ge = <f32> (2 * GRAD_E);
    if (ge != 0) axpyF(dx, row(X, i, dk), ge, dk);
    if (!PREFIX) axpyF(dkh + kRowOff(t), dx, 1, dk);
    else if (!start && t > 0) axpyF(dkh + kRowOff(t - 1), dx, 1, dk);
    memory.copy(dqh + kRowOff(t), row(DQ, i, dk), <usize> dk << 2);
  }
}

/**
 * Backward of the current sub-problem of the segment entering with `S`: DSR holds its dS_e on entry
 * and dS_a on return; dX, dQ accumulate; dgamma (in DC), da, db of its positions.
 */
export function subBackward(a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = NV;
  loadDecays(n);
  if (REG) {
    // W of the regression rules was kept by the checkpoint pass; the solve's matrix is rebuilt
    storeW(a, n, false);
    buildA(n);
  } else {
    solveW(S, n);
  }
  readoutMask(a, n);
  transpose(ST, S, dk, dv, dk);
  transpose(DST, DSR, dk, dv, dk);
  transpose(WT, WW, n, dv, CC);
  fillF(DSIN, 0, dk * dv);
  backReadout(a, n, S);
  backSolve(a, n);
  decayGrads(n);
  memory.copy(DSR, DSIN, (<usize> dk * <usize> dv) << 2);
}
