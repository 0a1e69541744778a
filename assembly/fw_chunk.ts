/**
 * Chunk-parallel (SSD / WY) form of every rule, forward and backward, one head per task: the chunk
 * loops and the dispatch to the families. The additive and delta families (falcon1a, linear, retnet,
 * mamba2; falcon1, deltanet, gated_deltanet: one scalar gamma, a, b per step) run the recurrence of
 * fw_recurrent.ts:
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
 * segments in fw_chunk_per_column.ts (the Dk-wide products once for all columns, the C x C work one
 * column at a time with the kernels of fw_chunk_additive_delta.ts, `Dv = 1` sub-problems); their
 * coefficient gradients go through coefGrads once per position with every column. The window rules
 * run their segments in fw_chunk_window_additive.ts (falcon3a) and fw_chunk_window_delta.ts
 * (falcon3). The additive and delta families' segment kernels are in fw_chunk_additive_delta.ts, the
 * shared work pointers in fw_chunk_context.ts; this file keeps the chunk and segment loops, the
 * dispatch to the family of the rule (src/rules/catalog.ts) and the checkpoints of all of them.
 *
 * Shapes: q, k `[B, T, H, Dk]`, v, o `[B, T, H, Dv]`, state `[B, H, Dk, Dv]`.
 */
import { loadRows, scatterRows, subBackward, subForward } from "./fw_chunk_additive_delta";
// AssemblyScript has no type-only imports
// deno-lint-ignore verbatim-module-syntax
import { ChunkContext, contextAt } from "./fw_chunk_context";
import { placeWorkArea, W_CONTEXT } from "./fw_chunk_layout";
import {
  C_LASTKEY,
  C_STATE,
  CHUNK,
  chunkSize,
  DK,
  DV,
  H,
  HAS_CARRY,
  isStart,
  K0,
  kOff,
  kRow,
  kRowOff,
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
  layout,
  normalize,
  normalizeBackward,
  Q0,
  qRow,
  RULE,
  T,
  vOff,
  WIN,
} from "./fw_common";
import { columnBackward, columnForward, columnSetup } from "./fw_chunk_per_column";
import { windowSegmentBackward, windowSegmentForward, windowSetup } from "./fw_chunk_window_additive";
import { regSegmentBackward, regSegmentForward, regSetup } from "./fw_chunk_window_delta";
import { isPerColumn, isRegression, isWindow } from "./fw_rules";
import { G_DCARRY, G_DK, G_DQ, G_DS0, G_DV, OUT_LASTKEY, OUT_STATE, s0Ptr } from "./fw_recurrent";
import { axpyF, fillF } from "./simd";

/**
 * Per head: the chunk size, the scratch layout, the context block at the start of the chunk work area
 * (its shared pointers, then the family's own) and phi(q), phi(k) of every position.
 */
function setup(scratch: usize, backward: bool): ChunkContext {
  const chunk = chunkSize(T, CHUNK);
  const deltaWindow = isWindow(RULE) && isRegression(RULE);
  layout(T, DK, DV, WIN, chunk, backward, true, deltaWindow);
  const base = scratch + L_CW;
  const ctx = contextAt(base + W_CONTEXT);
  placeWorkArea(ctx, base, DV);
  ctx.chunk = chunk;
  ctx.perColumn = isPerColumn(RULE);
  ctx.additiveWindow = isWindow(RULE) && !isRegression(RULE);
  ctx.deltaWindow = deltaWindow;
  ctx.deltaWrite = isRegression(RULE);
  ctx.subWidth = ctx.perColumn ? 1 : DV;
  ctx.columnByte = 0;
  ctx.subValues = ctx.perColumn ? ctx.columnValues : ctx.values;
  ctx.valueStride = H * DV;
  ctx.keyHat = scratch + L_KHAT;
  ctx.queryHat = scratch + L_QHAT;
  ctx.zeroKey = scratch + L_ZERO;
  ctx.pseudoValueStore = backward && ctx.deltaWrite ? scratch + L_WSTORE : 0;
  ctx.pairStride = 1;
  ctx.firstPair = 0;
  ctx.pairCount = 0;
  ctx.f64Work = 0;
  ctx.instanceStride = 1;
  ctx.instanceCount = 0;
  if (ctx.perColumn) columnSetup(ctx, base);
  if (ctx.additiveWindow || ctx.deltaWindow) windowSetup(ctx, base, scratch + L_F64);
  if (ctx.deltaWindow) regSetup(ctx, base);
  fillF(ctx.zeroKey, 0, DK);
  fillF(scratch + L_ZS, 0, DK * DV);
  for (let t = 0; t < T; t++) {
    normalize(ctx.queryHat + kRowOff(t), qRow(t), DK);
    normalize(ctx.keyHat + kRowOff(t), kRow(t), DK);
  }
  return ctx;
}

/** End of the segment that begins at `a` inside the chunk ending at `chunkEnd` (cut at starts). */
function segmentEnd(a: i32, chunkEnd: i32): i32 {
  let e = a + 1;
  while (e < chunkEnd && !isStart(e)) e++;
  return e;
}

