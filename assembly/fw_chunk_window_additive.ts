/**
 * Chunk-parallel form of the additive window rule falcon3a: one segment forward and backward, called
 * by fw_chunk.ts (which cuts the segments at chunk edges and sequence starts and keeps the chunk
 * checkpoints). Position t writes every pair of its window `I_t = {WLO_t..t}` with gain
 * `g_t = eta_t / |I_t|` (fw_window.ts: its window and coefficient code, so the two forms match):
 * `S_t = gamma_t S_{t-1} + g_t sum_{j in I_t} x_j y_j^T`. For a segment `a..e` entering with `S_a`
 * and its pairs `j = jlo..e` (`jlo` down to `a - B + 1`: pairs of earlier chunks or of the carry,
 * still being written inside the segment), SPEC section 4:
 *
 *   O = diag(c) Q S_a + (Q X^T ⊙ M) Y,   S_e = c_e S_a + X^T diag(M[e, :]) Y,
 *   M[t, j] = sum_{s <= t, j in I_s} Gam[t, s] g_s,
 *
 * with M built row by row (`M[t, :] = gamma_t M[t-1, :] + g_t [j in I_t]`, `c_t = gamma_t c_{t-1}`):
 * only products of decays, nothing divides by gamma or by c. The backward runs that recursion in
 * reverse for dgamma and dg, then the coefficient chain of the recurrent kernel (dbeta, dlambdabar,
 * the statistic's dx). Carried pairs (`j < 0`) get no gradient. Shapes as in fw_chunk.ts; the pair
 * arrays hold `P = C + B - 1` rows, the `[C, P]` matrices have row stride P.
 */

import { FULL, mm, scaleF, scaleRows, transpose } from "./chunk_mm";
import { CC, CV, DC, DQ, DSIN, DSR, DST, KH, kRowOff, LDO, QH, ST, T2 } from "./fw_chunk_context";
import * as L from "./fw_chunk_layout";
import { COUPLING, DK, DO0, DV, lamOff, PREFIX, vOff, WIN } from "./fw_common";
import { G_BW_H, G_DBETA, G_DLAM, G_DV, OUT_O } from "./fw_recurrent";
import {
  pairX,
  pairY,
  ST_CLAMPED,
  ST_DEN,
  ST_ETA,
  ST_GAMMA,
  ST_LAM,
  ST_NOOP,
  ST_STAT,
  windowCoefs,
  windowOf,
  WLO,
  WN,
} from "./fw_window";
import { axpyF, dotF, fillF, ldd, ldf, std, stf } from "./simd";

// per-position scalars (f64 [C] each) and window bounds (i32 [C] each); fw_chunk_window_delta.ts shares them
export let WGAM: usize = 0;
export let WG: usize = 0;
export let WSTAT: usize = 0;
export let WLAM: usize = 0;
export let WDEN: usize = 0;
export let WETA: usize = 0;
export let WCL: usize = 0;
export let WNOOP: usize = 0;
export let WLOS: usize = 0;
export let WNS: usize = 0;
// pair arrays
export let PX: usize = 0;
export let PXT: usize = 0;
export let PY: usize = 0;
export let PYT: usize = 0;
export let PM: usize = 0;
export let PKQ: usize = 0;
export let PMQ: usize = 0;
export let PDM: usize = 0;
export let PDQ: usize = 0;
export let PDX: usize = 0;
export let PDY: usize = 0;
export let PPV: usize = 0;
export let PR: usize = 0;
export let LDP: i32 = 1; // row stride of the [C, P] matrices
export let JLO: i32 = 0; // first pair of the segment
export let NP: i32 = 0; // pairs of the segment
export let F64S: usize = 0; // float64 work of windowCoefs (falcon3's eigen solver)

