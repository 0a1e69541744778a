/**
 * Chunk-parallel (SSD / WY) form of the scalar coefficient-stream rules (falcon1, falcon1a, linear,
 * retnet, mamba2, deltanet, gated_deltanet: one scalar gamma, a, b per step), forward and backward,
 * one head per task. The recurrence is that of fw_recurrent.ts:
 *
 *   p_t = S_{t-1}^T x_t,  w_t = b_t y_t - a_t p_t,  S_t = gamma_t S_{t-1} + x_t w_t^T,  o_t = S_t^T q_t.
 *
 * A segment of `n <= C` positions `a..e` entering with state `S_a` (SPEC section 4), with
 * `Lc_i = sum_{r<=i} log gamma_r`, `c_i = exp(Lc_i)`, `cp_i = c_{i-1}` (`cp_0 = 1`),
 * `Gam[i, j] = exp(Lc_i - Lc_j)` (`j <= i`, masked before exp) and `Gp[i, j] = Gam[i-1, j]`:
 *
 *   A = strictly_lower(diag(a) (X X^T ⊙ Gp)),  W = (I + A)^-1 [diag(b) Y - diag(a cp) X S_a],
 *   O = diag(c) Q S_a + (Q X^T ⊙ Gam) W,       S_e = c_e S_a + X^T diag(Gam[e, :]) W.
 *
 * Additive rules (`a = 0`) skip the solve: `W = diag(b) Y`. Segments are the chunks of `C` positions,
 * cut again at every sequence start: a segment that begins at a start enters with `S0` (under prefix
 * alignment its first row is the no-op sentinel), so no decay product crosses a start. The backward
 * stores only the state entering each chunk (and, for the regression rules, the pseudo-values W of
 * every position, `[T, Dv]` like the key arrays), recomputes a segment's other forward quantities and
 * differentiates the formulas above by hand; the coefficient gradients then go through the same chain
 * as the recurrent backward (coefGrads, GRAD_E, the prefix shift of keys, normalizeBackward).
 *
 * The per-column rules falcon2/falcon2a (SPEC section 4: every value column j has its own gamma_j,
 * a_j, b_j, hence its own A_j and Gam_j; the Gram matrices X X^T and Q X^T are shared) run their
 * segments in fw_chunk_column.ts (the Dk-wide products once for all columns, the C x C work one column
 * at a time with the helpers below, `Dv = 1` sub-problems); their coefficient gradients go through
 * coefGrads once per position with every column. The window rules run their segments in
 * fw_chunk_window.ts (falcon3a) and fw_chunk_window_reg.ts (falcon3). This file keeps the chunk and
 * segment loops and the checkpoints of all of them.
 *
 * Shapes: q, k `[B, T, H, Dk]`, v, o `[B, T, H, Dv]`, state `[B, H, Dk, Dv]`.
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
  C_LASTKEY,
  C_STATE,
  CHUNK,
  chunkSize,
  coefGrads,
  coefs,
  DK,
  DO0,
  DV,
  FALCON3,
  FALCON3A,
  GRAD_E,
  H,
  HAS_CARRY,
  isPerColumn,
  isRegression,
  isStart,
  K0,
  kOff,
  kRow,
  L_CKPT,
  L_CW,
  L_DKHAT,
  L_DQHAT,
  L_F64,
  L_KHAT,
  L_QHAT,
  L_WSTORE,
  L_ZERO,
  L_ZS,
  lamOff,
  layout,
  normalize,
  normalizeBackward,
  PREFIX,
  Q0,
  qRow,
  RULE,
  sqnorm,
  T,
  V0,
  vOff,
  WIN,
} from "./fw_common";
import * as L from "./fw_chunk_layout";
import { columnBackward, columnForward, columnSetup } from "./fw_chunk_column";
import { windowSegmentBackward, windowSegmentForward, windowSetup } from "./fw_chunk_window";
import { regSegmentBackward, regSegmentForward, regSetup } from "./fw_chunk_window_reg";
import {
  G_BW_H,
  G_DBETA,
  G_DCARRY,
  G_DK,
  G_DLAM,
  G_DQ,
  G_DS0,
  G_DV,
  OUT_LASTKEY,
  OUT_O,
  OUT_STATE,
  s0Ptr,
  xPtr,
} from "./fw_recurrent";
import { axpyF, dotF, fillF, ldd, ldf, std, stf } from "./simd";

/** Below this a decay counts as zero for its gradient (its log is floored; see decayGrads). */
const TINY_GAMMA: f64 = 1e-20;
/** Log decay used where gamma underflowed to 0 (every product through it underflows too). */
const LOG_ZERO: f64 = -1e4;

