/**
 * Recurrent form of the window rules Falcon-3 (regression) and Falcon-3A (additive), forward and
 * backward, one head per task. With the window `I_t = {lo..t}` of `n = B_t` pairs `(x_j, y_j)`:
 *
 *   Falcon-3:  mu_t = lambda_max(X^T X) / n,  w_j = (eta_t / n) (y_j - S_{t-1}^T x_j)
 *   Falcon-3A: Ebar_t = sum_j ||x_j||^2 / n,  w_j = (eta_t / n) y_j
 *   S_t = gamma_t S_{t-1} + sum_j x_j w_j^T,  o_t = S_t^T phi(q_t).
 *
 * Shapes as in fw_recurrent.ts; carried pairs (before position 0) are indexed -count..-1 and have no
 * gradient. The backward recomputes each chunk of C positions from a stored checkpoint.
 */

import {
  BETA0,
  betaOff,
  C_COUNT,
  C_LASTKEY,
  C_STATE,
  C_WX,
  C_WY,
  CHUNK,
  COUPLING,
  DK,
  DO0,
  DV,
  EPS,
  EPS_GAMMA,
  HAS_CARRY,
  isStart,
  K0,
  kOff,
  kRow,
  L_ACC,
  L_CKPT,
  L_DKHAT,
  L_DQHAT,
  L_DS,
  L_F64,
  L_KHAT,
  L_QHAT,
  L_ST,
  L_VEC,
  L_WIN,
  L_ZS,
  LAM0,
  lamOff,
  layout,
  normalize,
  normalizeBackward,
  PREFIX,
  Q0,
  qRow,
  RULE,
  T,
  topEigen,
  V0,
  vOff,
  WIN,
} from "./fw_common";
import { isRegression, usesTopEigen } from "./fw_rules";
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
} from "./fw_recurrent";
import {
  predictPairs,
  reduceRows,
  reduceWindowRows,
  updateWindow,
  WB_DGAM,
  windowBackA,
  windowBackB,
} from "./fw_step";
import { axpyF, dotF64, fillF, ldd, ldf, std, stf, sumSquaresF64 } from "./simd";

/**
 * Window of position t: sets WLO and WN (0 at the prefix sentinel). Uses j0 = first real pair. The
 * window and coefficient helpers are shared with the chunk-parallel form (fw_chunk_window_additive.ts,
 * fw_chunk_window_delta.ts).
 */
export let WLO: i32 = 0;
export let WN: i32 = 0;

/** Set {@link WLO}, {@link WN}: the window of position t. */
export function windowOf(t: i32): void {
  const lo0 = t - WIN + 1;
  let j0: i32 = i32.MIN_VALUE;
  let s = t;
  const stop = lo0 > 0 ? lo0 : 0;
  for (; s >= stop; s--) {
    if (isStart(s)) {
      j0 = PREFIX ? s + 1 : s;
      break;
    }
  }
  if (s < stop && lo0 <= 0) j0 = HAS_CARRY && !isStart(0) ? -C_COUNT : 0;
  const lo = j0 > lo0 ? j0 : lo0;
  WLO = lo;
  WN = t >= lo ? t - lo + 1 : 0;
}

/** Feature of pair j. */
export function pairX(j: i32, kh: usize): usize {
  if (j < 0) return C_WX + ((<usize> (WIN - 1 + j) * <usize> DK) << 2);
  if (!PREFIX) return kh + ((<usize> j * <usize> DK) << 2);
  if (j == 0) return C_LASTKEY;
  return kh + ((<usize> (j - 1) * <usize> DK) << 2);
}

/** Target of pair j. */
export function pairY(j: i32): usize {
  if (j < 0) return C_WY + ((<usize> (WIN - 1 + j) * <usize> DV) << 2);
  return V0 + vOff(j);
}

// coefficients of the current step (set by windowCoefs)
export let ST_STAT: f64 = 0;
export let ST_LAM: f64 = 0;
export let ST_DEN: f64 = 0;
export let ST_ETA: f64 = 0;
export let ST_GAMMA: f64 = 1;
export let ST_CLAMPED: bool = false;
export let ST_NOOP: bool = true;