/** Set the window work pointers from the chunk work area at `base` (`f64s`: windowCoefs' work). */
export function windowSetup(base: usize, f64s: usize): void {
  F64S = f64s;
  const c = <usize> CC << 3;
  WGAM = base + L.W_WS;
  WG = WGAM + c;
  WSTAT = WG + c;
  WLAM = WSTAT + c;
  WDEN = WLAM + c;
  WETA = WDEN + c;
  WCL = WETA + c;
  WNOOP = WCL + c;
  WLOS = base + L.W_WI;
  WNS = WLOS + (<usize> CC << 2);
  PX = base + L.W_PX;
  PXT = base + L.W_PXT;
  PY = base + L.W_PY;
  PYT = base + L.W_PYT;
  PM = base + L.W_PM;
  PKQ = base + L.W_PKQ;
  PMQ = base + L.W_PMQ;
  PDM = base + L.W_PDM;
  PDQ = base + L.W_PDQ;
  PDX = base + L.W_PDX;
  PDY = base + L.W_PDY;
  PPV = base + L.W_PP;
  PR = base + L.W_PR;
  LDP = CC + (WIN > 1 ? WIN : 1) - 1;
}

/** Pointer to row `i` of a `[*, d]` array. */
export function rowp(p: usize, i: i32, d: i32): usize {
  return p + ((<usize> i * <usize> d) << 2);
}

/**
 * The segment's coefficients (window, gamma, g and the chain's intermediates per position), its pairs
 * `JLO..a+n-1` (features PX, PX^T, targets PY), the decays `c` (CV) and the write mask M (PM).
 */
export function loadWindowSegment(a: i32, n: i32): void {
  const dk = DK;
  const dv = DV;
  let jlo = a;
  for (let i = 0; i < n; i++) {
    const t = a + i;
    windowOf(t);
    windowCoefs(t, KH, F64S);
    const noop = ST_NOOP;
    const wn = noop ? 0 : WN;
    std(WGAM, i, ST_GAMMA);
    std(WG, i, noop ? 0 : ST_ETA / <f64> wn);
    std(WSTAT, i, ST_STAT);
    std(WLAM, i, ST_LAM);
    std(WDEN, i, ST_DEN);
    std(WETA, i, ST_ETA);
    std(WCL, i, ST_CLAMPED ? 1 : 0);
    std(WNOOP, i, noop ? 1 : 0);
    store<i32>(WLOS + (<usize> i << 2), WLO);
    store<i32>(WNS + (<usize> i << 2), wn);
    if (!noop && WLO < jlo) jlo = WLO;
  }
  JLO = jlo;
  const m = a + n - jlo;
  NP = m;
  for (let p = 0; p < m; p++) {
    const j = jlo + p;
    memory.copy(rowp(PX, p, dk), pairX(j, KH), <usize> dk << 2);
    memory.copy(rowp(PY, p, dv), pairY(j), <usize> dv << 2);
  }
  // pairs that no window of the segment holds (the prefix sentinel's) may be unset: zero them
  for (let p = 0; p < m; p++) {
    let used = false;
    for (let i = 0; i < n && !used; i++) {
      const wn = load<i32>(WNS + (<usize> i << 2));
      const lo = load<i32>(WLOS + (<usize> i << 2));
      used = wn > 0 && jlo + p >= lo && jlo + p <= a + i;
    }
    if (!used) {
      fillF(rowp(PX, p, dk), 0, dk);
      fillF(rowp(PY, p, dv), 0, dv);
    }
  }
  transpose(PXT, PX, m, dk, LDP);
  transpose(PYT, PY, m, dv, LDP);
  // c_t = gamma_t c_{t-1}; M[t, :] = gamma_t M[t-1, :] + g_t [j in I_t]
  let c: f64 = 1;
  for (let i = 0; i < n; i++) {
    const g = <f32> ldd(WGAM, i);
    c *= <f64> g;
    stf(CV, i, <f32> c);
    const r = rowp(PM, i, LDP);
    if (i == 0) fillF(r, 0, m);
    else for (let p = 0; p < m; p++) stf(r, p, g * ldf(r - (<usize> LDP << 2), p));
    const wn = load<i32>(WNS + (<usize> i << 2));
    if (wn > 0) {
      const gi = <f32> ldd(WG, i);
      const lo = load<i32>(WLOS + (<usize> i << 2)) - jlo;
      for (let p = lo; p <= a + i - jlo; p++) stf(r, p, ldf(r, p) + gi);
    }
  }
}

