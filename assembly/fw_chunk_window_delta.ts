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
import { decayGrads } from "./fw_chunk_additive_delta";
// AssemblyScript has no type-only imports
// deno-lint-ignore verbatim-module-syntax
import { ChunkContext, el } from "./fw_chunk_context";
import { loadWindowSegment, rowp } from "./fw_chunk_window_additive";
import * as L from "./fw_chunk_layout";
import { COUPLING, DK, DO0, DV, kRowOff, lamOff, PREFIX, vOff, WIN } from "./fw_common";
import { G_BW_H, G_DBETA, G_DLAM, G_DV, OUT_O } from "./fw_recurrent";
import { pairX, windowCoefs, windowOf } from "./fw_window";
import { axpyF, dotF, fillF, ldd, ldf, std, stf } from "./simd";

/** Set the instance-row work pointers from the chunk work area at `base`. */
export function regSetup(ctx: ChunkContext, base: usize): void {
  ctx.instanceStep = base + L.W_INSTANCE_STEP;
  ctx.instancePair = base + L.W_INSTANCE_PAIR;
  ctx.stepFirstInstance = base + L.W_STEP_FIRST_INSTANCE;
  ctx.instanceW = base + L.W_INSTANCE_W;
  ctx.instanceWT = base + L.W_INSTANCE_WT;
  ctx.dInstanceW = base + L.W_D_INSTANCE_W;
  ctx.instanceNegSolve = base + L.W_INSTANCE_NEG_SOLVE;
  ctx.dInstanceSolve = base + L.W_D_INSTANCE_SOLVE;
  ctx.instanceReadout = base + L.W_INSTANCE_READOUT;
  ctx.dInstanceReadout = base + L.W_D_INSTANCE_READOUT;
  ctx.pairGram = base + L.W_PAIR_GRAM;
  ctx.dPairGram = base + L.W_D_PAIR_GRAM;
  ctx.pairFeaturesState = base + L.W_PAIR_FEATURES_STATE;
  ctx.pairEndSums = base + L.W_PAIR_END_SUMS;
  ctx.pairScaledDRhs = base + L.W_PAIR_SCALED_DRHS;
  ctx.dStepGain = base + L.W_D_STEP_GAIN;
  ctx.instanceStride = ctx.chunk * (WIN > 1 ? WIN : 1);
}

/** i32 element `i` of `p`. */
function ldi(p: usize, i: i32): i32 {
  return load<i32>(p + (<usize> i << 2));
}

/** Element `(i, j)` of a `[*, R]` matrix. */
function er(ctx: ChunkContext, p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> ctx.instanceStride + <usize> j) << 2);
}

/** Element `(i, j)` of a `[P, P]` matrix. */
function ep(ctx: ChunkContext, p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> ctx.pairStride + <usize> j) << 2);
}

/** `dst[j] = s * src[j]` for `j < n`. */
function scaleRow(dst: usize, src: usize, s: f32, n: i32): void {
  for (let j = 0; j < n; j++) stf(dst, j, s * ldf(src, j));
}

/**
 * The segment's coefficients and pairs (loadWindowSegment), its instance rows, the decay matrix Gam,
 * the pair Gram matrix, `X S_a`, `-A` and the pseudo-values W (solved step by step).
 */
