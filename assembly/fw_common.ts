/**
 * Shared pieces of the fast-weight kernels: the per-head context read from the parameter block, q/k
 * normalisation (forward and backward), the per-step coefficients of the coefficient-stream rules
 * (SPEC section 6 note: `S_t = gamma ⊙ S_{t-1} - x (a ⊙ (S_{t-1}^T x))^T + x (b ⊙ y)^T`, per value
 * column) with their gradients, the Gram-matrix eigen solver of Falcon-3, and the scratch layout.
 *
 * Shapes: `B, T, H, Dk, Dv`; q, k `[B, T, H, Dk]`, v `[B, T, H, Dv]`, beta `[B, T, H]` or `[B, T, H, Dv]`,
 * lambdabar `[B, T, H]`, states `[B, H, Dk, Dv]`. All float32, row-major. Module globals hold the context
 * of the head being computed: every thread has its own instance, hence its own globals.
 */

import * as P from "./fw_params";
import { chunkLayout } from "./fw_chunk_layout";
import {
  DELTANET,
  GATED_DELTANET,
  isFalcon,
  isPerColumn,
  isRegression,
  LINEAR,
  MAMBA2,
  RETNET,
} from "./fw_rules";
import { combineF64, dotF64, fillF, ldd, ldf, scaleF64, std, stf, sumF64, sumSquaresF64 } from "./simd";

// ---- context of the current head ----
export let RULE: i32 = 0;
export let PREFIX: bool = true;
export let QKN: i32 = 0;
export let COUPLING: bool = true;
export let WIN: i32 = 1;
export let EPS: f64 = 1e-6;
export let EPS_GAMMA: f64 = 1e-3;
export let EPS_RMS: f64 = 1e-6;
export let T: i32 = 0;
export let H: i32 = 0;
export let DK: i32 = 0;
export let DV: i32 = 0;
export let BW: i32 = 1;
export let HB: i32 = 0; // batch row b
export let HH: i32 = 0; // head h
export let Q0: usize = 0;
export let K0: usize = 0;
export let V0: usize = 0;
export let BETA0: usize = 0;
export let LAM0: usize = 0;
export let DO0: usize = 0;
export let STARTS: usize = 0;
export let S0: usize = 0;
export let HAS_CARRY: bool = false;
export let C_STATE: usize = 0;
export let C_LASTKEY: usize = 0;
export let C_WX: usize = 0;
export let C_WY: usize = 0;
export let C_COUNT: i32 = 0;
export let MAMBA_A: f64 = 1;
export let RETNET_G: f64 = 1;
export let CHUNK: i32 = 64;
/** Whether the chunk-parallel kernel (fw_chunk.ts) was asked for (form "chunk" or "parallel"). */
export let CHUNKED: bool = false;

/** Read slot `i` of the parameter block as an integer. */

export function pi(params: usize, i: i32): i32 {
  return <i32> ldd(params, i);
}

/** Read slot `i` of the parameter block as a pointer. */

export function pp(params: usize, i: i32): usize {
  return <usize> ldd(params, i);
}

