/**
 * Recurrent form of the coefficient-stream rules (falcon1, falcon2, falcon1a, falcon2a and the
 * baselines linear, retnet, mamba2, deltanet, gated_deltanet), forward and backward, one head per task:
 *
 *   p_t = S_{t-1}^T x_t,  w_t = b_t ⊙ y_t - a_t ⊙ p_t,
 *   S_t = gamma_t ⊙ S_{t-1} + x_t w_t^T   (⊙ per value column),   o_t = S_t^T phi(q_t).
 *
 * Shapes: q, k `[B, T, H, Dk]`, v, o `[B, T, H, Dv]`, state `[B, H, Dk, Dv]` (row = key index).
 * Preconditions: alignment prefix (write `(phi(k_{t-1}), v_t)`, sentinel at every start) or same-step.
 * The backward recomputes each chunk of `C` positions from a stored checkpoint (only every C-th state
 * is kept for the whole sequence) and ACCUMULATES nothing outside this head: its outputs are written.
 */

import {
  C_LASTKEY,
  C_STATE,
  CHUNK,
  coefGrads,
  coefs,
  DK,
  DO0,
  DV,
  GRAD_E,
  HAS_CARRY,
  isStart,
  K0,
  kOff,
  kRow,
  L_ACC,
  L_CKPT,
  L_COEF,
  L_DKHAT,
  L_DQHAT,
  L_DS,
  L_KHAT,
  L_QHAT,
  L_ROWS,
  L_ST,
  L_VEC,
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
  S0,
  sqnorm,
  T,
  V0,
  vOff,
  WIN,
} from "./fw_common";
import { isRegression } from "./fw_rules";
import {
  backASplat,
  backBSplat,
  predict,
  reduceRows,
  splatRows,
  stepFused,
  stepSplat1,
  stepSplat2,
} from "./fw_step";
import { axpyF, dotF, fillF, ldf, mulSubF, stf } from "./simd";

/** Pointers of the per-head outputs, set by the entry points (fast_weight.ts). */
export let OUT_O: usize = 0;
export let OUT_STATE: usize = 0;
export let OUT_LASTKEY: usize = 0;
export let G_DQ: usize = 0;
export let G_DK: usize = 0;
export let G_DV: usize = 0;
export let G_DBETA: usize = 0;
export let G_DLAM: usize = 0;
export let G_DS0: usize = 0;
export let G_DCARRY: usize = 0;

/** Set the output pointers of this head (already offset to it). */
export function setOutputs(o: usize, state: usize, lastKey: usize): void {
  OUT_O = o;
  OUT_STATE = state;
  OUT_LASTKEY = lastKey;
}

/** Set the gradient pointers of this head (already offset to it). */
export function setGrads(
  dq: usize,
  dk: usize,
  dv: usize,
  dbeta: usize,
  dlam: usize,
  ds0: usize,
  dcarry: usize,
): void {
  G_DQ = dq;
  G_DK = dk;
  G_DV = dv;
  G_DBETA = dbeta;
  G_DLAM = dlam;
  G_DS0 = ds0;
  G_DCARRY = dcarry;
}

/** Pointer to the reset state (S0, or the zero state in scratch). */

export function s0Ptr(scratch: usize): usize {
  return S0 != 0 ? S0 : scratch + L_ZS;
}

/** Write feature x_t of a coefficient rule; `kh` holds phi(k) `[T, Dk]`; `zero` is the sentinel row. */

export function xPtr(t: i32, start: bool, kh: usize, zero: usize): usize {
  if (!PREFIX) return kh + (<usize> t * <usize> DK << 2);
  if (start) return zero;
  if (t == 0) return C_LASTKEY;
  return kh + (<usize> (t - 1) * <usize> DK << 2);
}

// work vectors of runSteps (set by setupVectors)
let V_GAM: usize = 0;
let V_CA: usize = 0;
let V_CB: usize = 0;
let V_W: usize = 0;
let V_P: usize = 0;
let V_PN: usize = 0;
let V_ODUMMY: usize = 0;