function loadReg(ctx: ChunkContext, a: i32, n: i32, S: usize): void {
  const dk = DK;
  const dv = DV;
  loadWindowSegment(ctx, a, n);
  const m = ctx.pairCount;
  let r = 0;
  for (let i = 0; i < n; i++) {
    store<i32>(ctx.stepFirstInstance + (<usize> i << 2), r);
    const wn = ldi(ctx.windowSize, i);
    if (wn > 0) {
      for (let j = ldi(ctx.windowFirst, i); j <= a + i; j++) {
        store<i32>(ctx.instanceStep + (<usize> r << 2), i);
        store<i32>(ctx.instancePair + (<usize> r << 2), j - ctx.firstPair);
        r++;
      }
    }
  }
  store<i32>(ctx.stepFirstInstance + (<usize> n << 2), r);
  ctx.instanceCount = r;
  fillF(ctx.decayMatrix, 0, n * ctx.chunk);
  for (let i = 0; i < n; i++) {
    stf(ctx.gamma, i, <f32> ldd(ctx.windowGamma, i));
    if (i > 0) {
      scaleRow(el(ctx, ctx.decayMatrix, i, 0), el(ctx, ctx.decayMatrix, i - 1, 0), ldf(ctx.gamma, i), i);
    }
    stf(el(ctx, ctx.decayMatrix, i, 0), i, 1);
  }
  if (m > 0) {
    mm(
      ctx.pairGram,
      ctx.pairStride,
      ctx.pairFeatures,
      dk,
      1,
      ctx.pairFeaturesT,
      ctx.pairStride,
      m,
      dk,
      m,
      false,
      FULL,
    );
    mm(ctx.pairFeaturesState, dv, ctx.pairFeatures, dk, 1, S, dv, m, dk, dv, false, FULL);
  }
  // R0 = g (y - cp X S_a) into W; -A
  for (let q = 0; q < ctx.instanceCount; q++) {
    const s = ldi(ctx.instanceStep, q);
    const p = ldi(ctx.instancePair, q);
    const g = <f32> ldd(ctx.windowGain, s);
    const cp: f32 = s > 0 ? ldf(ctx.cumDecay, s - 1) : 1;
    const w = rowp(ctx.instanceW, q, dv);
    const y = rowp(ctx.pairTargets, p, dv);
    const xs = rowp(ctx.pairFeaturesState, p, dv);
    for (let j = 0; j < dv; j++) stf(w, j, g * (ldf(y, j) - cp * ldf(xs, j)));
    const r0 = ldi(ctx.stepFirstInstance, s);
    for (let q2 = 0; q2 < r0; q2++) {
      const v = -g * load<f32>(el(ctx, ctx.decayMatrix, s - 1, ldi(ctx.instanceStep, q2))) *
        load<f32>(ep(ctx, ctx.pairGram, p, ldi(ctx.instancePair, q2)));
      store<f32>(er(ctx, ctx.instanceNegSolve, q, q2), v);
    }
  }
  for (let i = 1; i < n; i++) {
    const r0 = ldi(ctx.stepFirstInstance, i);
    const r1 = ldi(ctx.stepFirstInstance, i + 1);
    if (r1 > r0 && r0 > 0) {
      mm(
        rowp(ctx.instanceW, r0, dv),
        dv,
        er(ctx, ctx.instanceNegSolve, r0, 0),
        ctx.instanceStride,
        1,
        ctx.instanceW,
        dv,
        r1 - r0,
        r0,
        dv,
        true,
        FULL,
      );
    }
  }
}

/** `pairQueryGram = Q X^T` over the pairs and the masked readout matrix `M[t, r] = Gam[t, s] Kqx[t, j]`. */
function readoutMatrix(ctx: ChunkContext, a: i32, n: i32): void {
  const m = ctx.pairCount;
  if (m > 0) {
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
  }
  for (let t = 0; t < n; t++) {
    const mq = er(ctx, ctx.instanceReadout, t, 0);
    fillF(mq, 0, ctx.instanceCount);
    const r1 = ldi(ctx.stepFirstInstance, t + 1);
    for (let q = 0; q < r1; q++) {
      stf(
        mq,
        q,
        load<f32>(el(ctx, ctx.decayMatrix, t, ldi(ctx.instanceStep, q))) *
          load<f32>(ep(ctx, ctx.pairQueryGram, t, ldi(ctx.instancePair, q))),
      );
    }
  }
}

/** `pairEndSums[j] = sum_{r = (s, j)} Gam[e, s] W_r`: the state update's pair sums. */
function pairSums(ctx: ChunkContext, n: i32): void {
  const dv = DV;
  fillF(ctx.pairEndSums, 0, ctx.pairCount * dv);
  for (let q = 0; q < ctx.instanceCount; q++) {
    const ge = load<f32>(el(ctx, ctx.decayMatrix, n - 1, ldi(ctx.instanceStep, q)));
    axpyF(rowp(ctx.pairEndSums, ldi(ctx.instancePair, q), dv), rowp(ctx.instanceW, q, dv), ge, dv);
  }
}

/** One segment of falcon3 forward on the state `S` (updated in place); with `readout` writes o. */
export function regSegmentForward(ctx: ChunkContext, a: i32, n: i32, S: usize, readout: bool): void {
  const dk = DK;
  const dv = DV;
  loadReg(ctx, a, n, S);
  if (readout) {
    readoutMatrix(ctx, a, n);
    const o = OUT_O + vOff(a);
    mm(o, ctx.valueStride, ctx.queryHat + kRowOff(a), dk, 1, S, dv, n, dk, dv, false, FULL);
    scaleRows(o, ctx.valueStride, o, ctx.valueStride, ctx.cumDecay, n, dv);
    if (ctx.instanceCount > 0) {
      mm(
        o,
        ctx.valueStride,
        ctx.instanceReadout,
        ctx.instanceStride,
        1,
        ctx.instanceW,
        dv,
        n,
        ctx.instanceCount,
        dv,
        true,
        FULL,
      );
    }
  }
  pairSums(ctx, n);
  scaleF(S, ldf(ctx.cumDecay, n - 1), dk * dv);
  if (ctx.pairCount > 0) {
    mm(S, dv, ctx.pairFeatures, 1, dk, ctx.pairEndSums, dv, dk, ctx.pairCount, dv, true, FULL);
  }
}

