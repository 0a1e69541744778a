/**
 * Chunk-parallel form of the regression window rule falcon3: one segment forward and backward, called
 * by fw_chunk.ts. Position s writes every pair of its window `I_s` with the pseudo-value
 * `w_(s,j) = g_s (y_j - S_{s-1}^T x_j)`, `g_s = eta_s / |I_s|` (fw_window.ts: its window, its
 * eigenvalue statistic and its coefficients). SPEC section 4: a delta rule over the segment's instance
 * rows `r = (s, j)` (at most `C * B`, step by step), with `Gp[s, s'] = Gam[s-1, s']`:
 *
 *   A[r, r'] = g_s Gp[s, s'] x_j . x_j'  (s' < s; 0 within a step),
 *   W = (I + A)^-1 [diag(g) Y - diag(g cp) X S_a],
 *   O = diag(c) Q S_a + M W,  M[t, r] = Gam[t, s] q_t . x_j (s <= t),
 *   S_e = c_e S_a + X^T diag(Gam[e, s]) W.
 *
 * The solve runs step by step (the rows of one step do not see each other: one product per step);
 * Gram products run over the segment's pairs (fw_chunk_window_additive.ts's pair arrays) and are indexed per
 * instance row. The decay matrix comes from the row recursion `Gam[i, :] = gamma_i Gam[i-1, :]`. The
 * backward recomputes the segment, differentiates these formulas by hand, gets dgamma from dGam and dc
 * (decayGrads), then runs the coefficient chain of the recurrent kernel, the statistic's gradient
 * through the top eigenvector of the window's Gram matrix included. Carried pairs get no gradient.
 */

import { FULL, mm, scaleF, scaleRows, transpose } from "./chunk_mm";
import {
  CC,
  CV,
  DC,
  DGAM,
  DQ,
  DSIN,
  DSR,
  DST,
  el,
  GAM,
  GAMM,
  KH,
  kRowOff,
  LDO,
  QH,
  ST,
  T2,
} from "./fw_chunk_context";
import { decayGrads } from "./fw_chunk_additive_delta";
import {
  F64S,
  JLO,
  LDP,
  loadWindowSegment,
  NP,
  PDQ,
  PDX,
  PDY,
  PKQ,
  PPV,
  PX,
  PXT,
  PY,
  rowp,
  WCL,
  WDEN,
  WETA,
  WG,
  WGAM,
  WLAM,
  WLOS,
  WNOOP,
  WNS,
  WSTAT,
} from "./fw_chunk_window_additive";
import * as L from "./fw_chunk_layout";
import { COUPLING, DK, DO0, DV, lamOff, PREFIX, vOff, WIN } from "./fw_common";
import { G_BW_H, G_DBETA, G_DLAM, G_DV, OUT_O } from "./fw_recurrent";
import { pairX, windowCoefs, windowOf } from "./fw_window";
import { axpyF, dotF, fillF, ldd, ldf, std, stf } from "./simd";

let RS: usize = 0;
let RP: usize = 0;
let RB: usize = 0;
let RW: usize = 0;
let RWT: usize = 0;
let RR: usize = 0;
let RAM: usize = 0;
let RDA: usize = 0;
let RMQ: usize = 0;
let RDMQ: usize = 0;
let PKP: usize = 0;
let PDKP: usize = 0;
let PXS: usize = 0;
let PZ: usize = 0;
let PDRF: usize = 0;
let RDG: usize = 0;
let LDR: i32 = 1; // row stride of the [*, R] matrices
let NR: i32 = 0; // instance rows of the segment