function setupVectors(scratch: usize): void {
  const md = <usize> (DK > DV ? DK : DV) << 2;
  V_GAM = scratch + L_VEC;
  V_CA = V_GAM + md;
  V_CB = V_CA + md;
  V_W = V_CB + md;
  V_P = V_W + md;
  V_PN = V_P + md;
  V_ODUMMY = V_PN + md;
}

/**
 * Steps t0..t1-1 on the running state. In place (`states == 0`): `S` is updated (the state entering t0
 * is read from `init` when that is not 0, so a carried state need not be copied first), and with
 * `readout` the readout is written to the output o (otherwise to a scratch vector). Recording
 * (`states != 0`): `states[0]` holds the state entering t0 and
 * `states[i + 1]` receives the state after step t0 + i; the step's gam, a, b, w, p go to slot i of
 * `coef` (five arrays of C x Dv floats, `cstride` bytes apart); no readout.
 */
function runSteps(
  t0: i32,
  t1: i32,
  S: usize,
  states: usize,
  coef: usize,
  cstride: usize,
  scratch: usize,
  kh: usize,
  qh: usize,
  zero: usize,
  readout: bool,
  init: usize,
): void {
  const dk = DK;
  const dv = DV;
  const sdb = (<usize> dk * <usize> dv) << 2;
  const s0 = s0Ptr(scratch);
  const regRule = isRegression(RULE);
  let pValid = false;
  for (let t = t0; t < t1; t++) {
    const i = t - t0;
    const start = isStart(t);
    let cur = S;
    let src = t == t0 && init != 0 ? init : S;
    if (states != 0) {
      cur = states + <usize> (i + 1) * sdb;
      src = start ? s0 : states + <usize> i * sdb;
    } else if (start) {
      src = s0;
    }
    if (start) pValid = false;
    const x = xPtr(t, start, kh, zero);
    const noop = PREFIX && start;
    let gam = V_GAM;
    let ca = V_CA;
    let cb = V_CB;
    let w = V_W;
    if (states != 0) {
      const ci = coef + ((<usize> i * <usize> dv) << 2);
      gam = ci;
      ca = ci + cstride;
      cb = ci + 2 * cstride;
      w = ci + 3 * cstride;
    }
    coefs(t, noop, sqnorm(x, dk), gam, ca, cb);
    const reg = regRule && !noop;
    if (reg && !pValid) predict(src, x, V_P, dk, dv);
    const y = V0 + vOff(t);
    if (reg) {
      mulSubF(w, cb, y, ca, V_P, dv);
    } else {
      mulSubF(w, cb, y, 0, 0, dv);
      fillF(V_P, 0, dv);
    }
    if (states != 0) memory.copy(coef + 4 * cstride + ((<usize> i * <usize> dv) << 2), V_P, <usize> dv << 2);
    let xn = zero;
    const nextValid = regRule && t + 1 < t1 && !isStart(t + 1);
    if (nextValid) xn = xPtr(t + 1, false, kh, zero);
    const R = scratch + L_ROWS;
    if (!readout) {
      // recording / checkpoint pass: only the next prediction (zero when none is needed)
      splatRows(R, x, xn, xn, dk);
      stepSplat1(cur, src, R, x, xn, gam, w, V_PN, V_ODUMMY, dk, dv);
    } else {
      const q = qh + (<usize> t * <usize> dk << 2);
      const o = OUT_O + vOff(t);
      if (!nextValid) {
        splatRows(R, x, q, q, dk);
        stepSplat1(cur, src, R, x, q, gam, w, o, V_PN, dk, dv); // V_PN is not valid afterwards
      } else if (cur == src) {
        splatRows(R, x, q, xn, dk);
        stepSplat2(cur, R, x, q, xn, gam, w, o, V_PN, dk, dv);
      } else {
        stepFused(cur, src, x, q, xn, gam, w, o, V_PN, dk, dv);
      }
    }
    const tmp = V_P;
    V_P = V_PN;
    V_PN = tmp;
    pValid = nextValid;
  }
}

