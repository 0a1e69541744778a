/**
 * SGEMM: `C[M, N] (+)= A[M, K] B[K, N]` with arbitrary element strides for A and B (so both
 * transposes are strides). Register-blocked 6 x 8 micro-kernel on f32x4 (12 accumulators, two vectors
 * of B and one broadcast of A live: 15 of the 16 vector registers) over packed panels of A (6 rows,
 * `[K][6]`) and B (8 columns, `[K][8]`); K blocked by 256 and N by 2048. Tails (M, N, K not multiples
 * of the block) are zero-padded in the packs and written back through a scalar path.
 *
 * Parameter block (float64 slots): see G_* below. The work is a grid of `tasks` row bands (multiples
 * of {@link MR} rows) times `tasksN` column bands (multiples of {@link NR} columns); task `t` computes
 * row band `t % tasks` of column band `t / tasks`, so a thin product (few rows) can still be split.
 */

import { ldd } from "./simd";
import { hsum, madd } from "./simd";

/** Slots of the GEMM parameter block. */
export const G_M: i32 = 0;
export const G_N: i32 = 1;
export const G_K: i32 = 2;
export const G_A: i32 = 3;
export const G_SAM: i32 = 4; // element stride of A between rows
export const G_SAK: i32 = 5; // element stride of A along K
export const G_B: i32 = 6;
export const G_SBK: i32 = 7; // element stride of B along K
export const G_SBN: i32 = 8; // element stride of B between columns
export const G_C: i32 = 9;
export const G_LDC: i32 = 10;
export const G_ACC: i32 = 11;
export const G_TASKS: i32 = 12; // row bands
export const G_TASKS_N: i32 = 13; // column bands (0 counts as 1)

/** Rows of the micro-kernel tile. */
export const MR: i32 = 6;
/** Columns of the micro-kernel tile. */
export const NR: i32 = 8;
const KC: i32 = 256;
const NC: i32 = 2048;

/** Scratch bytes one thread needs. */
export function gemmScratchBytes(): usize {
  return ((<usize> KC * <usize> NC + <usize> KC * <usize> MR + <usize> (MR * NR) + 64) << 2) + 64;
}

/** Pack columns n0..n0+nc-1 of rows k0..k0+kc-1 of B as `[panel][k][8]` (zero-padded last panel). */
function packB(bp: usize, b: usize, sbk: i32, sbn: i32, k0: i32, kc: i32, n0: i32, nc: i32): void {
  const panels = (nc + 7) >> 3;
  for (let p = 0; p < panels; p++) {
    const dst = bp + ((<usize> p * <usize> kc * 8) << 2);
    const j0 = n0 + p * 8;
    const w = min(8, n0 + nc - j0);
    if (w == 8 && sbn == 1) {
      let src = b + ((<usize> k0 * <usize> sbk + <usize> j0) << 2);
      const step = <usize> sbk << 2;
      let d = dst;
      for (let k = 0; k < kc; k++) {
        v128.store(d, v128.load(src));
        v128.store(d, v128.load(src, 16), 16);
        src += step;
        d += 32;
      }
    } else {
      for (let k = 0; k < kc; k++) {
        const d = dst + ((<usize> k * 8) << 2);
        const rowb = b + ((<usize> (k0 + k) * <usize> sbk) << 2);
        for (let j = 0; j < 8; j++) {
          store<f32>(
            d + (<usize> j << 2),
            j < w ? load<f32>(rowb + ((<usize> (j0 + j) * <usize> sbn) << 2)) : 0,
          );
        }
      }
    }
  }
}

/** Pack rows i0..i0+rows-1 (rows <= MR), columns k0..k0+kc-1 of A as `[k][MR]` (zero-padded rows). */
function packA(ap: usize, a: usize, sam: i32, sak: i32, i0: i32, rows: i32, k0: i32, kc: i32): void {
  for (let r = 0; r < MR; r++) {
    let d = ap + (<usize> r << 2);
    if (r < rows) {
      let src = a + ((<usize> (i0 + r) * <usize> sam + <usize> k0 * <usize> sak) << 2);
      const step = <usize> sak << 2;
      for (let k = 0; k < kc; k++) {
        store<f32>(d, load<f32>(src));
        src += step;
        d += <usize> MR << 2;
      }
    } else {
      for (let k = 0; k < kc; k++) {
        store<f32>(d, 0);
        d += <usize> MR << 2;
      }
    }
  }
}

/**
 * The 6 x 8 tile `dst (+)= Apanel Bpanel` over `kc` steps; `dst` rows are `ldc` bytes apart.
 * Pointers advance instead of being recomputed, and every load uses an immediate offset.
 */
