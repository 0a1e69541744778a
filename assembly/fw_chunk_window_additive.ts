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
// AssemblyScript has no type-only imports
// deno-lint-ignore verbatim-module-syntax
import { ChunkContext } from "./fw_chunk_context";
import * as L from "./fw_chunk_layout";
import { COUPLING, DK, DO0, DV, kRowOff, lamOff, PREFIX, vOff, WIN } from "./fw_common";
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

/** Set the window work pointers from the chunk work area at `base` (`f64s`: windowCoefs' work). */
export function windowSetup(ctx: ChunkContext, base: usize, f64s: usize): void {
  ctx.f64Work = f64s;
  const c = <usize> ctx.chunk << 3;
  ctx.windowGamma = base + L.W_WINDOW_SCALARS;
  ctx.windowGain = ctx.windowGamma + c;
  ctx.windowStat = ctx.windowGain + c;
  ctx.windowLambda = ctx.windowStat + c;
  ctx.windowDen = ctx.windowLambda + c;
  ctx.windowEta = ctx.windowDen + c;
  ctx.windowClamped = ctx.windowEta + c;
  ctx.windowNoop = ctx.windowClamped + c;
  ctx.windowFirst = base + L.W_WINDOW_BOUNDS;
  ctx.windowSize = ctx.windowFirst + (<usize> ctx.chunk << 2);
  ctx.pairFeatures = base + L.W_PAIR_FEATURES;
  ctx.pairFeaturesT = base + L.W_PAIR_FEATURES_T;
  ctx.pairTargets = base + L.W_PAIR_TARGETS;
  ctx.pairTargetsT = base + L.W_PAIR_TARGETS_T;
  ctx.writeMask = base + L.W_WRITE_MASK;
  ctx.pairQueryGram = base + L.W_PAIR_QUERY_GRAM;
  ctx.pairMaskedReadout = base + L.W_PAIR_MASKED_READOUT;
  ctx.dWriteMask = base + L.W_D_WRITE_MASK;
  ctx.dPairMaskedReadout = base + L.W_D_PAIR_MASKED_READOUT;
  ctx.dPairFeatures = base + L.W_D_PAIR_FEATURES;
  ctx.dPairTargets = base + L.W_D_PAIR_TARGETS;
  ctx.pairProducts = base + L.W_PAIR_PRODUCTS;
  ctx.reverseRow = base + L.W_REVERSE_ROW;
  ctx.pairStride = ctx.chunk + (WIN > 1 ? WIN : 1) - 1;
}

/** Pointer to row `i` of a `[*, d]` array. */
export function rowp(p: usize, i: i32, d: i32): usize {
  return p + ((<usize> i * <usize> d) << 2);
}

/**
 * The segment's coefficients (window, gamma, g and the chain's intermediates per position), its pairs
 * `firstPair..a+n-1` (pairFeatures and their transpose, pairTargets), the decays `c` (cumDecay) and the
 * write mask M (writeMask).
 */