/** Statistic and coefficients of position t over the window set by windowOf (u: top eigenvector). */
export function windowCoefs(t: i32, kh: usize, f64s: usize): void {
  const n = WN;
  const dk = DK;
  ST_NOOP = true;
  ST_GAMMA = 1;
  ST_ETA = 0;
  if (n == 0) return;
  let stat: f64 = 0;
  if (usesTopEigen(RULE)) {
    const G = f64s;
    const V = G + ((<usize> WIN * <usize> WIN) << 3);
    const u = V + ((<usize> WIN * <usize> WIN) << 3);
    for (let a = 0; a < n; a++) {
      const xa = pairX(WLO + a, kh);
      for (let b = a; b < n; b++) {
        const s = dotF64(xa, pairX(WLO + b, kh), dk);
        std(G, a * n + b, s);
        std(G, b * n + a, s);
      }
    }
    stat = topEigen(G, V, u, n) / <f64> n;
  } else {
    for (let a = 0; a < n; a++) stat += sumSquaresF64(pairX(WLO + a, kh), dk);
    stat /= <f64> n;
  }
  ST_STAT = stat;
  if (stat == 0) return;
  ST_NOOP = false;
  const lb = <f64> load<f32>(LAM0 + lamOff(t));
  const beta = <f64> load<f32>(BETA0 + betaOff(t));
  ST_LAM = COUPLING ? lb * stat : lb;
  ST_DEN = stat + ST_LAM + EPS;
  ST_ETA = beta / ST_DEN;
  const alpha = ST_ETA * ST_LAM;
  ST_CLAMPED = alpha >= 1 - EPS_GAMMA;
  ST_GAMMA = ST_CLAMPED ? EPS_GAMMA : 1 - alpha;
}

/**
 * Update S for position t (window and coefficients already set): p_j into `pw`, w_j into `ww`
 * (W rows of Dv floats each); readout into o when o != 0.
 */
function windowUpdate(S: usize, kh: usize, ww: usize, pw: usize, qh: usize, o: usize): void {
  const n = WN;
  const dk = DK;
  const dv = DV;
  const rs = <usize> dv << 2;
  const gain = <f32> (ST_ETA / <f64> n);
  // contiguous copy of the window's features, after ww and pw in the window work area
  const xs = pw + ((<usize> WIN * <usize> (dk > dv ? dk : dv)) << 2);
  let m = 0;
  if (!ST_NOOP) {
    m = n;
    const reg = isRegression(RULE);
    for (let a = 0; a < n; a++) {
      memory.copy(xs + ((<usize> a * <usize> dk) << 2), pairX(WLO + a, kh), <usize> dk << 2);
    }
    if (reg) predictPairs(S, xs, n, pw, dk, dv); // p_a = S^T x_a, all pairs in one sweep
    else fillF(pw, 0, n * dv);
    for (let a = 0; a < n; a++) {
      const pa = pw + <usize> a * rs;
      const ya = pairY(WLO + a);
      const wa = ww + <usize> a * rs;
      for (let j = 0; j < dv; j++) stf(wa, j, gain * (ldf(ya, j) - ldf(pa, j)));
    }
  }
  updateWindow(S, <f32> ST_GAMMA, xs, ww, m, qh, o, dk, dv);
}

/** Forward of one head of falcon3 / falcon3a. */
export function windowForward(scratch: usize): void {
  layout(T, DK, DV, WIN, CHUNK, false, false);
  const dk = DK;
  const dv = DV;
  const sd = dk * dv;
  const qh = scratch + L_QHAT;
  const kh = scratch + L_KHAT;
  fillF(scratch + L_ZS, 0, sd);
  const md = <usize> (dk > dv ? dk : dv);
  const ww = scratch + L_WIN;
  const pw = ww + ((<usize> WIN * md) << 2);
  const f64s = scratch + L_F64;
  const S = OUT_STATE;
  if (HAS_CARRY) memory.copy(S, C_STATE, <usize> sd << 2);
  for (let t = 0; t < T; t++) {
    if (isStart(t)) memory.copy(S, s0Ptr(scratch), <usize> sd << 2);
    normalize(qh, qRow(t), dk);
    normalize(kh + ((<usize> t * <usize> dk) << 2), kRow(t), dk);
    windowOf(t);
    windowCoefs(t, kh, f64s);
    windowUpdate(S, kh, ww, pw, qh, OUT_O + vOff(t));
  }
  if (T > 0) memory.copy(OUT_LASTKEY, kh + (<usize> (T - 1) * <usize> dk << 2), <usize> dk << 2);
  else if (HAS_CARRY) memory.copy(OUT_LASTKEY, C_LASTKEY, <usize> dk << 2);
  else fillF(OUT_LASTKEY, 0, dk);
}

/**
 * Carry out of the window rules: the last up to W-1 pairs, newest last, into outWX `[W-1, Dk]` and
 * outWY `[W-1, Dv]` (unused slots zeroed); returns how many. `kh` holds phi(k) of every position.
 */