/** `PKQ = Q X^T` and `PMQ = PKQ ⊙ M` of the segment at `a`. */
function windowReadoutMask(a: i32, n: i32): void {
  const m = NP;
  mm(PKQ, LDP, QH + kRowOff(a), DK, 1, PXT, LDP, n, DK, m, false, FULL);
  for (let i = 0; i < n; i++) {
    const k = rowp(PKQ, i, LDP);
    const mk = rowp(PM, i, LDP);
    const o = rowp(PMQ, i, LDP);
    for (let p = 0; p < m; p++) stf(o, p, ldf(k, p) * ldf(mk, p));
  }
}

/** One segment of falcon3a forward on the state `S` (updated in place); with `readout` writes o. */
export function windowSegmentForward(a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = DV;
  loadWindowSegment(a, n);
  const m = NP;
  if (readout) {
    windowReadoutMask(a, n);
    const o = OUT_O + vOff(a);
    mm(o, LDO, QH + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
    scaleRows(o, LDO, o, LDO, CV, n, dv);
    mm(o, LDO, PMQ, LDP, 1, PY, dv, n, m, dv, true, FULL);
  }
  // S_e = c_e S_a + X^T diag(M[e, :]) Y
  scaleRows(PPV, dv, PY, dv, rowp(PM, n - 1, LDP), m, dv);
  scaleF(S, ldf(CV, n - 1), dk * dv);
  mm(S, dv, PX, 1, dk, PPV, dv, dk, m, dv, true, FULL);
}

/**
 * One segment of falcon3a backward entering with `S`: DSR holds dS_e on entry and dS_a on return;
 * writes dq of its positions to `dqh` and adds the pair gradients to `dkh` and dv, and writes
 * dbeta, dlambdabar of its positions.
 */
export function windowSegmentBackward(a: i32, n: i32, S: usize, dqh: usize, dkh: usize): void {
  const dk = DK;
  const dv = DV;
  loadWindowSegment(a, n);
  windowReadoutMask(a, n);
  const m = NP;
  const dO = DO0 + vOff(a);
  const q = QH + kRowOff(a);
  const last = rowp(PM, n - 1, LDP);
  transpose(ST, S, dk, dv, dk);
  transpose(DST, DSR, dk, dv, dk);
  // P = X dS_e: dM[e, j] = P_j . y_j, dY = Mq^T dO + diag(M[e, :]) P
  mm(PPV, dv, PX, dk, 1, DSR, dv, m, dk, dv, false, FULL);
  fillF(PDM, 0, n * LDP);
  mm(PDY, dv, PMQ, 1, LDP, dO, LDO, m, n, dv, false, FULL);
  for (let p = 0; p < m; p++) {
    const pp = rowp(PPV, p, dv);
    stf(rowp(PDM, n - 1, LDP), p, dotF(pp, rowp(PY, p, dv), dv));
    axpyF(rowp(PDY, p, dv), pp, ldf(last, p), dv);
  }
  // dMq = dO Y^T: dM += dMq ⊙ Kqx, dKqx = dMq ⊙ M (in PDQ)
  mm(PDQ, LDP, dO, LDO, 1, PYT, LDP, n, dv, m, false, FULL);
  for (let i = 0; i < n; i++) {
    const dq = rowp(PDQ, i, LDP);
    const dm = rowp(PDM, i, LDP);
    const kq = rowp(PKQ, i, LDP);
    const mk = rowp(PM, i, LDP);
    for (let p = 0; p < m; p++) {
      const d = ldf(dq, p);
      stf(dm, p, ldf(dm, p) + d * ldf(kq, p));
      stf(dq, p, d * ldf(mk, p));
    }
  }
  // T2 = dO S^T: dc_i = T2_i . q_i; dQ = diag(c) T2 + dKqx X; dX = dKqx^T Q + diag(M[e, :]) Y dS_e^T
  mm(T2, dk, dO, LDO, 1, ST, dk, n, dv, dk, false, FULL);
  for (let i = 0; i < n; i++) stf(DC, i, dotF(rowp(T2, i, dk), rowp(q, i, dk), dk));
  scaleRows(DQ, dk, T2, dk, CV, n, dk);
  mm(DQ, dk, PDQ, LDP, 1, PX, dk, n, m, dk, true, FULL);
  mm(PDX, dk, PDQ, 1, LDP, q, dk, m, n, dk, false, FULL);
  scaleRows(PPV, dv, PY, dv, last, m, dv);
  mm(PDX, dk, PPV, dv, 1, DST, dk, m, dv, dk, true, FULL);
  // dS_a = Q^T diag(c) dO + c_e dS_e; dc_e += <dS_e, S_a>
  fillF(DSIN, 0, dk * dv);
  for (let i = 0; i < n; i++) {
    const ci = ldf(CV, i);
    const oi = dO + ((<usize> i * <usize> LDO) << 2);
    const qi = rowp(q, i, dk);
    for (let r = 0; r < dk; r++) axpyF(rowp(DSIN, r, dv), oi, ci * ldf(qi, r), dv);
  }
  const ce = ldf(CV, n - 1);
  axpyF(DSIN, DSR, ce, dk * dv);
  stf(DC, n - 1, ldf(DC, n - 1) + dotF(DSR, S, dk * dv));
  // reverse recursion: R_i = dM[i, :] + gamma_{i+1} R_{i+1}, Dc_i = dc_i + gamma_{i+1} Dc_{i+1};
  // dgamma_i = R_i . M[i-1, :] + Dc_i c_{i-1}, dg_i = sum_{j in I_i} R_i[j]
  fillF(PR, 0, m);
  let dcAcc: f64 = 0;
  for (let i = n - 1; i >= 0; i--) {
    const gNext = i + 1 < n ? <f32> ldd(WGAM, i + 1) : <f32> 0;
    const dm = rowp(PDM, i, LDP);
    for (let p = 0; p < m; p++) stf(PR, p, ldf(dm, p) + gNext * ldf(PR, p));
    dcAcc = <f64> ldf(DC, i) + <f64> gNext * dcAcc;
    let dgam = dcAcc * (i > 0 ? <f64> ldf(CV, i - 1) : 1);
    if (i > 0) dgam += <f64> dotF(PR, rowp(PM, i - 1, LDP), m);
    const t = a + i;
    const wn = load<i32>(WNS + (<usize> i << 2));
    const dbeta = G_DBETA + ((<usize> t * <usize> G_BW_H) << 2);
    if (ldd(WNOOP, i) != 0) {
      store<f32>(dbeta, 0);
      store<f32>(G_DLAM + lamOff(t), 0);
      continue;
    }
    const lo = load<i32>(WLOS + (<usize> i << 2));
    let dg: f64 = 0;
    for (let j = lo; j <= t; j++) dg += <f64> ldf(PR, j - JLO);
    // the chain of fw_window.ts: g = eta / n, gamma = 1 - eta lam (unless clamped), eta = beta / den
    const eta = ldd(WETA, i);
    const lam = ldd(WLAM, i);
    const den = ldd(WDEN, i);
    let deta = dg / <f64> wn;
    let dlam: f64 = 0;
    if (ldd(WCL, i) == 0) {
      deta -= lam * dgam;
      dlam -= eta * dgam;
    }
    const dden = -deta * eta / den;
    dlam += dden;
    store<f32>(dbeta, <f32> (deta / den));
    store<f32>(G_DLAM + lamOff(t), <f32> (dlam * (COUPLING ? ldd(WSTAT, i) : 1)));
    // the statistic: d Ebar / d x_j = 2 x_j / n over the window
    const s2 = <f32> (2 * dden / <f64> wn);
    for (let j = lo; j <= t; j++) axpyF(rowp(PDX, j - JLO, dk), rowp(PX, j - JLO, dk), s2, dk);
  }
  // scatter: dq of the positions; dx, dy of the pairs (carried pairs, j < 0, have none)
  for (let i = 0; i < n; i++) memory.copy(dqh + kRowOff(a + i), rowp(DQ, i, dk), <usize> dk << 2);
  for (let p = 0; p < m; p++) {
    const j = JLO + p;
    if (j < 0) continue;
    axpyF(G_DV + vOff(j), rowp(PDY, p, dv), 1, dv);
    if (!PREFIX) axpyF(dkh + kRowOff(j), rowp(PDX, p, dk), 1, dk);
    else if (j >= 1) axpyF(dkh + kRowOff(j - 1), rowp(PDX, p, dk), 1, dk);
  }
  memory.copy(DSR, DSIN, (<usize> dk * <usize> dv) << 2);
}