// absolute pointers of the work area (set by setup; fw_chunk_column.ts shares them)
export let LC: usize = 0;
export let DLC: usize = 0;
export let EV: usize = 0;
export let GAM: usize = 0;
export let AV: usize = 0;
export let BV: usize = 0;
export let CV: usize = 0;
export let ACP: usize = 0;
export let GE: usize = 0;
export let DA: usize = 0;
export let DB: usize = 0;
export let DC: usize = 0;
export let GAMM: usize = 0;
export let KXX: usize = 0;
export let KQX: usize = 0;
export let MQ: usize = 0;
export let AM: usize = 0; // -A
export let DMQ: usize = 0;
export let DAM: usize = 0;
export let DGAM: usize = 0;
export let X: usize = 0;
export let XT: usize = 0;
export let WT: usize = 0;
export let T1: usize = 0;
export let T2: usize = 0;
export let DX: usize = 0;
export let DQ: usize = 0;
export let Y: usize = 0;
export let XS: usize = 0;
export let WW: usize = 0;
export let PP: usize = 0;
export let DW: usize = 0;
export let DR: usize = 0;
export let TMP: usize = 0;
export let ST: usize = 0;
export let DST: usize = 0;
export let DSIN: usize = 0;
export let DSR: usize = 0;
export let RUN: usize = 0;
export let VC: usize = 0; // coefs() output: gam, a, b (one float each, Dv apart)
export let VG: usize = 0; // coefGrads() input: dgam, da, db (one float each, Dv apart)
export let CF: usize = 0; // per-column rules: gamma, a, b [3, C, Dv]
export let CG: usize = 0; // per-column rules: their gradients [3, C, Dv]
export let YC: usize = 0; // per-column rules: the current column's values [C]
// per-head constants
export let CC: i32 = 64; // chunk size C (at most T), also the row stride of the [C, C] matrices
export let COL: bool = false; // per-column rule: sub-problems of one value column each
export let WINDOWED: bool = false; // falcon3a: segments of fw_chunk_window.ts
export let REGWIN: bool = false; // falcon3: segments of fw_chunk_window_reg.ts
export let NV: i32 = 0; // value width of a sub-problem: Dv, or 1 for a per-column rule
export let COLB: usize = 0; // byte offset of the current value column in v, o, dO, dv rows (0: scalar rules)
export let YS: usize = 0; // values of the sub-problem [C, NV]: Y, or YC for a per-column rule
export let LDO: i32 = 0; // row stride of v, o, dO (H * Dv)
export let KH: usize = 0;
export let QH: usize = 0;
export let ZERO: usize = 0;
export let REG: bool = false;
export let WSTORE: usize = 0; // backward of a regression rule: W of every position [T, Dv], else 0

