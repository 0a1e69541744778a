/**
 * SGEMM: `C[M, N] (+)= A[M, K] B[K, N]` with arbitrary element strides for A and B (so both
 * transposes are strides), register-blocked 4 x 8 micro-kernel on f32x4 with packed panels of A
 * (4 rows) and B (8 columns), K blocked by 256 and N by 2048. Tails (M, N, K not multiples of the
 * block) are zero-padded in the packs and written back through a scalar path.
 *
 * Parameter block (float64 slots): see G_* below. A task computes a band of rows; the TypeScript
 * side splits M into `tasks` bands (multiples of 4).
 */

import { ldd } from "./simd";
import { madd } from "./simd";

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
export const G_TASKS: i32 = 12;

const KC: i32 = 256;
const NC: i32 = 2048;

/** Scratch bytes one thread needs. */
export function gemmScratchBytes(): usize {
  return ((<usize> KC * <usize> NC + <usize> KC * 4 + 64) << 2) + 64;
}

function packB(bp: usize, b: usize, sbk: i32, sbn: i32, k0: i32, kc: i32, n0: i32, nc: i32): void {
  const panels = (nc + 7) >> 3;
  for (let p = 0; p < panels; p++) {
    const dst = bp + ((<usize> p * <usize> kc * 8) << 2);
    const j0 = n0 + p * 8;
    const w = min(8, n0 + nc - j0);
    if (w == 8 && sbn == 1) {
      for (let k = 0; k < kc; k++) {
        const src = b + ((<usize> (k0 + k) * <usize> sbk + <usize> j0) << 2);
        const d = dst + ((<usize> k * 8) << 2);
        v128.store(d, v128.load(src));
        v128.store(d + 16, v128.load(src + 16));
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

function packA(ap: usize, a: usize, sam: i32, sak: i32, i0: i32, rows: i32, k0: i32, kc: i32): void {
  for (let r = 0; r < 4; r++) {
    if (r < rows) {
      const rowa = a + ((<usize> (i0 + r) * <usize> sam + <usize> k0 * <usize> sak) << 2);
      for (let k = 0; k < kc; k++) {
        store<f32>(ap + ((<usize> (k * 4 + r)) << 2), load<f32>(rowa + ((<usize> k * <usize> sak) << 2)));
      }
    } else {
      for (let k = 0; k < kc; k++) store<f32>(ap + ((<usize> (k * 4 + r)) << 2), 0);
    }
  }
}

/** One band of rows of C: the kernel dispatched per task. */
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
  const tasks = <i32> ldd(params, G_TASKS);
  const blocks = (M + 3) >> 2;
  const per = (blocks + tasks - 1) / tasks;
  const r0 = task * per * 4;
  const r1 = min(M, (task + 1) * per * 4);
  if (r0 >= r1) return;
  const bp = (scratch + 63) & ~(<usize> 63);
  const ap = bp + ((<usize> KC * <usize> NC) << 2);
  const tile = ap + ((<usize> KC * 4) << 2);
  if (K == 0) {
    if (!acc) {
      for (let i = r0; i < r1; i++) {
        for (let j = 0; j < N; j++) store<f32>(c + ((<usize> i * <usize> ldc + <usize> j) << 2), 0);
      }
    }
    return;
  }
  for (let n0 = 0; n0 < N; n0 += NC) {
    const nc = min(NC, N - n0);
    for (let k0 = 0; k0 < K; k0 += KC) {
      const kc = min(KC, K - k0);
      const add = acc || k0 > 0;
      packB(bp, b, sbk, sbn, k0, kc, n0, nc);
      for (let i0 = r0; i0 < r1; i0 += 4) {
        const rows = min(4, r1 - i0);
        packA(ap, a, sam, sak, i0, rows, k0, kc);
        const panels = (nc + 7) >> 3;
        for (let p = 0; p < panels; p++) {
          const bpp = bp + ((<usize> p * <usize> kc * 8) << 2);
          let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
          let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
          let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
          let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
          for (let k = 0; k < kc; k++) {
            const bo = bpp + ((<usize> k * 8) << 2);
            const b0 = v128.load(bo);
            const b1 = v128.load(bo + 16);
            const ao = ap + ((<usize> k * 4) << 2);
            const a0 = v128.load32_splat(ao);
            const a1 = v128.load32_splat(ao + 4);
            const a2 = v128.load32_splat(ao + 8);
            const a3 = v128.load32_splat(ao + 12);
            c00 = madd(a0, b0, c00);
            c01 = madd(a0, b1, c01);
            c10 = madd(a1, b0, c10);
            c11 = madd(a1, b1, c11);
            c20 = madd(a2, b0, c20);
            c21 = madd(a2, b1, c21);
            c30 = madd(a3, b0, c30);
            c31 = madd(a3, b1, c31);
          }
          const j0 = n0 + p * 8;
          const w = min(8, n0 + nc - j0);
          if (rows == 4 && w == 8) {
            const cr0 = c + ((<usize> i0 * <usize> ldc + <usize> j0) << 2);
            const cr1 = cr0 + ((<usize> ldc) << 2);
            const cr2 = cr1 + ((<usize> ldc) << 2);
            const cr3 = cr2 + ((<usize> ldc) << 2);
            if (add) {
              c00 = f32x4.add(c00, v128.load(cr0));
              c01 = f32x4.add(c01, v128.load(cr0 + 16));
              c10 = f32x4.add(c10, v128.load(cr1));
              c11 = f32x4.add(c11, v128.load(cr1 + 16));
              c20 = f32x4.add(c20, v128.load(cr2));
              c21 = f32x4.add(c21, v128.load(cr2 + 16));
              c30 = f32x4.add(c30, v128.load(cr3));
              c31 = f32x4.add(c31, v128.load(cr3 + 16));
            }
            v128.store(cr0, c00);
            v128.store(cr0 + 16, c01);
            v128.store(cr1, c10);
            v128.store(cr1 + 16, c11);
            v128.store(cr2, c20);
            v128.store(cr2 + 16, c21);
            v128.store(cr3, c30);
            v128.store(cr3 + 16, c31);
          } else {
            v128.store(tile, c00);
            v128.store(tile + 16, c01);
            v128.store(tile + 32, c10);
            v128.store(tile + 48, c11);
            v128.store(tile + 64, c20);
            v128.store(tile + 80, c21);
            v128.store(tile + 96, c30);
            v128.store(tile + 112, c31);
            for (let r = 0; r < rows; r++) {
              for (let j = 0; j < w; j++) {
                const cp = c + ((<usize> (i0 + r) * <usize> ldc + <usize> (j0 + j)) << 2);
                const v = load<f32>(tile + ((<usize> (r * 8 + j)) << 2));
                store<f32>(cp, add ? load<f32>(cp) + v : v);
              }
            }
          }
        }
      }
    }
  }
}