function kernel6x8(pa: usize, pb: usize, kc: i32, dst: usize, ldc: usize, add: bool): void {
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  let c40 = f32x4.splat(0), c41 = f32x4.splat(0);
  let c50 = f32x4.splat(0), c51 = f32x4.splat(0);
  const end = pb + ((<usize> kc * 8) << 2);
  while (pb < end) {
    const b0 = v128.load(pb);
    const b1 = v128.load(pb, 16);
    let a = v128.load32_splat(pa);
    c00 = madd(a, b0, c00);
    c01 = madd(a, b1, c01);
    a = v128.load32_splat(pa, 4);
    c10 = madd(a, b0, c10);
    c11 = madd(a, b1, c11);
    a = v128.load32_splat(pa, 8);
    c20 = madd(a, b0, c20);
    c21 = madd(a, b1, c21);
    a = v128.load32_splat(pa, 12);
    c30 = madd(a, b0, c30);
    c31 = madd(a, b1, c31);
    a = v128.load32_splat(pa, 16);
    c40 = madd(a, b0, c40);
    c41 = madd(a, b1, c41);
    a = v128.load32_splat(pa, 20);
    c50 = madd(a, b0, c50);
    c51 = madd(a, b1, c51);
    pa += 24;
    pb += 32;
  }
  let d = dst;
  if (add) {
    c00 = f32x4.add(c00, v128.load(d));
    c01 = f32x4.add(c01, v128.load(d, 16));
  }
  v128.store(d, c00);
  v128.store(d, c01, 16);
  d += ldc;
  if (add) {
    c10 = f32x4.add(c10, v128.load(d));
    c11 = f32x4.add(c11, v128.load(d, 16));
  }
  v128.store(d, c10);
  v128.store(d, c11, 16);
  d += ldc;
  if (add) {
    c20 = f32x4.add(c20, v128.load(d));
    c21 = f32x4.add(c21, v128.load(d, 16));
  }
  v128.store(d, c20);
  v128.store(d, c21, 16);
  d += ldc;
  if (add) {
    c30 = f32x4.add(c30, v128.load(d));
    c31 = f32x4.add(c31, v128.load(d, 16));
  }
  v128.store(d, c30);
  v128.store(d, c31, 16);
  d += ldc;
  if (add) {
    c40 = f32x4.add(c40, v128.load(d));
    c41 = f32x4.add(c41, v128.load(d, 16));
  }
  v128.store(d, c40);
  v128.store(d, c41, 16);
  d += ldc;
  if (add) {
    c50 = f32x4.add(c50, v128.load(d));
    c51 = f32x4.add(c51, v128.load(d, 16));
  }
  v128.store(d, c50);
  v128.store(d, c51, 16);
}

/** `C[i0.., j0..] (+)= tile` for a partial tile (`rows` x `w` of the MR x NR tile at `tile`). */
function mergeTile(c: usize, ldc: i32, i0: i32, j0: i32, rows: i32, w: i32, tile: usize, add: bool): void {
  for (let r = 0; r < rows; r++) {
    const cr = c + ((<usize> (i0 + r) * <usize> ldc + <usize> j0) << 2);
    const tr = tile + ((<usize> (r * NR)) << 2);
    for (let j = 0; j < w; j++) {
      const cp = cr + (<usize> j << 2);
      const v = load<f32>(tr + (<usize> j << 2));
      store<f32>(cp, add ? load<f32>(cp) + v : v);
    }
  }
}

/** `C[r0..r1, c0..c1] = 0` unless accumulating (K = 0). */
function zeroBlock(c: usize, ldc: i32, r0: i32, r1: i32, c0: i32, c1: i32): void {
  for (let i = r0; i < r1; i++) {
    for (let j = c0; j < c1; j++) store<f32>(c + ((<usize> i * <usize> ldc + <usize> j) << 2), 0);
  }
}

/** Row bands of at most this many rows skip the packed kernel (decoding-style products). */
const THIN_ROWS: i32 = 2;

/**
 * `c[j0..j1] (+)= a B[:, j0..j1]` for one row `a` (element stride `sak`) and a row-major B (`sbk` floats
 * between rows): 32 columns at a time in 8 accumulators (enough independent FMA chains), then 4, then 1.
 */