export function windowCarryOut(kh: usize, outWX: usize, outWY: usize): i32 {
  const slots = WIN - 1;
  if (slots <= 0) return 0;
  fillF(outWX, 0, slots * DK);
  fillF(outWY, 0, slots * DV);
  // the window of a (non-start) position T, without its own pair
  let lo: i32;
  let count: i32;
  if (T == 0) {
    lo = -C_COUNT;
    count = C_COUNT;
  } else {
    windowOf(T - 1);
    const lo0 = T - WIN + 1;
    // pairs of the window at T-1 that remain in the window at T
    lo = WN == 0 ? T : (WLO > lo0 ? WLO : lo0);
    count = T - lo;
    if (count < 0) count = 0;
  }
  for (let c = 0; c < count; c++) {
    const j = lo + c;
    const slot = slots - count + c;
    memory.copy(outWX + ((<usize> slot * <usize> DK) << 2), pairX(j, kh), <usize> DK << 2);
    memory.copy(outWY + ((<usize> slot * <usize> DV) << 2), pairY(j), <usize> DV << 2);
  }
  return count;
}

/** Backward of one head of falcon3 / falcon3a (gradients of `sum(o * dO)`). */
export function windowBackward(scratch: usize): void {
  const C = CHUNK;
  layout(T, DK, DV, WIN, C, true, false);
  const dk = DK;
  const dv = DV;
  const sd = dk * dv;
  const sdb = <usize> sd << 2;
  const rs = <usize> dv << 2;
  const qh = scratch + L_QHAT;
  const kh = scratch + L_KHAT;
  const dqh = scratch + L_DQHAT;
  const dkh = scratch + L_DKHAT;
  fillF(scratch + L_ZS, 0, sd);
  const s0 = s0Ptr(scratch);
  const md = <usize> (dk > dv ? dk : dv);
  const wb = <usize> WIN * md << 2;
  const ww = scratch + L_WIN;
  const pw = ww + wb;
  const Gw = pw + wb;
  const dxw = Gw + wb;
  const xsb = dxw + wb; // the window's features, contiguous [n, Dk]
  const accQ = scratch + L_ACC; // 5 Dk floats
  const accX = accQ + ((<usize> dk * 5) << 2); // 5 W Dk floats
  const f64s = scratch + L_F64;
  const W = WIN;
  const uvec = f64s + ((2 * <usize> W * <usize> W) << 3);
  const Xu = f64s + ((3 * <usize> W * <usize> W + 2 * <usize> W) << 3);
  const ckpt = scratch + L_CKPT;
  const st = scratch + L_ST;
  const dS = scratch + L_DS;
  const reg = isRegression(RULE);
  // readout of the recomputing passes goes nowhere: a zero query and a throwaway output
  const zq = scratch + L_VEC;
  const od = zq + (md << 2);
  fillF(zq, 0, dk);
  for (let t = 0; t < T; t++) {
    normalize(qh + (<usize> t * <usize> dk << 2), qRow(t), dk);
    normalize(kh + (<usize> t * <usize> dk << 2), kRow(t), dk);
    fillF(G_DV + vOff(t), 0, dv);
  }
  fillF(dqh, 0, T * dk);
  fillF(dkh, 0, T * dk);
  fillF(G_DS0, 0, sd);
  const run = st;
  if (HAS_CARRY) memory.copy(run, C_STATE, sdb);
  else fillF(run, 0, sd);
  for (let t = 0; t < T; t++) {
    if (t % C == 0) memory.copy(ckpt + <usize> (t / C) * sdb, run, sdb);
    if (isStart(t)) memory.copy(run, s0, sdb);
    windowOf(t);
    windowCoefs(t, kh, f64s);
    windowUpdate(run, kh, ww, pw, zq, od);
  }
  fillF(dS, 0, sd);
  const nc = (T + C - 1) / C;
  for (let c = nc - 1; c >= 0; c--) {
    const a0 = c * C;
    const nn = min(T - a0, C);
    memory.copy(st, ckpt + <usize> c * sdb, sdb);
    for (let i = 0; i < nn; i++) {
      const t = a0 + i;
      const cur = st + <usize> (i + 1) * sdb;
      memory.copy(cur, isStart(t) ? s0 : st + <usize> i * sdb, sdb);
      windowOf(t);
      windowCoefs(t, kh, f64s);
      windowUpdate(cur, kh, ww, pw, zq, od);
    }
    for (let i = nn - 1; i >= 0; i--) {
      const t = a0 + i;
      const start = isStart(t);
      const prev = start ? s0 : st + <usize> i * sdb;
      const Snew = st + <usize> (i + 1) * sdb;
      const dO = DO0 + vOff(t);
      const qt = qh + (<usize> t * <usize> dk << 2);
      const dqt = dqh + (<usize> t * <usize> dk << 2);
      windowOf(t);
      windowCoefs(t, kh, f64s);
      const n = ST_NOOP ? 0 : WN;
      // gather the window's features [n, Dk]
      for (let a = 0; a < n; a++) {
        memory.copy(xsb + ((<usize> a * <usize> dk) << 2), pairX(WLO + a, kh), <usize> dk << 2);
      }
      // sweep A: readout gradient, p_a = prev^T x_a, G_a = dS^T x_a, dgamma = <dS, prev>
      windowBackA(dS, prev, Snew, qt, dO, xsb, n, pw, Gw, accQ, dk, dv);
      reduceRows(dqt, accQ, dk, 1, true);
      if (!ST_NOOP) {
        const gain = ST_ETA / <f64> n;
        const dgam = WB_DGAM;
        // w_a = g (y_a - p_a); dg = sum_a G_a . (y_a - p_a); dy_a = g G_a; dp_a = -g G_a (over p_a)
        let dg: f64 = 0;
        for (let a = 0; a < n; a++) {
          const Ga = Gw + <usize> a * rs;
          const pa = pw + <usize> a * rs;
          const wa = ww + <usize> a * rs;
          const ya = pairY(WLO + a);
          for (let j = 0; j < dv; j++) {
            const r = <f64> ldf(ya, j) - (reg ? <f64> ldf(pa, j) : 0);
            stf(wa, j, <f32> (gain * r));
            dg += <f64> ldf(Ga, j) * r;
            stf(pa, j, reg ? <f32> (-gain) * ldf(Ga, j) : 0);
          }
          const j = WLO + a;
          if (j >= 0) axpyF(G_DV + vOff(j), Ga, <f32> gain, dv);
        }
        // sweep B: dx_a = dS w_a + prev dp_a; dS <- gamma dS + sum_a x_a dp_a^T
        windowBackB(dS, prev, xsb, n, ww, pw, <f32> ST_GAMMA, accX, dk, dv);
        reduceWindowRows(dxw, <i32> md, accX, n, dk);
        // coefficient gradients
        let deta = dg / <f64> n;
        let dlam: f64 = 0;
        if (!ST_CLAMPED) {
          deta -= ST_LAM * dgam;
          dlam -= ST_ETA * dgam;
        }
        const dden = -deta * ST_ETA / ST_DEN;
        dlam += dden;
        store<f32>(G_DBETA + ((<usize> t * <usize> G_BW_H) << 2), <f32> (deta / ST_DEN));
        store<f32>(G_DLAM + lamOff(t), <f32> (dlam * (COUPLING ? ST_STAT : 1)));
        const dstat = dden;
        if (reg) {
          // d mu / d x_a = 2 u_a (X u) / n
          for (let r = 0; r < dk; r++) std(Xu, r, 0);
          for (let a = 0; a < n; a++) {
            const xa = pairX(WLO + a, kh);
            const ua = ldd(uvec, a);
            for (let r = 0; r < dk; r++) std(Xu, r, ldd(Xu, r) + ua * <f64> ldf(xa, r));
          }
          for (let a = 0; a < n; a++) {
            const dxa = dxw + ((<usize> a * md) << 2);
            const c2 = 2 * dstat * ldd(uvec, a) / <f64> n;
            for (let r = 0; r < dk; r++) stf(dxa, r, ldf(dxa, r) + <f32> (c2 * ldd(Xu, r)));
          }
        } else {
          for (let a = 0; a < n; a++) {
            const dxa = dxw + ((<usize> a * md) << 2);
            axpyF(dxa, pairX(WLO + a, kh), <f32> (2 * dstat / <f64> n), dk);
          }
        }
        // route dx_a to phi(k)
        for (let a = 0; a < n; a++) {
          const j = WLO + a;
          const dxa = dxw + ((<usize> a * md) << 2);
          if (!PREFIX) {
            if (j >= 0) axpyF(dkh + (<usize> j * <usize> dk << 2), dxa, 1, dk);
          } else if (j >= 1) {
            axpyF(dkh + (<usize> (j - 1) * <usize> dk << 2), dxa, 1, dk);
          }
        }
      } else {
        store<f32>(G_DBETA + ((<usize> t * <usize> G_BW_H) << 2), 0);
        store<f32>(G_DLAM + lamOff(t), 0);
      }
      if (start) {
        axpyF(G_DS0, dS, 1, sd);
        fillF(dS, 0, sd);
      }
    }
  }
  memory.copy(G_DCARRY, dS, sdb);
  for (let t = 0; t < T; t++) {
    normalizeBackward(G_DQ + kOff(t), Q0 + kOff(t), dqh + (<usize> t * <usize> dk << 2), dk);
    normalizeBackward(G_DK + kOff(t), K0 + kOff(t), dkh + (<usize> t * <usize> dk << 2), dk);
  }
}