/** Per head: the chunk size, the scratch layout and work pointers, and phi(q), phi(k) of every position. */
function setup(scratch: usize, backward: bool): void {
  CC = chunkSize(T, CHUNK);
  COL = isPerColumn(RULE);
  WINDOWED = RULE == FALCON3A;
  REGWIN = RULE == FALCON3;
  layout(T, DK, DV, WIN, CC, backward, true, RULE == FALCON3);
  const b = scratch + L_CW;
  LC = b + L.W_LC;
  DLC = b + L.W_DLC;
  EV = b + L.W_E;
  GAM = b + L.W_GAM;
  AV = b + L.W_A;
  BV = b + L.W_B;
  CV = b + L.W_C;
  ACP = b + L.W_ACP;
  GE = b + L.W_GE;
  DA = b + L.W_DA;
  DB = b + L.W_DB;
  DC = b + L.W_DC;
  GAMM = b + L.W_GAMM;
  KXX = b + L.W_KXX;
  KQX = b + L.W_KQX;
  MQ = b + L.W_MQ;
  AM = b + L.W_AM;
  DMQ = b + L.W_DMQ;
  DAM = b + L.W_DAM;
  DGAM = b + L.W_DGAM;
  X = b + L.W_X;
  XT = b + L.W_XT;
  WT = b + L.W_WT;
  T1 = b + L.W_T1;
  T2 = b + L.W_T2;
  DX = b + L.W_DX;
  DQ = b + L.W_DQ;
  Y = b + L.W_Y;
  XS = b + L.W_XS;
  WW = b + L.W_W;
  PP = b + L.W_P;
  DW = b + L.W_DW;
  DR = b + L.W_DR;
  TMP = b + L.W_TMP;
  ST = b + L.W_ST;
  DST = b + L.W_DST;
  DSIN = b + L.W_DSIN;
  DSR = b + L.W_DS;
  RUN = b + L.W_RUN;
  VC = b + L.W_V;
  VG = VC + ((3 * <usize> DV) << 2);
  CF = b + L.W_CF;
  CG = b + L.W_CG;
  YC = b + L.W_YC;
  if (COL) columnSetup(b);
  if (WINDOWED || REGWIN) windowSetup(b, scratch + L_F64);
  if (REGWIN) regSetup(b);
  NV = COL ? 1 : DV;
  COLB = 0;
  YS = COL ? YC : Y;
  LDO = H * DV;
  KH = scratch + L_KHAT;
  QH = scratch + L_QHAT;
  ZERO = scratch + L_ZERO;
  REG = isRegression(RULE);
  WSTORE = backward && REG ? scratch + L_WSTORE : 0;
  fillF(ZERO, 0, DK);
  fillF(scratch + L_ZS, 0, DK * DV);
  for (let t = 0; t < T; t++) {
    normalize(QH + kRowOff(t), qRow(t), DK);
    normalize(KH + kRowOff(t), kRow(t), DK);
  }
}

/** Byte offset of row `t` of a `[T, Dk]` scratch array. */
export function kRowOff(t: i32): usize {
  return (<usize> t * <usize> DK) << 2;
}

/** Byte offset of row `t` of a `[T, Dv]` scratch array. */
export function vRowOff(t: i32): usize {
  return (<usize> t * <usize> DV) << 2;
}

/** Pointer to row `i` of a `[C, d]` work array. */
export function row(p: usize, i: i32, d: i32): usize {
  return p + ((<usize> i * <usize> d) << 2);
}

/** Pointer to element `(i, j)` of a `[C, C]` work matrix. */
export function el(p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> CC + <usize> j) << 2);
}

/** End of the segment that begins at `a` inside the chunk ending at `chunkEnd` (cut at starts). */
function segmentEnd(a: i32, chunkEnd: i32): i32 {
  let e = a + 1;
  while (e < chunkEnd && !isStart(e)) e++;
  return e;
}

/**
 * Gather the segment's rows and coefficients: X, X^T, Y, E and gamma, a, b (of the scalar rules, or
 * of every column into CF for a per-column rule).
 */