/** Load the context of task `task` (= b * H + h) from the parameter block. */
export function loadContext(params: usize, task: i32): void {
  RULE = pi(params, P.P_RULE);
  PREFIX = pi(params, P.P_ALIGN) == 0;
  QKN = pi(params, P.P_QKNORM);
  COUPLING = pi(params, P.P_COUPLING) != 0;
  WIN = pi(params, P.P_WINDOW);
  EPS = ldd(params, P.P_EPS);
  EPS_GAMMA = ldd(params, P.P_EPS_GAMMA);
  EPS_RMS = ldd(params, P.P_EPS_RMS);
  T = pi(params, P.P_T);
  H = pi(params, P.P_H);
  DK = pi(params, P.P_DK);
  DV = pi(params, P.P_DV);
  BW = pi(params, P.P_BETA_W);
  HB = task / H;
  HH = task % H;
  const row = <usize> HB * <usize> T * <usize> H + <usize> HH; // (b, t=0, h)
  Q0 = pp(params, P.P_Q) + ((row * <usize> DK) << 2);
  K0 = pp(params, P.P_K) + ((row * <usize> DK) << 2);
  V0 = pp(params, P.P_V) + ((row * <usize> DV) << 2);
  BETA0 = pp(params, P.P_BETA) + ((row * <usize> BW) << 2);
  LAM0 = pp(params, P.P_LAMBDA) + (row << 2);
  DO0 = pp(params, P.P_DO) + ((row * <usize> DV) << 2);
  const st = pp(params, P.P_STARTS);
  STARTS = st == 0 ? 0 : st + <usize> HB * <usize> T;
  const bh = <usize> task;
  const s0 = pp(params, P.P_S0);
  S0 = s0 == 0 ? 0 : s0 + ((bh * <usize> DK * <usize> DV) << 2);
  HAS_CARRY = pi(params, P.P_HAS_CARRY) != 0;
  const slots = WIN - 1;
  if (HAS_CARRY) {
    C_STATE = pp(params, P.P_C_STATE) + ((bh * <usize> DK * <usize> DV) << 2);
    C_LASTKEY = pp(params, P.P_C_LASTKEY) + ((bh * <usize> DK) << 2);
    C_WX = pp(params, P.P_C_WX) + ((bh * <usize> slots * <usize> DK) << 2);
    C_WY = pp(params, P.P_C_WY) + ((bh * <usize> slots * <usize> DV) << 2);
    const cnt = load<i32>(pp(params, P.P_C_COUNT) + (<usize> HB << 2));
    C_COUNT = cnt < 0 ? 0 : (cnt > slots ? slots : cnt);
  } else {
    C_COUNT = 0;
  }
  MAMBA_A = <f64> load<f32>(pp(params, P.P_MAMBA_A) + (<usize> HH << 2));
  RETNET_G = <f64> load<f32>(pp(params, P.P_RETNET_G) + (<usize> HH << 2));
  CHUNK = pi(params, P.P_CHUNK);
  if (CHUNK < 1) CHUNK = 64;
  CHUNKED = pi(params, P.P_FORM) != 0;
}

/** Pointer to q of position t (Dk floats). */

export function qRow(t: i32): usize {
  return Q0 + ((<usize> t * <usize> H * <usize> DK) << 2);
}

/** Pointer to k of position t. */

export function kRow(t: i32): usize {
  return K0 + ((<usize> t * <usize> H * <usize> DK) << 2);
}

/** Pointer to v (and o, dv, dO: same layout) of position t, relative to base `base`. */

export function vOff(t: i32): usize {
  return (<usize> t * <usize> H * <usize> DV) << 2;
}

/** Offset of position t in a `[B, T, H, Dk]` tensor relative to this head's position 0. */

export function kOff(t: i32): usize {
  return (<usize> t * <usize> H * <usize> DK) << 2;
}

/** Byte offset of row `t` of a `[T, Dk]` scratch array (phi(q), phi(k) and their gradients). */
export function kRowOff(t: i32): usize {
  return (<usize> t * <usize> DK) << 2;
}

/** Byte offset of row `t` of a `[T, Dv]` scratch array (the chunked backward's pseudo-value store). */
export function vRowOff(t: i32): usize {
  return (<usize> t * <usize> DV) << 2;
}

/** Offset of position t in the beta tensor. */

export function betaOff(t: i32): usize {
  return (<usize> t * <usize> H * <usize> BW) << 2;
}

/** Offset of position t in a `[B, T, H]` tensor. */

export function lamOff(t: i32): usize {
  return (<usize> t * <usize> H) << 2;
}

/** Whether position t starts a sequence (position 0 does unless a carry is given). */

export function isStart(t: i32): bool {
  if (t == 0 && !HAS_CARRY) return true;
  return STARTS != 0 && load<u8>(STARTS + <usize> t) != 0;
}

// ---- q/k normalisation ----

/** `dst = norm(src)` over Dk floats (QK-RMSNorm, l2 or none). */
export function normalize(dst: usize, src: usize, n: i32): void {
  if (QKN == 2) {
    memory.copy(dst, src, <usize> n << 2);
    return;
  }
  const ss = sumSquaresF64(src, n);
  let r: f64;
  if (QKN == 0) r = 1.0 / Math.sqrt(ss / <f64> n + EPS_RMS);
  else r = 1.0 / Math.max(Math.sqrt(ss), 1e-6);
  scaleF64(dst, src, r, n);
}

/** `dst = d norm(src)^T g`: gradient with respect to the raw vector, given `g` for the normalised one. */
export function normalizeBackward(dst: usize, src: usize, g: usize, n: i32): void {
  if (QKN == 2) {
    memory.copy(dst, g, <usize> n << 2);
    return;
  }
  const ss = sumSquaresF64(src, n);
  const gu = dotF64(g, src, n);
  if (QKN == 0) {
    const r = 1.0 / Math.sqrt(ss / <f64> n + EPS_RMS);
    const c = r * r * r * gu / <f64> n;
    combineF64(dst, g, r, src, -c, n);
  } else {
    const nrm = Math.sqrt(ss);
    if (nrm > 1e-6) {
      const r = 1.0 / nrm;
      const c = gu * r * r * r;
      combineF64(dst, g, r, src, -c, n);
    } else {
      for (let i = 0; i < n; i++) stf(dst, i, <f32> (<f64> ldf(g, i) * 1e6));
    }
  }
}