function rowTimesB(
  c: usize,
  a: usize,
  sak: i32,
  b: usize,
  sbk: i32,
  K: i32,
  j0: i32,
  j1: i32,
  add: bool,
): void {
  const as = <usize> sak << 2;
  const bs = <usize> sbk << 2;
  let j = j0;
  for (; j + 32 <= j1; j += 32) {
    let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
    let c4 = f32x4.splat(0), c5 = f32x4.splat(0), c6 = f32x4.splat(0), c7 = f32x4.splat(0);
    let ap = a;
    let bp = b + (<usize> j << 2);
    for (let k = 0; k < K; k++) {
      const av = v128.load32_splat(ap);
      c0 = madd(av, v128.load(bp), c0);
      c1 = madd(av, v128.load(bp, 16), c1);
      c2 = madd(av, v128.load(bp, 32), c2);
      c3 = madd(av, v128.load(bp, 48), c3);
      c4 = madd(av, v128.load(bp, 64), c4);
      c5 = madd(av, v128.load(bp, 80), c5);
      c6 = madd(av, v128.load(bp, 96), c6);
      c7 = madd(av, v128.load(bp, 112), c7);
      ap += as;
      bp += bs;
    }
    const cp = c + (<usize> j << 2);
    if (add) {
      c0 = f32x4.add(c0, v128.load(cp));
      c1 = f32x4.add(c1, v128.load(cp, 16));
      c2 = f32x4.add(c2, v128.load(cp, 32));
      c3 = f32x4.add(c3, v128.load(cp, 48));
      c4 = f32x4.add(c4, v128.load(cp, 64));
      c5 = f32x4.add(c5, v128.load(cp, 80));
      c6 = f32x4.add(c6, v128.load(cp, 96));
      c7 = f32x4.add(c7, v128.load(cp, 112));
    }
    v128.store(cp, c0);
    v128.store(cp, c1, 16);
    v128.store(cp, c2, 32);
    v128.store(cp, c3, 48);
    v128.store(cp, c4, 64);
    v128.store(cp, c5, 80);
    v128.store(cp, c6, 96);
    v128.store(cp, c7, 112);
  }
  for (; j + 4 <= j1; j += 4) {
    let c0 = f32x4.splat(0);
    let ap = a;
    let bp = b + (<usize> j << 2);
    for (let k = 0; k < K; k++) {
      c0 = madd(v128.load32_splat(ap), v128.load(bp), c0);
      ap += as;
      bp += bs;
    }
    const cp = c + (<usize> j << 2);
    v128.store(cp, add ? f32x4.add(c0, v128.load(cp)) : c0);
  }
  for (; j < j1; j++) {
    let s: f32 = 0;
    let ap = a;
    let bp = b + (<usize> j << 2);
    for (let k = 0; k < K; k++) {
      s += load<f32>(ap) * load<f32>(bp);
      ap += as;
      bp += bs;
    }
    const cp = c + (<usize> j << 2);
    store<f32>(cp, add ? load<f32>(cp) + s : s);
  }
}

/** `*cp (+)= v`. */
function storeSum(cp: usize, v: f32, add: bool): void {
  store<f32>(cp, add ? load<f32>(cp) + v : v);
}

/**
 * `c[j] (+)= dot(a, bt_j)` for `j = j0..j1-1`, with `a` and every row `bt_j` of the transposed B contiguous
 * (`sbn` floats between rows): four columns at a time share each vector of `a`.
 */
function rowDotsBt(c: usize, a: usize, bt: usize, sbn: i32, K: i32, j0: i32, j1: i32, add: bool): void {
  const rs = <usize> sbn << 2;
  const k4 = K & ~3;
  let j = j0;
  for (; j < j1; j += 4) {
    const cols = min(4, j1 - j);
    const b0 = bt + (<usize> j * rs);
    const b1 = cols > 1 ? b0 + rs : b0;
    const b2 = cols > 2 ? b1 + rs : b1;
    const b3 = cols > 3 ? b2 + rs : b2;
    let d0 = f32x4.splat(0), d1 = f32x4.splat(0), d2 = f32x4.splat(0), d3 = f32x4.splat(0);
    for (let k = 0; k < k4; k += 4) {
      const o = <usize> k << 2;
      const av = v128.load(a + o);
      d0 = madd(av, v128.load(b0 + o), d0);
      d1 = madd(av, v128.load(b1 + o), d1);
      d2 = madd(av, v128.load(b2 + o), d2);
      d3 = madd(av, v128.load(b3 + o), d3);
    }
    let s0 = hsum(d0), s1 = hsum(d1), s2 = hsum(d2), s3 = hsum(d3);
    for (let k = k4; k < K; k++) {
      const o = <usize> k << 2;
      const ak = load<f32>(a + o);
      s0 += ak * load<f32>(b0 + o);
      s1 += ak * load<f32>(b1 + o);
      s2 += ak * load<f32>(b2 + o);
      s3 += ak * load<f32>(b3 + o);
    }
    const cp = c + (<usize> j << 2);
    storeSum(cp, s0, add);
    if (cols > 1) storeSum(cp + 4, s1, add);
    if (cols > 2) storeSum(cp + 8, s2, add);
    if (cols > 3) storeSum(cp + 12, s3, add);
  }
}