export function loadWindowSegment(ctx: ChunkContext, a: i32, n: i32): void {
  const dk = DK;
  const dv = DV;
  let jlo = a;
  for (let i = 0; i < n; i++) {
    const t = a + i;
    windowOf(t);
    windowCoefs(t, ctx.keyHat, ctx.f64Work);
    const noop = ST_NOOP;
    const wn = noop ? 0 : WN;
    std(ctx.windowGamma, i, ST_GAMMA);
    std(ctx.windowGain, i, noop ? 0 : ST_ETA / <f64> wn);
    std(ctx.windowStat, i, ST_STAT);
    std(ctx.windowLambda, i, ST_LAM);
    std(ctx.windowDen, i, ST_DEN);
    std(ctx.windowEta, i, ST_ETA);
    std(ctx.windowClamped, i, ST_CLAMPED ? 1 : 0);
    std(ctx.windowNoop, i, noop ? 1 : 0);
    store<i32>(ctx.windowFirst + (<usize> i << 2), WLO);
    store<i32>(ctx.windowSize + (<usize> i << 2), wn);
    if (!noop && WLO < jlo) jlo = WLO;
  }
  ctx.firstPair = jlo;
  const m = a + n - jlo;
  ctx.pairCount = m;
  for (let p = 0; p < m; p++) {
    const j = jlo + p;
    memory.copy(rowp(ctx.pairFeatures, p, dk), pairX(j, ctx.keyHat), <usize> dk << 2);
    memory.copy(rowp(ctx.pairTargets, p, dv), pairY(j), <usize> dv << 2);
  }
  // pairs that no window of the segment holds (the prefix sentinel's) may be unset: zero them
  for (let p = 0; p < m; p++) {
    let used = false;
    for (let i = 0; i < n && !used; i++) {
      const wn = load<i32>(ctx.windowSize + (<usize> i << 2));
      const lo = load<i32>(ctx.windowFirst + (<usize> i << 2));
      used = wn > 0 && jlo + p >= lo && jlo + p <= a + i;
    }
    if (!used) {
      fillF(rowp(ctx.pairFeatures, p, dk), 0, dk);
      fillF(rowp(ctx.pairTargets, p, dv), 0, dv);
    }
  }
  transpose(ctx.pairFeaturesT, ctx.pairFeatures, m, dk, ctx.pairStride);
  transpose(ctx.pairTargetsT, ctx.pairTargets, m, dv, ctx.pairStride);
  // c_t = gamma_t c_{t-1}; M[t, :] = gamma_t M[t-1, :] + g_t [j in I_t]
  let c: f64 = 1;
  for (let i = 0; i < n; i++) {
    const g = <f32> ldd(ctx.windowGamma, i);
    c *= <f64> g;
    stf(ctx.cumDecay, i, <f32> c);
    const r = rowp(ctx.writeMask, i, ctx.pairStride);
    if (i == 0) fillF(r, 0, m);
    else for (let p = 0; p < m; p++) stf(r, p, g * ldf(r - (<usize> ctx.pairStride << 2), p));
    const wn = load<i32>(ctx.windowSize + (<usize> i << 2));
    if (wn > 0) {
      const gi = <f32> ldd(ctx.windowGain, i);
      const lo = load<i32>(ctx.windowFirst + (<usize> i << 2)) - jlo;
      for (let p = lo; p <= a + i - jlo; p++) stf(r, p, ldf(r, p) + gi);
    }
  }
}

/** `pairQueryGram = Q X^T` and `pairMaskedReadout = pairQueryGram ⊙ M` of the segment at `a`. */
function windowReadoutMask(ctx: ChunkContext, a: i32, n: i32): void {
  const m = ctx.pairCount;
  mm(
    ctx.pairQueryGram,
    ctx.pairStride,
    ctx.queryHat + kRowOff(a),
    DK,
    1,
    ctx.pairFeaturesT,
    ctx.pairStride,
    n,
    DK,
    m,
    false,
    FULL,
  );
  for (let i = 0; i < n; i++) {
    const k = rowp(ctx.pairQueryGram, i, ctx.pairStride);
    const mk = rowp(ctx.writeMask, i, ctx.pairStride);
    const o = rowp(ctx.pairMaskedReadout, i, ctx.pairStride);
    for (let p = 0; p < m; p++) stf(o, p, ldf(k, p) * ldf(mk, p));
  }
}