/** Set the instance-row work pointers from the chunk work area at `base`. */
export function regSetup(base: usize): void {
  RS = base + L.W_RS;
  RP = base + L.W_RP;
  RB = base + L.W_RB;
  RW = base + L.W_RW;
  RWT = base + L.W_RWT;
  RR = base + L.W_RR;
  RAM = base + L.W_RAM;
  RDA = base + L.W_RDA;
  RMQ = base + L.W_RMQ;
  RDMQ = base + L.W_RDMQ;
  PKP = base + L.W_PKP;
  PDKP = base + L.W_PDKP;
  PXS = base + L.W_PXS;
  PZ = base + L.W_PZ;
  PDRF = base + L.W_PDRF;
  RDG = base + L.W_RDG;
  LDR = CC * (WIN > 1 ? WIN : 1);
}

/** i32 element `i` of `p`. */
function ldi(p: usize, i: i32): i32 {
  return load<i32>(p + (<usize> i << 2));
}

/** Element `(i, j)` of a `[*, R]` matrix. */
function er(p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> LDR + <usize> j) << 2);
}

/** Element `(i, j)` of a `[P, P]` matrix. */
function ep(p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> LDP + <usize> j) << 2);
}

/** `dst[j] = s * src[j]` for `j < n`. */
function scaleRow(dst: usize, src: usize, s: f32, n: i32): void {
  for (let j = 0; j < n; j++) stf(dst, j, s * ldf(src, j));
}

/**
 * The segment's coefficients and pairs (loadWindowSegment), its instance rows, the decay matrix Gam,
 * the pair Gram matrix, `X S_a`, `-A` and the pseudo-values W (solved step by step).
 */
function loadReg(a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = DV;
  loadWindowSegment(a, n);
  const m = NP;
  let r = 0;
  for (let i = 0; i < n; i++) {
    store<i32>(RB + (<usize> i << 2), r);
    const wn = ldi(WNS, i);
    if (wn > 0) {
      for (let j = ldi(WLOS, i); j <= a + i; j++) {
        store<i32>(RS + (<usize> r << 2), i);
        store<i32>(RP + (<usize> r << 2), j - JLO);
        r++;
      }
    }
  }
  store<i32>(RB + (<usize> n << 2), r);
  NR = r;
  fillF(GAMM, 0, n * CC);
  for (let i = 0; i < n; i++) {
    stf(GAM, i, <f32> ldd(WGAM, i));
    if (i > 0) scaleRow(el(GAMM, i, 0), el(GAMM, i - 1, 0), ldf(GAM, i), i);
    stf(el(GAMM, i, 0), i, 1);
  }
  if (m > 0) {
    mm(PKP, LDP, PX, dk, 1, PXT, LDP, m, dk, m, false, FULL);
    mm(PXS, dv, PX, dk, 1, S, dv, m, dk, dv, false, FULL);
  }
  // R0 = g (y - cp X S_a) into W; -A
  for (let q = 0; q < NR; q++) {
    const s = ldi(RS, q);
    const p = ldi(RP, q);
    const g = <f32> ldd(WG, s);
    const cp: f32 = s > 0 ? ldf(CV, s - 1) : 1;
    const w = rowp(RW, q, dv);
    const y = rowp(PY, p, dv);
    const xs = rowp(PXS, p, dv);
    for (let j = 0; j < dv; j++) stf(w, j, g * (ldf(y, j) - cp * ldf(xs, j)));
    const r0 = ldi(RB, s);
    for (let q2 = 0; q2 < r0; q2++) {
      const v = -g * load<f32>(el(GAMM, s - 1, ldi(RS, q2))) * load<f32>(ep(PKP, p, ldi(RP, q2)));
      store<f32>(er(RAM, q, q2), v);
    }
  }
  for (let i = 1; i < n; i++) {
    const r0 = ldi(RB, i);
    const r1 = ldi(RB, i + 1);
    if (r1 > r0 && r0 > 0) {
      mm(rowp(RW, r0, dv), dv, er(RAM, r0, 0), LDR, 1, RW, dv, r1 - r0, r0, dv, true, FULL);
    }
  }
}