/** One segment forward on the state `S` (updated in place); with `readout` writes o of its positions. */
function segmentForward(ctx: ChunkContext, a: i32, n: i32, S: usize, readout: bool): void {
  if (ctx.additiveWindow) {
    windowSegmentForward(ctx, a, n, S, readout);
    return;
  }
  if (ctx.deltaWindow) {
    regSegmentForward(ctx, a, n, S, readout);
    return;
  }
  loadRows(ctx, a, n);
  if (ctx.perColumn) columnForward(ctx, a, n, S, readout);
  else subForward(ctx, a, n, S, readout);
}

/** Run the chunks `[c0, c1)` of C positions forward on the running state `S`. */
function runChunks(ctx: ChunkContext, c0: i32, c1: i32, S: usize, s0: usize, readout: bool): void {
  for (let c = c0; c < c1; c++) {
    const end = min(T, (c + 1) * ctx.chunk);
    let a = c * ctx.chunk;
    while (a < end) {
      const e = segmentEnd(a, end);
      if (isStart(a)) memory.copy(S, s0, (<usize> DK * <usize> DV) << 2);
      segmentForward(ctx, a, e - a, S, readout);
      a = e;
    }
  }
}

/** Forward of one head of a coefficient-stream rule in the chunk-parallel form. */
export function chunkForward(scratch: usize): void {
  const ctx = setup(scratch, false);
  const sdb = (<usize> DK * <usize> DV) << 2;
  if (HAS_CARRY) memory.copy(OUT_STATE, C_STATE, sdb);
  else fillF(OUT_STATE, 0, DK * DV);
  runChunks(ctx, 0, (T + ctx.chunk - 1) / ctx.chunk, OUT_STATE, s0Ptr(scratch), true);
  if (T > 0) memory.copy(OUT_LASTKEY, ctx.keyHat + kRowOff(T - 1), <usize> DK << 2);
  else if (HAS_CARRY) memory.copy(OUT_LASTKEY, C_LASTKEY, <usize> DK << 2);
  else fillF(OUT_LASTKEY, 0, DK);
}

/** Backward of one segment entering with `S`; ctx.dState holds dS_e on entry and dS_a on return. */
function segmentBackward(ctx: ChunkContext, a: i32, n: i32, S: usize, dqh: usize, dkh: usize): void {
  const dk = DK;
  if (ctx.additiveWindow) {
    windowSegmentBackward(ctx, a, n, S, dqh, dkh);
    return;
  }
  if (ctx.deltaWindow) {
    regSegmentBackward(ctx, a, n, S, dqh, dkh);
    return;
  }
  loadRows(ctx, a, n);
  fillF(ctx.dFeatures, 0, n * dk);
  fillF(ctx.dQueries, 0, n * dk);
  if (ctx.perColumn) columnBackward(ctx, a, n, S);
  else subBackward(ctx, a, n, S);
  scatterRows(ctx, a, n, dqh, dkh);
}

/** Backward of one head of a coefficient-stream rule in the chunk-parallel form. */
export function chunkBackward(scratch: usize): void {
  const ctx = setup(scratch, true);
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
  if (ctx.additiveWindow || ctx.deltaWindow) { for (let t = 0; t < T; t++) fillF(G_DV + vOff(t), 0, DV); }
  // checkpoints: the state entering each chunk (before a possible reset at its first position)
  if (HAS_CARRY) memory.copy(ctx.checkpointState, C_STATE, sdb);
  else fillF(ctx.checkpointState, 0, sd);
  const nc = (T + ctx.chunk - 1) / ctx.chunk;
  for (let c = 0; c < nc; c++) {
    memory.copy(ckpt + <usize> c * sdb, ctx.checkpointState, sdb);
    if (c < nc - 1 || ctx.deltaWrite) runChunks(ctx, c, c + 1, ctx.checkpointState, s0, false); // the last chunk only to keep its W
  }
  fillF(ctx.dState, 0, sd);
  for (let c = nc - 1; c >= 0; c--) {
    const c0 = c * ctx.chunk;
    let e = min(T, c0 + ctx.chunk);
    while (e > c0) {
      let a = e - 1;
      while (a > c0 && !isStart(a)) a--;
      const start = isStart(a);
      segmentBackward(ctx, a, e - a, start ? s0 : ckpt + <usize> c * sdb, dqh, dkh);
      if (start) {
        axpyF(G_DS0, ctx.dState, 1, sd);
        fillF(ctx.dState, 0, sd);
      }
      e = a;
    }
  }
  memory.copy(G_DCARRY, ctx.dState, sdb);
  for (let t = 0; t < T; t++) {
    normalizeBackward(G_DQ + kOff(t), Q0 + kOff(t), dqh + kRowOff(t), dk);
    normalizeBackward(G_DK + kOff(t), K0 + kOff(t), dkh + kRowOff(t), dk);
  }
}
