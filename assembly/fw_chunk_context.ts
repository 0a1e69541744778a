/**
 * The context of the chunk-parallel kernels (fw_chunk.ts and its family files): the absolute
 * pointers of the chunk work area and the per-head constants, set once per head by
 * setupChunkContext, and the row-pointer helpers. Every family file reads them from here; none of
 * them imports the dispatcher fw_chunk.ts, so the chunk files import no circle. Module globals: every
 * thread has its own instance, hence its own context.
 *
 * Shapes: q, k `[B, T, H, Dk]`, v, o `[B, T, H, Dv]`, state `[B, H, Dk, Dv]`; work arrays `[C, *]`.
 */

import {
  CHUNK,
  chunkSize,
  DK,
  DV,
  H,
  kRow,
  L_CW,
  L_KHAT,
  L_QHAT,
  L_WSTORE,
  L_ZERO,
  L_ZS,
  layout,
  normalize,
  qRow,
  RULE,
  T,
  WIN,
} from "./fw_common";
import { isPerColumn, isRegression, isWindow } from "./fw_rules";
import { fillF, stf } from "./simd";
import * as L from "./fw_chunk_layout";

// absolute pointers of the work area (set by setupChunkContext; every family file shares them)
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
export let WINDOWED: bool = false; // falcon3a: segments of fw_chunk_window_additive.ts
export let REGWIN: bool = false; // falcon3: segments of fw_chunk_window_delta.ts
export let NV: i32 = 0; // value width of a sub-problem: Dv, or 1 for a per-column rule
export let COLB: usize = 0; // byte offset of the current value column in v, o, dO, dv rows (0: scalar rules)
export let YS: usize = 0; // values of the sub-problem [C, NV]: Y, or YC for a per-column rule
export let LDO: i32 = 0; // row stride of v, o, dO (H * Dv)
export let KH: usize = 0;
export let QH: usize = 0;
export let ZERO: usize = 0;
export let REG: bool = false;
export let WSTORE: usize = 0; // backward of a regression rule: W of every position [T, Dv], else 0

/**
 * Per head: the chunk size, the scratch layout and the work pointers shared by every family, and
 * phi(q), phi(k) of every position (the family files then set their own pointers).
 */
export function setupChunkContext(scratch: usize, backward: bool): void {
  CC = chunkSize(T, CHUNK);
  COL = isPerColumn(RULE);
  WINDOWED = isWindow(RULE) && !isRegression(RULE);
  REGWIN = isWindow(RULE) && isRegression(RULE);
  layout(T, DK, DV, WIN, CC, backward, true, REGWIN);
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