/** Squared norm of Dk floats, accumulated in float64. */
export function sqnorm(x: usize, n: i32): f64 {
  return sumSquaresF64(x, n);
}

/**
 * Coefficients of position t for the coefficient-stream rules: fills `gam`, `ca`, `cb` (Dv floats each,
 * or the first `cols` when `cols > 0`: the chunked kernel of the scalar rules asks for 1).
 * `noop` marks the prefix sentinel; `E` is `||x_t||^2`.
 */
export function coefs(t: i32, noop: bool, E: f64, gam: usize, ca: usize, cb: usize, cols: i32 = 0): void {
  const n = cols > 0 ? cols : DV;
  if (noop || (isFalcon(RULE) && E == 0)) {
    fillF(gam, 1, n);
    fillF(ca, 0, n);
    fillF(cb, 0, n);
    return;
  }
  const bp = BETA0 + betaOff(t);
  const lb = <f64> load<f32>(LAM0 + lamOff(t));
  if (isFalcon(RULE)) {
    const lam = COUPLING ? lb * E : lb;
    const den = E + lam + EPS;
    const reg = isRegression(RULE);
    if (!isPerColumn(RULE)) {
      // one beta per head: the same coefficients for every column, computed once
      const eta = <f64> load<f32>(bp) / den;
      const alpha = eta * lam;
      fillF(gam, <f32> (alpha >= 1 - EPS_GAMMA ? EPS_GAMMA : 1 - alpha), n);
      fillF(ca, reg ? <f32> eta : 0, n);
      fillF(cb, <f32> eta, n);
      return;
    }
    for (let j = 0; j < n; j++) {
      const eta = <f64> ldf(bp, j) / den;
      const alpha = eta * lam;
      const g = alpha >= 1 - EPS_GAMMA ? EPS_GAMMA : 1 - alpha;
      stf(gam, j, <f32> g);
      stf(ca, j, reg ? <f32> eta : 0);
      stf(cb, j, <f32> eta);
    }
    return;
  }
  let g: f64 = 1;
  let a: f64 = 0;
  let b: f64 = 1;
  const beta = <f64> load<f32>(bp);
  if (RULE == RETNET) {
    g = RETNET_G;
  } else if (RULE == MAMBA2) {
    g = Math.exp(-beta * MAMBA_A);
    b = beta;
  } else if (RULE == DELTANET) {
    a = beta;
    b = beta;
  } else if (RULE == GATED_DELTANET) {
    g = Math.exp(-lb);
    a = g * beta;
    b = beta;
  } else if (RULE != LINEAR) {
    unreachable(); // a rule id outside the catalog (src/wasm/fast_weight.ts checks it first)
  }
  fillF(gam, <f32> g, n);
  fillF(ca, <f32> a, n);
  fillF(cb, <f32> b, n);
}

/** Gradient with respect to `E_t` produced by the last {@link coefGrads} call. */
export let GRAD_E: f64 = 0;

/**
 * Gradients of position t's coefficients: given `dgam`, `da`, `db` (Dv floats each, or `cols` when
 * `cols > 0`, for a rule with scalar coefficients), writes dbeta (into `dbetaRow`, width BW) and
 * dlambdabar (into `dlamPtr`), and sets {@link GRAD_E}.
 */