function loadRows(a: i32, n: i32): void {
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

/** Per-column rule: make value column `j` the current sub-problem (its gamma, a, b and values). */
export function selectColumn(j: i32, n: i32): void {
  const dv = DV;
  const cfb = (<usize> CC * <usize> dv) << 2;
  COLB = <usize> j << 2;
  for (let i = 0; i < n; i++) {
    const r = row(CF, i, dv) + COLB;
    stf(GAM, i, load<f32>(r));
    stf(AV, i, load<f32>(r + cfb));
    stf(BV, i, load<f32>(r + 2 * cfb));
    stf(YC, i, load<f32>(row(Y, i, dv) + COLB));
  }
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

/** One segment forward on the state `S` (updated in place); with `readout` writes o of its positions. */
function segmentForward(a: i32, n: i32, S: usize, readout: bool): void {
  if (WINDOWED) {
    windowSegmentForward(a, n, S, readout);
    return;
  }
  if (REGWIN) {
    regSegmentForward(a, n, S, readout);
    return;
  }
  loadRows(a, n);
  if (COL) columnForward(a, n, S, readout);
  else subForward(a, n, S, readout);
}

/** Forward of the current sub-problem (all columns, or one) of the segment on its state `S`. */
function subForward(a: i32, n: i32, S: usize, readout: bool): void {
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

/** Run the chunks `[c0, c1)` of C positions forward on the running state `S`. */
function runChunks(c0: i32, c1: i32, S: usize, s0: usize, readout: bool): void {
  for (let c = c0; c < c1; c++) {
    const end = min(T, (c + 1) * CC);
    let a = c * CC;
    while (a < end) {
      const e = segmentEnd(a, end);
      if (isStart(a)) memory.copy(S, s0, (<usize> DK * <usize> DV) << 2);
      segmentForward(a, e - a, S, readout);
      a = e;
    }
  }
}

/** Forward of one head of a coefficient-stream rule in the chunk-parallel form. */
export function chunkForward(scratch: usize): void {
  setup(scratch, false);
  const sdb = (<usize> DK * <usize> DV) << 2;
  if (HAS_CARRY) memory.copy(OUT_STATE, C_STATE, sdb);
  else fillF(OUT_STATE, 0, DK * DV);
  runChunks(0, (T + CC - 1) / CC, OUT_STATE, s0Ptr(scratch), true);
  if (T > 0) memory.copy(OUT_LASTKEY, KH + kRowOff(T - 1), <usize> DK << 2);
  else if (HAS_CARRY) memory.copy(OUT_LASTKEY, C_LASTKEY, <usize> DK << 2);
  else fillF(OUT_LASTKEY, 0, DK);
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
function scatterRows(a: i32, n: i32, dqh: usize, dkh: usize): void {
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

/** Backward of one segment entering with `S`; DSR holds dS_e on entry and dS_a on return. */
function segmentBackward(a: i32, n: i32, S: usize, dqh: usize, dkh: usize): void {
  const dk = DK;
  if (WINDOWED) {
    windowSegmentBackward(a, n, S, dqh, dkh);
    return;
  }
  if (REGWIN) {
    regSegmentBackward(a, n, S, dqh, dkh);
    return;
  }
  loadRows(a, n);
  fillF(DX, 0, n * dk);
  fillF(DQ, 0, n * dk);
  if (COL) columnBackward(a, n, S);
  else subBackward(a, n, S);
  scatterRows(a, n, dqh, dkh);
}

/**
 * Backward of the current sub-problem of the segment entering with `S`: DSR holds its dS_e on entry
 * and dS_a on return; dX, dQ accumulate; dgamma (in DC), da, db of its positions.
 */
function subBackward(a: i32, n: i32, S: usize): void {
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

/** Backward of one head of a coefficient-stream rule in the chunk-parallel form. */
export function chunkBackward(scratch: usize): void {
  setup(scratch, true);
  const dk = DK;
  const sd = dk * DV;
  const sdb = <usize> sd << 2;
  const dqh = scratch + L_DQHAT;
  const dkh = scratch + L_DKHAT;
  const ckpt = scratch + L_CKPT;
  const s0 = s0Ptr(scratch);
  fillF(dkh, 0, T * dk);
  fillF(G_DS0, 0, sd);
  // the window rules' pairs accumulate into dv
  if (WINDOWED || REGWIN) { for (let t = 0; t < T; t++) fillF(G_DV + vOff(t), 0, DV); }
  // checkpoints: the state entering each chunk (before a possible reset at its first position)
  if (HAS_CARRY) memory.copy(RUN, C_STATE, sdb);
  else fillF(RUN, 0, sd);
  const nc = (T + CC - 1) / CC;
  for (let c = 0; c < nc; c++) {
    memory.copy(ckpt + <usize> c * sdb, RUN, sdb);
    if (c < nc - 1 || REG) runChunks(c, c + 1, RUN, s0, false); // the last chunk only to keep its W
  }
  fillF(DSR, 0, sd);
  for (let c = nc - 1; c >= 0; c--) {
    const c0 = c * CC;
    let e = min(T, c0 + CC);
    while (e > c0) {
      let a = e - 1;
      while (a > c0 && !isStart(a)) a--;
      const start = isStart(a);
      segmentBackward(a, e - a, start ? s0 : ckpt + <usize> c * sdb, dqh, dkh);
      if (start) {
        axpyF(G_DS0, DSR, 1, sd);
        fillF(DSR, 0, sd);
      }
      e = a;
    }
  }
  memory.copy(G_DCARRY, DSR, sdb);
  for (let t = 0; t < T; t++) {
    normalizeBackward(G_DQ + kOff(t), Q0 + kOff(t), dqh + kRowOff(t), dk);
    normalizeBackward(G_DK + kOff(t), K0 + kOff(t), dkh + kRowOff(t), dk);
  }
}