/** `PKQ = Q X^T` over the pairs and the masked readout matrix `M[t, r] = Gam[t, s] Kqx[t, j]`. */
function readoutMatrix(a: i32, n: i32): void {
  const m = NP;
  if (m > 0) mm(PKQ, LDP, QH + kRowOff(a), DK, 1, PXT, LDP, n, DK, m, false, FULL);
  for (let t = 0; t < n; t++) {
    const mq = er(RMQ, t, 0);
    fillF(mq, 0, NR);
    const r1 = ldi(RB, t + 1);
    for (let q = 0; q < r1; q++) {
      stf(mq, q, load<f32>(el(GAMM, t, ldi(RS, q))) * load<f32>(ep(PKQ, t, ldi(RP, q))));
    }
  }
}

/** `PZ[j] = sum_{r = (s, j)} Gam[e, s] W_r`: the state update's pair sums. */
function pairSums(n: i32): void {
  const dv = DV;
  fillF(PZ, 0, NP * dv);
  for (let q = 0; q < NR; q++) {
    const ge = load<f32>(el(GAMM, n - 1, ldi(RS, q)));
    axpyF(rowp(PZ, ldi(RP, q), dv), rowp(RW, q, dv), ge, dv);
  }
}

/** One segment of falcon3 forward on the state `S` (updated in place); with `readout` writes o. */
export function regSegmentForward(a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = DV;
  loadReg(a, n, S);
  if (readout) {
    readoutMatrix(a, n);
    const o = OUT_O + vOff(a);
    mm(o, LDO, QH + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
    scaleRows(o, LDO, o, LDO, CV, n, dv);
    if (NR > 0) mm(o, LDO, RMQ, LDR, 1, RW, dv, n, NR, dv, true, FULL);
  }
  pairSums(n);
  scaleF(S, ldf(CV, n - 1), dk * dv);
  if (NP > 0) mm(S, dv, PX, 1, dk, PZ, dv, dk, NP, dv, true, FULL);
}

/**
 * One segment of falcon3 backward entering with `S`: DSR holds dS_e on entry and dS_a on return;
 * writes dq of its positions to `dqh`, adds the pair gradients to `dkh` and dv, and writes dbeta,
 * dlambdabar of its positions.
 */
export function regSegmentBackward(a: i32, n: i32, S: usize, dqh: usize, dkh: usize): void {
  const dk = DK;
  const dv = DV;
  loadReg(a, n, S);
  readoutMatrix(a, n);
  const m = NP;
  const R = NR;
  const dO = DO0 + vOff(a);
  const q = QH + kRowOff(a);
  transpose(ST, S, dk, dv, dk);
  transpose(DST, DSR, dk, dv, dk);
  fillF(DGAM, 0, n * CC);
  fillF(PDX, 0, m * dk);
  fillF(PDY, 0, m * dv);
  fillF(PDQ, 0, n * LDP);
  for (let i = 0; i < n; i++) std(RDG, i, 0);
  // P = X dS_e (pairs); dW = M^T dO + Gam[e, s] P_j; dGam[e, s] += P_j . W_r
  if (m > 0) mm(PPV, dv, PX, dk, 1, DSR, dv, m, dk, dv, false, FULL);
  if (R > 0) mm(RR, dv, RMQ, 1, LDR, dO, LDO, R, n, dv, false, FULL);
  for (let r = 0; r < R; r++) {
    const s = ldi(RS, r);
    const pp = rowp(PPV, ldi(RP, r), dv);
    const g = el(DGAM, n - 1, s);
    axpyF(rowp(RR, r, dv), pp, load<f32>(el(GAMM, n - 1, s)), dv);
    store<f32>(g, load<f32>(g) + dotF(pp, rowp(RW, r, dv), dv));
  }
  // dM = dO W^T: dGam[t, s] += dM Kqx[t, j], dKqx[t, j] += dM Gam[t, s]
  if (R > 0) {
    transpose(RWT, RW, R, dv, LDR);
    mm(RDMQ, LDR, dO, LDO, 1, RWT, LDR, n, dv, R, false, FULL);
  }
  for (let t = 0; t < n; t++) {
    const r1 = ldi(RB, t + 1);
    for (let r = 0; r < r1; r++) {
      const d = load<f32>(er(RDMQ, t, r));
      const s = ldi(RS, r);
      const p = ldi(RP, r);
      const g = el(DGAM, t, s);
      store<f32>(g, load<f32>(g) + d * load<f32>(ep(PKQ, t, p)));
      const k = ep(PDQ, t, p);
      store<f32>(k, load<f32>(k) + d * load<f32>(el(GAMM, t, s)));
    }
  }
  // T2 = dO S^T: dc_t = T2_t . q_t; dQ = diag(c) T2 + dKqx X; dX = dKqx^T Q + Z dS_e^T
  mm(T2, dk, dO, LDO, 1, ST, dk, n, dv, dk, false, FULL);
  for (let i = 0; i < n; i++) stf(DC, i, dotF(rowp(T2, i, dk), rowp(q, i, dk), dk));
  scaleRows(DQ, dk, T2, dk, CV, n, dk);
  if (m > 0) {
    mm(DQ, dk, PDQ, LDP, 1, PX, dk, n, m, dk, true, FULL);
    mm(PDX, dk, PDQ, 1, LDP, q, dk, m, n, dk, true, FULL);
    pairSums(n);
    mm(PDX, dk, PZ, dv, 1, DST, dk, m, dv, dk, true, FULL);
  }
  // dS_a = Q^T diag(c) dO + c_e dS_e; dc_e += <dS_e, S_a>
  fillF(DSIN, 0, dk * dv);
  scaleRows(PZ, dv, dO, LDO, CV, n, dv);
  mm(DSIN, dv, q, 1, dk, PZ, dv, dk, n, dv, true, FULL);
  axpyF(DSIN, DSR, ldf(CV, n - 1), dk * dv);
  stf(DC, n - 1, ldf(DC, n - 1) + dotF(DSR, S, dk * dv));
  // dR = (I + A)^-T dW, step by step from the last
  for (let i = n - 1; i >= 1; i--) {
    const r0 = ldi(RB, i);
    const r1 = ldi(RB, i + 1);
    if (r1 > r0 && r0 > 0) {
      mm(RR, dv, er(RAM, r0, 0), 1, LDR, rowp(RR, r0, dv), dv, r0, r1 - r0, dv, true, FULL);
    }
  }
  // through R0 = g (y - cp X S_a): dg, dy, dc (of cp), dX and dS_a (via DRF = -g cp dR)
  fillF(PDRF, 0, m * dv);
  for (let r = 0; r < R; r++) {
    const s = ldi(RS, r);
    const p = ldi(RP, r);
    const g = <f32> ldd(WG, s);
    const cp: f32 = s > 0 ? ldf(CV, s - 1) : 1;
    const dr = rowp(RR, r, dv);
    axpyF(rowp(PDY, p, dv), dr, g, dv);
    const dy = <f64> dotF(dr, rowp(PY, p, dv), dv);
    const dxs = <f64> dotF(dr, rowp(PXS, p, dv), dv);
    std(RDG, s, ldd(RDG, s) + dy - <f64> cp * dxs);
    if (s > 0) stf(DC, s - 1, <f32> (<f64> ldf(DC, s - 1) - <f64> g * dxs));
    axpyF(rowp(PDRF, p, dv), dr, -g * cp, dv);
  }
  if (m > 0) {
    mm(PDX, dk, PDRF, dv, 1, ST, dk, m, dv, dk, true, FULL);
    mm(DSIN, dv, PX, 1, dk, PDRF, dv, dk, m, dv, true, FULL);
  }
  // dA = -dR W^T (s' < s): dg, dGp -> dGam[s-1, s'], dKxx over the pairs
  fillF(PDKP, 0, m * LDP);
  if (R > 0) mm(RDA, LDR, RR, dv, 1, RWT, LDR, R, dv, R, false, FULL);
  for (let r = 0; r < R; r++) {
    const s = ldi(RS, r);
    const r0 = ldi(RB, s);
    if (r0 == 0) continue;
    const p = ldi(RP, r);
    const g = <f32> ldd(WG, s);
    let dgs: f64 = 0;
    for (let r2 = 0; r2 < r0; r2++) {
      const dA = -load<f32>(er(RDA, r, r2));
      const s2 = ldi(RS, r2);
      const p2 = ldi(RP, r2);
      const gp = load<f32>(el(GAMM, s - 1, s2));
      const kp = load<f32>(ep(PKP, p, p2));
      dgs += <f64> (dA * gp * kp);
      const dg = el(DGAM, s - 1, s2);
      store<f32>(dg, load<f32>(dg) + dA * g * kp);
      const dk2 = ep(PDKP, p, p2);
      store<f32>(dk2, load<f32>(dk2) + dA * g * gp);
    }
    std(RDG, s, ldd(RDG, s) + dgs);
  }
  if (m > 0) {
    mm(PDX, dk, PDKP, LDP, 1, PX, dk, m, m, dk, true, FULL);
    mm(PDX, dk, PDKP, 1, LDP, PX, dk, m, m, dk, true, FULL);
  }
  decayGrads(n);
  coefChain(a, n);
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

/**
 * Per position: dbeta and dlambdabar from dg (RDG) and dgamma (DC) by the chain of fw_window.ts, and
 * the statistic's gradient `d mu / d x_a = 2 u_a (X u) / n` added to the window's pair gradients.
 */
function coefChain(a: i32, n: i32): void {
  const dk = DK;
  const W = WIN;
  const uvec = F64S + ((2 * <usize> W * <usize> W) << 3);
  const Xu = F64S + ((3 * <usize> W * <usize> W + 2 * <usize> W) << 3);
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const dbeta = G_DBETA + ((<usize> t * <usize> G_BW_H) << 2);
    if (ldd(WNOOP, i) != 0) {
      store<f32>(dbeta, 0);
      store<f32>(G_DLAM + lamOff(t), 0);
      continue;
    }
    const wn = ldi(WNS, i);
    const lo = ldi(WLOS, i);
    const dgam = <f64> ldf(DC, i);
    const eta = ldd(WETA, i);
    const lam = ldd(WLAM, i);
    const den = ldd(WDEN, i);
    let deta = ldd(RDG, i) / <f64> wn;
    let dlam: f64 = 0;
    if (ldd(WCL, i) == 0) {
      deta -= lam * dgam;
      dlam -= eta * dgam;
    }
    const dden = -deta * eta / den;
    dlam += dden;
    store<f32>(dbeta, <f32> (deta / den));
    store<f32>(G_DLAM + lamOff(t), <f32> (dlam * (COUPLING ? ldd(WSTAT, i) : 1)));
    // the top eigenvector u of the window's Gram matrix, recomputed as the recurrent backward does
    windowOf(t);
    windowCoefs(t, KH, F64S);
    for (let r = 0; r < dk; r++) std(Xu, r, 0);
    for (let c = 0; c < wn; c++) {
      const xa = pairX(lo + c, KH);
      const ua = ldd(uvec, c);
      for (let r = 0; r < dk; r++) std(Xu, r, ldd(Xu, r) + ua * <f64> ldf(xa, r));
    }
    for (let c = 0; c < wn; c++) {
      const dxa = rowp(PDX, lo + c - JLO, dk);
      const c2 = 2 * dden * ldd(uvec, c) / <f64> wn;
      for (let r = 0; r < dk; r++) stf(dxa, r, ldf(dxa, r) + <f32> (c2 * ldd(Xu, r)));
    }
  }
}