/**
 * One segment of falcon3 backward entering with `S`: ctx.dState holds dS_e on entry and dS_a on return;
 * writes dq of its positions to `dqh`, adds the pair gradients to `dkh` and dv, and writes dbeta,
 * dlambdabar of its positions.
 */
export function regSegmentBackward(
  ctx: ChunkContext,
  a: i32,
  n: i32,
  S: usize,
  dqh: usize,
  dkh: usize,
): void {
  const dk = DK;
  const dv = DV;
  loadReg(ctx, a, n, S);
  readoutMatrix(ctx, a, n);
  const m = ctx.pairCount;
  const R = ctx.instanceCount;
  const dO = DO0 + vOff(a);
  const q = ctx.queryHat + kRowOff(a);
  transpose(ctx.stateT, S, dk, dv, dk);
  transpose(ctx.dStateEndT, ctx.dState, dk, dv, dk);
  fillF(ctx.dDecayMatrix, 0, n * ctx.chunk);
  fillF(ctx.dPairFeatures, 0, m * dk);
  fillF(ctx.dPairTargets, 0, m * dv);
  fillF(ctx.dPairMaskedReadout, 0, n * ctx.pairStride);
  for (let i = 0; i < n; i++) std(ctx.dStepGain, i, 0);
  // P = X dS_e (pairs); dW = M^T dO + Gam[e, s] P_j; dGam[e, s] += P_j . W_r
  if (m > 0) mm(ctx.pairProducts, dv, ctx.pairFeatures, dk, 1, ctx.dState, dv, m, dk, dv, false, FULL);
  if (R > 0) {
    mm(
      ctx.dInstanceW,
      dv,
      ctx.instanceReadout,
      1,
      ctx.instanceStride,
      dO,
      ctx.valueStride,
      R,
      n,
      dv,
      false,
      FULL,
    );
  }
  for (let r = 0; r < R; r++) {
    const s = ldi(ctx.instanceStep, r);
    const pp = rowp(ctx.pairProducts, ldi(ctx.instancePair, r), dv);
    const g = el(ctx, ctx.dDecayMatrix, n - 1, s);
    axpyF(rowp(ctx.dInstanceW, r, dv), pp, load<f32>(el(ctx, ctx.decayMatrix, n - 1, s)), dv);
    store<f32>(g, load<f32>(g) + dotF(pp, rowp(ctx.instanceW, r, dv), dv));
  }
  // dM = dO W^T: dGam[t, s] += dM Kqx[t, j], dKqx[t, j] += dM Gam[t, s]
  if (R > 0) {
    transpose(ctx.instanceWT, ctx.instanceW, R, dv, ctx.instanceStride);
    mm(
      ctx.dInstanceReadout,
      ctx.instanceStride,
      dO,
      ctx.valueStride,
      1,
      ctx.instanceWT,
      ctx.instanceStride,
      n,
      dv,
      R,
      false,
      FULL,
    );
  }
  for (let t = 0; t < n; t++) {
    const r1 = ldi(ctx.stepFirstInstance, t + 1);
    for (let r = 0; r < r1; r++) {
      const d = load<f32>(er(ctx, ctx.dInstanceReadout, t, r));
      const s = ldi(ctx.instanceStep, r);
      const p = ldi(ctx.instancePair, r);
      const g = el(ctx, ctx.dDecayMatrix, t, s);
      store<f32>(g, load<f32>(g) + d * load<f32>(ep(ctx, ctx.pairQueryGram, t, p)));
      const k = ep(ctx, ctx.dPairMaskedReadout, t, p);
      store<f32>(k, load<f32>(k) + d * load<f32>(el(ctx, ctx.decayMatrix, t, s)));
    }
  }
  // T2 = dO S^T: dc_t = T2_t . q_t; dQ = diag(c) T2 + dKqx X; dX = dKqx^T Q + Z dS_e^T
  mm(ctx.dOutStateT, dk, dO, ctx.valueStride, 1, ctx.stateT, dk, n, dv, dk, false, FULL);
  for (let i = 0; i < n; i++) stf(ctx.dDecay, i, dotF(rowp(ctx.dOutStateT, i, dk), rowp(q, i, dk), dk));
  scaleRows(ctx.dQueries, dk, ctx.dOutStateT, dk, ctx.cumDecay, n, dk);
  if (m > 0) {
    mm(
      ctx.dQueries,
      dk,
      ctx.dPairMaskedReadout,
      ctx.pairStride,
      1,
      ctx.pairFeatures,
      dk,
      n,
      m,
      dk,
      true,
      FULL,
    );
    mm(ctx.dPairFeatures, dk, ctx.dPairMaskedReadout, 1, ctx.pairStride, q, dk, m, n, dk, true, FULL);
    pairSums(ctx, n);
    mm(ctx.dPairFeatures, dk, ctx.pairEndSums, dv, 1, ctx.dStateEndT, dk, m, dv, dk, true, FULL);
  }
  // dS_a = Q^T diag(c) dO + c_e dS_e; dc_e += <dS_e, S_a>
  fillF(ctx.dStateStart, 0, dk * dv);
  scaleRows(ctx.pairEndSums, dv, dO, ctx.valueStride, ctx.cumDecay, n, dv);
  mm(ctx.dStateStart, dv, q, 1, dk, ctx.pairEndSums, dv, dk, n, dv, true, FULL);
  axpyF(ctx.dStateStart, ctx.dState, ldf(ctx.cumDecay, n - 1), dk * dv);
  stf(ctx.dDecay, n - 1, ldf(ctx.dDecay, n - 1) + dotF(ctx.dState, S, dk * dv));
  // dR = (I + A)^-T dW, step by step from the last
  for (let i = n - 1; i >= 1; i--) {
    const r0 = ldi(ctx.stepFirstInstance, i);
    const r1 = ldi(ctx.stepFirstInstance, i + 1);
    if (r1 > r0 && r0 > 0) {
      mm(
        ctx.dInstanceW,
        dv,
        er(ctx, ctx.instanceNegSolve, r0, 0),
        1,
        ctx.instanceStride,
        rowp(ctx.dInstanceW, r0, dv),
        dv,
        r0,
        r1 - r0,
        dv,
        true,
        FULL,
      );
    }
  }
  // through R0 = g (y - cp X S_a): dg, dy, dc (of cp), dX and dS_a (via pairScaledDRhs = -g cp dR)
  fillF(ctx.pairScaledDRhs, 0, m * dv);
  for (let r = 0; r < R; r++) {
    const s = ldi(ctx.instanceStep, r);
    const p = ldi(ctx.instancePair, r);
    const g = <f32> ldd(ctx.windowGain, s);
    const cp: f32 = s > 0 ? ldf(ctx.cumDecay, s - 1) : 1;
    const dr = rowp(ctx.dInstanceW, r, dv);
    axpyF(rowp(ctx.dPairTargets, p, dv), dr, g, dv);
    const dy = <f64> dotF(dr, rowp(ctx.pairTargets, p, dv), dv);
    const dxs = <f64> dotF(dr, rowp(ctx.pairFeaturesState, p, dv), dv);
    std(ctx.dStepGain, s, ldd(ctx.dStepGain, s) + dy - <f64> cp * dxs);
    if (s > 0) stf(ctx.dDecay, s - 1, <f32> (<f64> ldf(ctx.dDecay, s - 1) - <f64> g * dxs));
    axpyF(rowp(ctx.pairScaledDRhs, p, dv), dr, -g * cp, dv);
  }
  if (m > 0) {
    mm(ctx.dPairFeatures, dk, ctx.pairScaledDRhs, dv, 1, ctx.stateT, dk, m, dv, dk, true, FULL);
    mm(ctx.dStateStart, dv, ctx.pairFeatures, 1, dk, ctx.pairScaledDRhs, dv, dk, m, dv, true, FULL);
  }
  // dA = -dR W^T (s' < s): dg, dGp -> dGam[s-1, s'], dKxx over the pairs
  fillF(ctx.dPairGram, 0, m * ctx.pairStride);
  if (R > 0) {
    mm(
      ctx.dInstanceSolve,
      ctx.instanceStride,
      ctx.dInstanceW,
      dv,
      1,
      ctx.instanceWT,
      ctx.instanceStride,
      R,
      dv,
      R,
      false,
      FULL,
    );
  }
  for (let r = 0; r < R; r++) {
    const s = ldi(ctx.instanceStep, r);
    const r0 = ldi(ctx.stepFirstInstance, s);
    if (r0 == 0) continue;
    const p = ldi(ctx.instancePair, r);
    const g = <f32> ldd(ctx.windowGain, s);
    let dgs: f64 = 0;
    for (let r2 = 0; r2 < r0; r2++) {
      const dA = -load<f32>(er(ctx, ctx.dInstanceSolve, r, r2));
      const s2 = ldi(ctx.instanceStep, r2);
      const p2 = ldi(ctx.instancePair, r2);
      const gp = load<f32>(el(ctx, ctx.decayMatrix, s - 1, s2));
      const kp = load<f32>(ep(ctx, ctx.pairGram, p, p2));
      dgs += <f64> (dA * gp * kp);
      const dg = el(ctx, ctx.dDecayMatrix, s - 1, s2);
      store<f32>(dg, load<f32>(dg) + dA * g * kp);
      const dk2 = ep(ctx, ctx.dPairGram, p, p2);
      store<f32>(dk2, load<f32>(dk2) + dA * g * gp);
    }
    std(ctx.dStepGain, s, ldd(ctx.dStepGain, s) + dgs);
  }
  if (m > 0) {
    mm(ctx.dPairFeatures, dk, ctx.dPairGram, ctx.pairStride, 1, ctx.pairFeatures, dk, m, m, dk, true, FULL);
    mm(ctx.dPairFeatures, dk, ctx.dPairGram, 1, ctx.pairStride, ctx.pairFeatures, dk, m, m, dk, true, FULL);
  }
  decayGrads(ctx, n);
  coefChain(ctx, a, n);
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

/**
 * Per position: dbeta and dlambdabar from dg (dStepGain) and dgamma (dDecay) by the chain of fw_window.ts, and
 * the statistic's gradient `d mu / d x_a = 2 u_a (X u) / n` added to the window's pair gradients.
 */
function coefChain(ctx: ChunkContext, a: i32, n: i32): void {
  const dk = DK;
  const W = WIN;
  const uvec = ctx.f64Work + ((2 * <usize> W * <usize> W) << 3);
  const Xu = ctx.f64Work + ((3 * <usize> W * <usize> W + 2 * <usize> W) << 3);
  for (let i = 0; i < n; i++) {
    const t = a + i;
    const dbeta = G_DBETA + ((<usize> t * <usize> G_BW_H) << 2);
    if (ldd(ctx.windowNoop, i) != 0) {
      store<f32>(dbeta, 0);
      store<f32>(G_DLAM + lamOff(t), 0);
      continue;
    }
    const wn = ldi(ctx.windowSize, i);
    const lo = ldi(ctx.windowFirst, i);
    const dgam = <f64> ldf(ctx.dDecay, i);
    const eta = ldd(ctx.windowEta, i);
    const lam = ldd(ctx.windowLambda, i);
    const den = ldd(ctx.windowDen, i);
    let deta = ldd(ctx.dStepGain, i) / <f64> wn;
    let dlam: f64 = 0;
    if (ldd(ctx.windowClamped, i) == 0) {
      deta -= lam * dgam;
      dlam -= eta * dgam;
    }
    const dden = -deta * eta / den;
    dlam += dden;
    store<f32>(dbeta, <f32> (deta / den));
    store<f32>(G_DLAM + lamOff(t), <f32> (dlam * (COUPLING ? ldd(ctx.windowStat, i) : 1)));
    // the top eigenvector u of the window's Gram matrix, recomputed as the recurrent backward does
    windowOf(t);
    windowCoefs(t, ctx.keyHat, ctx.f64Work);
    for (let r = 0; r < dk; r++) std(Xu, r, 0);
    for (let c = 0; c < wn; c++) {
      const xa = pairX(lo + c, ctx.keyHat);
      const ua = ldd(uvec, c);
      for (let r = 0; r < dk; r++) std(Xu, r, ldd(Xu, r) + ua * <f64> ldf(xa, r));
    }
    for (let c = 0; c < wn; c++) {
      const dxa = rowp(ctx.dPairFeatures, lo + c - ctx.firstPair, dk);
      const c2 = 2 * dden * ldd(uvec, c) / <f64> wn;
      for (let r = 0; r < dk; r++) stf(dxa, r, ldf(dxa, r) + <f32> (c2 * ldd(Xu, r)));
    }
  }
}