/** Whether any position of this head's row starts a sequence (then the reset state is read). */
function anyStart(): bool {
  for (let t = 0; t < T; t++) if (isStart(t)) return true;
  return false;
}

/** Forward of one head of a coefficient-stream rule. */
export function coefForward(scratch: usize): void {
  layout(T, DK, DV, WIN, CHUNK, false, false);
  const dk = DK;
  const sd = <i32> (dk * DV);
  const qh = scratch + L_QHAT;
  const kh = scratch + L_KHAT;
  const zero = scratch + L_ZERO;
  fillF(zero, 0, dk);
  if (S0 == 0 && anyStart()) fillF(scratch + L_ZS, 0, sd); // the zero reset state, only when used
  setupVectors(scratch);
  for (let t = 0; t < T; t++) {
    normalize(qh + (<usize> t * <usize> dk << 2), qRow(t), dk);
    normalize(kh + (<usize> t * <usize> dk << 2), kRow(t), dk);
  }
  if (HAS_CARRY && T == 0) memory.copy(OUT_STATE, C_STATE, <usize> sd << 2);
  runSteps(0, T, OUT_STATE, 0, 0, 0, scratch, kh, qh, zero, true, HAS_CARRY ? C_STATE : 0);
  if (T > 0) memory.copy(OUT_LASTKEY, kh + (<usize> (T - 1) * <usize> dk << 2), <usize> dk << 2);
  else if (HAS_CARRY) memory.copy(OUT_LASTKEY, C_LASTKEY, <usize> dk << 2);
  else fillF(OUT_LASTKEY, 0, dk);
}

/**
 * Per-column gradients of one step from `g = dS^T x`: `ag = a ⊙ g`, `da = -g ⊙ p`, `db = g ⊙ y` and
 * `dv = b ⊙ g` (Dv floats each).
 */
function coefStreamGrads(
  g: usize,
  ca: usize,
  cb: usize,
  p: usize,
  y: usize,
  ag: usize,
  da: usize,
  db: usize,
  dvt: usize,
  n: i32,
): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> j << 2;
    const gj = v128.load(g + o);
    v128.store(ag + o, f32x4.mul(v128.load(ca + o), gj));
    v128.store(da + o, f32x4.mul(f32x4.neg(gj), v128.load(p + o)));
    v128.store(db + o, f32x4.mul(gj, v128.load(y + o)));
    v128.store(dvt + o, f32x4.mul(v128.load(cb + o), gj));
  }
  for (; j < n; j++) {
    const gj = ldf(g, j);
    stf(ag, j, ldf(ca, j) * gj);
    stf(da, j, -gj * ldf(p, j));
    stf(db, j, gj * ldf(y, j));
    stf(dvt, j, ldf(cb, j) * gj);
  }
}