export function coefGrads(
  t: i32,
  noop: bool,
  E: f64,
  dgam: usize,
  da: usize,
  db: usize,
  dbetaRow: usize,
  dlamPtr: usize,
  cols: i32 = 0,
): void {
  const n = cols > 0 ? cols : DV;
  GRAD_E = 0;
  if (noop || (isFalcon(RULE) && E == 0)) {
    for (let j = 0; j < BW; j++) stf(dbetaRow, j, 0);
    store<f32>(dlamPtr, 0);
    return;
  }
  const bp = BETA0 + betaOff(t);
  const lb = <f64> load<f32>(LAM0 + lamOff(t));
  if (isFalcon(RULE)) {
    const lam = COUPLING ? lb * E : lb;
    const den = E + lam + EPS;
    const reg = isRegression(RULE);
    if (isPerColumn(RULE)) {
      let dden: f64 = 0;
      let dlam: f64 = 0;
      for (let j = 0; j < n; j++) {
        const beta = <f64> ldf(bp, j);
        const eta = beta / den;
        const clamped = eta * lam >= 1 - EPS_GAMMA;
        const dg = <f64> ldf(dgam, j);
        let deta = <f64> ldf(db, j) + (reg ? <f64> ldf(da, j) : 0);
        if (!clamped) {
          deta -= lam * dg;
          dlam -= eta * dg;
        }
        stf(dbetaRow, j, <f32> (deta / den));
        dden -= deta * eta / den;
      }
      dlam += dden;
      GRAD_E = dden;
      store<f32>(dlamPtr, <f32> (dlam * (COUPLING ? E : 1)));
    } else {
      const dg = sumF64(dgam, n);
      let deta = sumF64(db, n) + (reg ? sumF64(da, n) : 0);
      const beta = <f64> load<f32>(bp);
      const eta = beta / den;
      const clamped = eta * lam >= 1 - EPS_GAMMA;
      let dlam: f64 = 0;
      if (!clamped) {
        deta -= lam * dg;
        dlam -= eta * dg;
      }
      const dden = -deta * eta / den;
      dlam += dden;
      GRAD_E = dden;
      store<f32>(dbetaRow, <f32> (deta / den));
      store<f32>(dlamPtr, <f32> (dlam * (COUPLING ? E : 1)));
    }
    return;
  }
  const sg = sumF64(dgam, n);
  const sa = sumF64(da, n);
  const sb = sumF64(db, n);
  const beta = <f64> load<f32>(bp);
  let dbeta: f64 = 0;
  let dlb: f64 = 0;
  if (RULE == MAMBA2) {
    const g = Math.exp(-beta * MAMBA_A);
    dbeta = sb - sg * MAMBA_A * g;
  } else if (RULE == DELTANET) {
    dbeta = sa + sb;
  } else if (RULE == GATED_DELTANET) {
    const g = Math.exp(-lb);
    dbeta = sa * g + sb;
    dlb = -g * (sg + sa * beta);
  } else if (RULE != LINEAR && RULE != RETNET) {
    unreachable(); // a rule id outside the catalog
  }
  store<f32>(dbetaRow, <f32> dbeta);
  store<f32>(dlamPtr, <f32> dlb);
}

/**
 * Largest eigenvalue of the symmetric `n x n` float64 matrix at `a` (destroyed) by cyclic Jacobi;
 * its unit eigenvector is written to `u` (n float64). `v` is n*n float64 scratch.
 */
export function topEigen(a: usize, v: usize, u: usize, n: i32): f64 {
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) std(v, i * n + j, i == j ? 1 : 0);
  for (let sweep = 0; sweep < 50; sweep++) {
    let off: f64 = 0;
    let diag: f64 = 0;
    for (let i = 0; i < n; i++) {
      diag += ldd(a, i * n + i) * ldd(a, i * n + i);
      for (let j = i + 1; j < n; j++) off += ldd(a, i * n + j) * ldd(a, i * n + j);
    }
    if (off <= 1e-32 * diag || off == 0) break;
    for (let p = 0; p < n; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = ldd(a, p * n + q);
        if (apq == 0) continue;
        const app = ldd(a, p * n + p);
        const aqq = ldd(a, q * n + q);
        const theta = (aqq - app) / (2 * apq);
        const tt = (theta >= 0 ? 1.0 : -1.0) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(tt * tt + 1);
        const s = tt * c;
        for (let k = 0; k < n; k++) {
          const akp = ldd(a, k * n + p);
          const akq = ldd(a, k * n + q);
          std(a, k * n + p, c * akp - s * akq);
          std(a, k * n + q, s * akp + c * akq);
        }
        for (let k = 0; k < n; k++) {
          const apk = ldd(a, p * n + k);
          const aqk = ldd(a, q * n + k);
          std(a, p * n + k, c * apk - s * aqk);
          std(a, q * n + k, s * apk + c * aqk);
        }
        for (let k = 0; k < n; k++) {
          const vkp = ldd(v, k * n + p);
          const vkq = ldd(v, k * n + q);
          std(v, k * n + p, c * vkp - s * vkq);
          std(v, k * n + q, s * vkp + c * vkq);
        }
      }
    }
  }
  let best = 0;
  for (let i = 1; i < n; i++) if (ldd(a, i * n + i) > ldd(a, best * n + best)) best = i;
  for (let i = 0; i < n; i++) std(u, i, ldd(v, i * n + best));
  return ldd(a, best * n + best);
}