/** One segment of falcon3a forward on the state `S` (updated in place); with `readout` writes o. */
export function windowSegmentForward(ctx: ChunkContext, a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = DV;
  loadWindowSegment(ctx, a, n);
  const m = ctx.pairCount;
  if (readout) {
    windowReadoutMask(ctx, a, n);
    const o = OUT_O + vOff(a);
    mm(o, ctx.valueStride, ctx.queryHat + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
    scaleRows(o, ctx.valueStride, o, ctx.valueStride, ctx.cumDecay, n, dv);
    mm(
      o,
      ctx.valueStride,
      ctx.pairMaskedReadout,
      ctx.pairStride,
      1,
      ctx.pairTargets,
      dv,
      n,
      m,
      dv,
      true,
      FULL,
    );
  }
  // S_e = c_e S_a + X^T diag(M[e, :]) Y
  scaleRows(ctx.pairProducts, dv, ctx.pairTargets, dv, rowp(ctx.writeMask, n - 1, ctx.pairStride), m, dv);
  scaleF(S, ldf(ctx.cumDecay, n - 1), dk * dv);
  mm(S, dv, ctx.pairFeatures, 1, dk, ctx.pairProducts, dv, dk, m, dv, true, FULL);
}

/**
 * One segment of falcon3a backward entering with `S`: ctx.dState holds dS_e on entry and dS_a on return;
 * writes dq of its positions to `dqh` and adds the pair gradients to `dkh` and dv, and writes
 * dbeta, dlambdabar of its positions.
 */
export function windowSegmentBackward(
  ctx: ChunkContext,
  a: i32,
  n: i32,
  S: usize,
  dqh: usize,
  dkh: usize,
): void {
  const dk = DK;
  const dv = DV;
  loadWindowSegment(ctx, a, n);
  windowReadoutMask(ctx, a, n);
  const m = ctx.pairCount;
  const dO = DO0 + vOff(a);
  const q = ctx.queryHat + kRowOff(a);
  const last = rowp(ctx.writeMask, n - 1, ctx.pairStride);
  transpose(ctx.stateT, S, dk, dv, dk);
  transpose(ctx.dStateEndT, ctx.dState, dk, dv, dk);
  // P = X dS_e: dM[e, j] = P_j . y_j, dY = Mq^T dO + diag(M[e, :]) P
  mm(ctx.pairProducts, dv, ctx.pairFeatures, dk, 1, ctx.dState, dv, m, dk, dv, false, FULL);
  fillF(ctx.dWriteMask, 0, n * ctx.pairStride);
  mm(
    ctx.dPairTargets,
    dv,
    ctx.pairMaskedReadout,
    1,
    ctx.pairStride,
    dO,
    ctx.valueStride,
    m,
    n,
    dv,
    false,
    FULL,
  );
  for (let p = 0; p < m; p++) {
    const pp = rowp(ctx.pairProducts, p, dv);
    stf(rowp(ctx.dWriteMask, n - 1, ctx.pairStride), p, dotF(pp, rowp(ctx.pairTargets, p, dv), dv));
    axpyF(rowp(ctx.dPairTargets, p, dv), pp, ldf(last, p), dv);
  }
  // dMq = dO Y^T: dM += dMq ⊙ Kqx, dKqx = dMq ⊙ M (in dPairMaskedReadout)
  mm(
    ctx.dPairMaskedReadout,
    ctx.pairStride,
    dO,
    ctx.valueStride,
    1,
    ctx.pairTargetsT,
    ctx.pairStride,
    n,
    dv,
    m,
    false,
    FULL,
  );
  for (let i = 0; i < n; i++) {
    const dq = rowp(ctx.dPairMaskedReadout, i, ctx.pairStride);
    const dm = rowp(ctx.dWriteMask, i, ctx.pairStride);
    const kq = rowp(ctx.pairQueryGram, i, ctx.pairStride);
    const mk = rowp(ctx.writeMask, i, ctx.pairStride);
    for (let p = 0; p < m; p++) {
      const d = ldf(dq, p);
      stf(dm, p, ldf(dm, p) + d * ldf(kq, p));
      stf(dq, p, d * ldf(mk, p));
    }
  }
  // T2 = dO S^T: dc_i = T2_i . q_i; dQ = diag(c) T2 + dKqx X; dX = dKqx^T Q + diag(M[e, :]) Y dS_e^T
  mm(ctx.dOutStateT, dk, dO, ctx.valueStride, 1, ctx.stateT, dk, n, dv, dk, false, FULL);
  for (let i = 0; i < n; i++) stf(ctx.dDecay, i, dotF(rowp(ctx.dOutStateT, i, dk), rowp(q, i, dk), dk));
  scaleRows(ctx.dQueries, dk, ctx.dOutStateT, dk, ctx.cumDecay, n, dk);
  mm(ctx.dQueries, dk, ctx.dPairMaskedReadout, ctx.pairStride, 1, ctx.pairFeatures, dk, n, m, dk, true, FULL);
  mm(ctx.dPairFeatures, dk, ctx.dPairMaskedReadout, 1, ctx.pairStride, q, dk, m, n, dk, false, FULL);
  scaleRows(ctx.pairProducts, dv, ctx.pairTargets, dv, last, m, dv);
  mm(ctx.dPairFeatures, dk, ctx.pairProducts, dv, 1, ctx.dStateEndT, dk, m, dv, dk, true, FULL);
  // dS_a = Q^T diag(c) dO + c_e dS_e; dc_e += <dS_e, S_a>
  fillF(ctx.dStateStart, 0, dk * dv);
  for (let i = 0; i < n; i++) {
    const ci = ldf(ctx.cumDecay, i);
    const oi = dO + ((<usize> i * <usize> ctx.valueStride) << 2);
    const qi = rowp(q, i, dk);
    for (let r = 0; r < dk; r++) axpyF(rowp(ctx.dStateStart, r, dv), oi, ci * ldf(qi, r), dv);
  }
  const ce = ldf(ctx.cumDecay, n - 1);
  axpyF(ctx.dStateStart, ctx.dState, ce, dk * dv);
  stf(ctx.dDecay, n - 1, ldf(ctx.dDecay, n - 1) + dotF(ctx.dState, S, dk * dv));
  // reverse recursion: R_i = dM[i, :] + gamma_{i+1} R_{i+1}, Dc_i = dc_i + gamma_{i+1} Dc_{i+1};
  // dgamma_i = R_i . M[i-1, :] + Dc_i c_{i-1}, dg_i = sum_{j in I_i} R_i[j]
  fillF(ctx.reverseRow, 0, m);
  let dcAcc: f64 = 0;
  for (let i = n - 1; i >= 0; i--) {
    const gNext = i + 1 < n ? <f32> ldd(ctx.windowGamma, i + 1) : <f32> 0;
    const dm = rowp(ctx.dWriteMask, i, ctx.pairStride);
    for (let p = 0; p < m; p++) stf(ctx.reverseRow, p, ldf(dm, p) + gNext * ldf(ctx.reverseRow, p));
    dcAcc = <f64> ldf(ctx.dDecay, i) + <f64> gNext * dcAcc;
    let dgam = dcAcc * (i > 0 ? <f64> ldf(ctx.cumDecay, i - 1) : 1);
    if (i > 0) dgam += <f64> dotF(ctx.reverseRow, rowp(ctx.writeMask, i - 1, ctx.pairStride), m);
    const t = a + i;
    const wn = load<i32>(ctx.windowSize + (<usize> i << 2));
    const dbeta = G_DBETA + ((<usize> t * <usize> G_BW_H) << 2);
    if (ldd(ctx.windowNoop, i) != 0) {
      store<f32>(dbeta, 0);
      store<f32>(G_DLAM + lamOff(t), 0);
      continue;
    }
    const lo = load<i32>(ctx.windowFirst + (<usize> i << 2));
    let dg: f64 = 0;
    for (let j = lo; j <= t; j++) dg += <f64> ldf(ctx.reverseRow, j - ctx.firstPair);
    // the chain of fw_window.ts: g = eta / n, gamma = 1 - eta lam (unless clamped), eta = beta / den
    const eta = ldd(ctx.windowEta, i);
    const lam = ldd(ctx.windowLambda, i);
    const den = ldd(ctx.windowDen, i);
    let deta = dg / <f64> wn;
    let dlam: f64 = 0;
    if (ldd(ctx.windowClamped, i) == 0) {
      deta -= lam * dgam;
      dlam -= eta * dgam;
    }
    const dden = -deta * eta / den;
    dlam += dden;
    store<f32>(dbeta, <f32> (deta / den));
    store<f32>(G_DLAM + lamOff(t), <f32> (dlam * (COUPLING ? ldd(ctx.windowStat, i) : 1)));
    // the statistic: d Ebar / d x_j = 2 x_j / n over the window
    const s2 = <f32> (2 * dden / <f64> wn);
    for (let j = lo; j <= t; j++) {
      axpyF(
        rowp(ctx.dPairFeatures, j - ctx.firstPair, dk),
        rowp(ctx.pairFeatures, j - ctx.firstPair, dk),
        s2,
        dk,
      );
    }
  }
  // scatter: dq of the positions; dx, dy of the pairs (carried pairs, j < 0, have none)
  for (let i = 0; i < n; i++) memory.copy(dqh + kRowOff(a + i), rowp(ctx.dQueries, i, dk), <usize> dk << 2);
  for (let p = 0; p < m; p++) {
    const j = ctx.firstPair + p;
    if (j < 0) continue;
    axpyF(G_DV + vOff(j), rowp(ctx.dPairTargets, p, dv), 1, dv);
    if (!PREFIX) axpyF(dkh + kRowOff(j), rowp(ctx.dPairFeatures, p, dk), 1, dk);
    else if (j >= 1) axpyF(dkh + kRowOff(j - 1), rowp(ctx.dPairFeatures, p, dk), 1, dk);
  }
  memory.copy(ctx.dState, ctx.dStateStart, (<usize> dk * <usize> dv) << 2);
}