/** Backward of one head of a coefficient-stream rule (gradients of `sum(o * dO)`). */
export function coefBackward(scratch: usize): void {
  const C = CHUNK;
  layout(T, DK, DV, WIN, C, true, false);
  const dk = DK;
  const dv = DV;
  const sd = <i32> (dk * dv);
  const sdb = <usize> sd << 2;
  const qh = scratch + L_QHAT;
  const kh = scratch + L_KHAT;
  const dqh = scratch + L_DQHAT;
  const dkh = scratch + L_DKHAT;
  const zero = scratch + L_ZERO;
  fillF(zero, 0, dk);
  fillF(scratch + L_ZS, 0, sd);
  setupVectors(scratch);
  const s0 = s0Ptr(scratch);
  const md = <usize> (dk > dv ? dk : dv) << 2;
  const g = scratch + L_VEC + 7 * md;
  const dgam = g + md;
  const ag = dgam + md;
  const da = ag + md;
  const db = da + md;
  const gd = db + md;
  const accQ = scratch + L_ACC;
  const accP = accQ + ((<usize> dk * 5) << 2);
  const dx = accP + ((<usize> dk * 5) << 2);
  const ckpt = scratch + L_CKPT;
  const st = scratch + L_ST;
  const coef = scratch + L_COEF;
  const cstride = (<usize> C * <usize> dv) << 2; // one coefficient array of the chunk
  const dS = scratch + L_DS;
  for (let t = 0; t < T; t++) {
    normalize(qh + (<usize> t * <usize> dk << 2), qRow(t), dk);
    normalize(kh + (<usize> t * <usize> dk << 2), kRow(t), dk);
  }
  fillF(dqh, 0, T * dk);
  fillF(dkh, 0, T * dk);
  fillF(G_DS0, 0, sd);
  // checkpoints: state entering each chunk (before a possible reset at its first position)
  const run = st;
  if (HAS_CARRY) memory.copy(run, C_STATE, sdb);
  else fillF(run, 0, sd);
  const nc = (T + C - 1) / C;
  for (let c = 0; c < nc; c++) {
    memory.copy(ckpt + <usize> c * sdb, run, sdb);
    if (c < nc - 1) runSteps(c * C, min(T, c * C + C), run, 0, 0, 0, scratch, kh, 0, zero, false, 0);
  }
  fillF(dS, 0, sd);
  for (let c = nc - 1; c >= 0; c--) {
    const a = c * C;
    const n = min(T - a, C);
    memory.copy(st, ckpt + <usize> c * sdb, sdb);
    runSteps(a, a + n, 0, st, coef, cstride, scratch, kh, 0, zero, false, 0);
    for (let i = n - 1; i >= 0; i--) {
      const t = a + i;
      const start = isStart(t);
      const noop = PREFIX && start;
      const prev = start ? s0 : st + <usize> i * sdb;
      const ci = coef + ((<usize> i * <usize> dv) << 2);
      const cg = ci;
      const cA = ci + cstride;
      const cB = ci + 2 * cstride;
      const cw = ci + 3 * cstride;
      const cp = ci + 4 * cstride;
      const x = xPtr(t, start, kh, zero);
      const dO = DO0 + vOff(t);
      const qt = qh + (<usize> t * <usize> dk << 2);
      const dqt = dqh + (<usize> t * <usize> dk << 2);
      const y = V0 + vOff(t);
      // pass A: readout gradient, g = dS^T x, dgam = colsum(dS ⊙ prev), dx = dS w
      const R = scratch + L_ROWS;
      splatRows(R, x, qt, x, dk);
      mulSubF(gd, cg, dO, 0, 0, dv); // gd = gam ⊙ dO
      backASplat(dS, prev, R, x, qt, dO, gd, g, dgam, accQ, dk, dv);
      reduceRows(dqt, accQ, dk, 1, true);
      axpyF(dqt, x, dotF(cw, dO, dv), dk); // dq = Snew dO = prev gd + x (w . dO)
      const dvt = G_DV + vOff(t);
      coefStreamGrads(g, cA, cB, cp, y, ag, da, db, dvt, dv); // y_t = v_t is used by this step only
      // pass B: dx -= prev (a ⊙ g); dS <- gamma ⊙ dS - x (a ⊙ g)^T
      backBSplat(dS, prev, R, x, cg, ag, cw, accP, dk, dv);
      reduceRows(dx, accP, dk, 1, false);
      const E = sqnorm(x, dk);
      coefGrads(t, noop, E, dgam, da, db, G_DBETA + ((<usize> t * <usize> G_BW_H) << 2), G_DLAM + lamOff(t));
      const ge = <f32> (2 * GRAD_E);
      if (ge != 0) axpyF(dx, x, ge, dk);
      if (!PREFIX) axpyF(dkh + (<usize> t * <usize> dk << 2), dx, 1, dk);
      else if (!start && t > 0) axpyF(dkh + (<usize> (t - 1) * <usize> dk << 2), dx, 1, dk);
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

/** Stride in floats between positions of the dbeta tensor (H * BW), set by the entry point. */
export let G_BW_H: i32 = 1;

/** Set {@link G_BW_H}. */
export function setBetaStride(s: i32): void {
  G_BW_H = s;
}