/** Start of band `i` of `bands` over `units` blocks of `unit` items, clipped to `total`. */
function bandStart(i: i32, bands: i32, units: i32, unit: i32, total: i32): i32 {
  const per = (units + bands - 1) / bands;
  return min(total, i * per * unit);
}

/** One task (a row band x column band of C): the kernel dispatched per task. */
export function gemm_f32(params: usize, task: i32, scratch: usize): void {
  const M = <i32> ldd(params, G_M);
  const N = <i32> ldd(params, G_N);
  const K = <i32> ldd(params, G_K);
  const a = <usize> ldd(params, G_A);
  const sam = <i32> ldd(params, G_SAM);
  const sak = <i32> ldd(params, G_SAK);
  const b = <usize> ldd(params, G_B);
  const sbk = <i32> ldd(params, G_SBK);
  const sbn = <i32> ldd(params, G_SBN);
  const c = <usize> ldd(params, G_C);
  const ldc = <i32> ldd(params, G_LDC);
  const acc = ldd(params, G_ACC) != 0;
  const tasksM = max(1, <i32> ldd(params, G_TASKS));
  const tasksN = max(1, <i32> ldd(params, G_TASKS_N));
  const tm = task % tasksM;
  const tn = task / tasksM;
  const blocksM = (M + MR - 1) / MR;
  const blocksN = (N + NR - 1) / NR;
  const r0 = bandStart(tm, tasksM, blocksM, MR, M);
  const r1 = bandStart(tm + 1, tasksM, blocksM, MR, M);
  const cb0 = bandStart(tn, tasksN, blocksN, NR, N);
  const cb1 = bandStart(tn + 1, tasksN, blocksN, NR, N);
  if (r0 >= r1 || cb0 >= cb1) return;
  const bp = (scratch + 63) & ~(<usize> 63);
  const ap = bp + ((<usize> KC * <usize> NC) << 2);
  const tile = ap + ((<usize> KC * <usize> MR) << 2);
  if (K == 0) {
    if (!acc) zeroBlock(c, ldc, r0, r1, cb0, cb1);
    return;
  }
  if (r1 - r0 <= THIN_ROWS && (sbn == 1 || (sbk == 1 && sak == 1))) {
    // a thin band: packing B (read once per row) would cost as much as the product itself
    for (let i = r0; i < r1; i++) {
      const ci = c + ((<usize> i * <usize> ldc) << 2);
      const ai = a + ((<usize> i * <usize> sam) << 2);
      if (sbn == 1) rowTimesB(ci, ai, sak, b, sbk, K, cb0, cb1, acc);
      else rowDotsBt(ci, ai, b, sbn, K, cb0, cb1, acc);
    }
    return;
  }
  const ldcb = <usize> ldc << 2;
  for (let n0 = cb0; n0 < cb1; n0 += NC) {
    const nc = min(NC, cb1 - n0);
    const panels = (nc + 7) >> 3;
    for (let k0 = 0; k0 < K; k0 += KC) {
      const kc = min(KC, K - k0);
      const add = acc || k0 > 0;
      const panelBytes = (<usize> kc * 8) << 2;
      packB(bp, b, sbk, sbn, k0, kc, n0, nc);
      for (let i0 = r0; i0 < r1; i0 += MR) {
        const rows = min(MR, r1 - i0);
        packA(ap, a, sam, sak, i0, rows, k0, kc);
        const crow = c + ((<usize> i0 * <usize> ldc) << 2);
        for (let p = 0; p < panels; p++) {
          const j0 = n0 + p * 8;
          const w = min(8, n0 + nc - j0);
          const bpp = bp + <usize> p * panelBytes;
          if (rows == MR && w == NR) {
            kernel6x8(ap, bpp, kc, crow + (<usize> j0 << 2), ldcb, add);
          } else {
            kernel6x8(ap, bpp, kc, tile, <usize> NR << 2, false);
            mergeTile(c, ldc, i0, j0, rows, w, tile, add);
          }
        }
      }
    }
  }
}