// ---- scratch layout (byte offsets from the thread's scratch pointer) ----
export let L_QHAT: usize = 0; // [T, Dk]
export let L_KHAT: usize = 0; // [T, Dk]
export let L_DQHAT: usize = 0; // [T, Dk]
export let L_DKHAT: usize = 0; // [T, Dk]
export let L_ZERO: usize = 0; // [Dk] zeros (the sentinel's write feature)
export let L_ZS: usize = 0; // [Dk, Dv] zeros (S0 when none is given)
export let L_VEC: usize = 0; // 14 vectors of max(Dk, Dv)
export let L_ROWS: usize = 0; // [Dk, 3] v128: the pre-splatted rows of fw_step's splatRows
export let L_ACC: usize = 0; // (16 + 5 W) x Dk floats: row partial sums of the backward passes, and dx
export let L_WIN: usize = 0; // window work: 5 * W * max(Dk, Dv) floats
export let L_F64: usize = 0; // float64 work: 3 * W * W + 2 * W + Dk
export let L_CKPT: usize = 0; // [ceil(T / C), Dk, Dv]
export let L_ST: usize = 0; // [C + 1, Dk, Dv]
export let L_COEF: usize = 0; // [5, C, Dv]
export let L_DS: usize = 0; // [Dk, Dv]
export let L_CW: usize = 0; // work area of the chunk-parallel form (fw_chunk_layout.ts)
export let L_WSTORE: usize = 0; // chunked backward: pseudo-values W [T, Dv]
export let L_END: usize = 0;

function up(x: usize): usize {
  return (x + 15) & ~(<usize> 15);
}

/** Chunk size of the chunk-parallel form: `c`, but never above `max(T, 1)` (its work area is `C x C`). */
export function chunkSize(t: i32, c: i32): i32 {
  return c > t ? (t > 1 ? t : 1) : c;
}

/**
 * Compute the scratch layout for the current context sizes; returns the bytes needed. The chunked
 * form (`chunked`) keeps a checkpoint per chunk in the backward and a chunk work area instead of the
 * recurrent form's per-step states and coefficients (`instances`: and falcon3's instance rows).
 */
export function layout(
  t: i32,
  dk: i32,
  dv: i32,
  w: i32,
  c: i32,
  backward: bool,
  chunked: bool,
  instances: bool = false,
): usize {
  const td = (<usize> t * <usize> dk) << 2;
  const md = <usize> (dk > dv ? dk : dv);
  const sd = (<usize> dk * <usize> dv) << 2;
  let o: usize = 0;
  L_QHAT = o;
  o = up(o + td);
  L_KHAT = o;
  o = up(o + td);
  L_DQHAT = o;
  if (backward) o = up(o + td);
  L_DKHAT = o;
  if (backward) o = up(o + td);
  L_ZERO = o;
  o = up(o + ((<usize> dk) << 2));
  L_ZS = o;
  o = up(o + sd);
  L_VEC = o;
  o = up(o + ((14 * md) << 2));
  L_ROWS = o;
  o = up(o + <usize> dk * 48);
  L_ACC = o;
  o = up(o + (((16 + 5 * <usize> w) * <usize> dk) << 2));
  L_WIN = o;
  o = up(o + ((5 * <usize> w * md) << 2));
  L_F64 = o;
  o = up(o + ((3 * <usize> w * <usize> w + 2 * <usize> w + <usize> dk) << 3));
  L_CKPT = o;
  L_ST = o;
  L_COEF = o;
  L_DS = o;
  L_CW = o;
  if (chunked) {
    c = chunkSize(t, c);
    if (backward) o = up(o + <usize> ((t + c - 1) / c) * sd);
    L_WSTORE = o;
    if (backward) o = up(o + ((<usize> t * <usize> dv) << 2));
    L_CW = o;
    o = up(o + chunkLayout(c, dk, dv, w, instances));
  } else if (backward) {
    const nc = <usize> ((t + c - 1) / c);
    o = up(o + nc * sd);
    L_ST = o;
    o = up(o + (<usize> c + 1) * sd);
    L_COEF = o;
    o = up(o + ((5 * <usize> c * <usize> dv) << 2));
    L_DS = o;
    o = up(o + sd);
  }
  L_END = o;
  return o;
}

/**
 * Bytes of scratch one thread needs for one head of a fast-weight call with these sizes (`chunked`:
 * the chunk-parallel form: 1, or 2 for falcon3, whose instance rows it holds too; `w`: the window B).
 */
export function fwScratchBytes(t: i32, dk: i32, dv: i32, w: i32, c: i32, backward: i32, chunked: i32): usize {
  return layout(t, dk, dv, w, c, backward != 0, chunked != 0, chunked == 2);
}
