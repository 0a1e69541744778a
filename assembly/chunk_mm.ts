/**
 * Small float32 matrix products of the chunk-parallel form (fw_chunk.ts), f32x4 SIMD along the output
 * columns with scalar tails (no size needs to be a multiple of 4):
 *
 * - {@link mm}: `C (+)= A B` with `A` read through row and column strides, so `A^T` costs nothing
 *   (`C [m, n]`, `A [m, kd]`, `B [kd, n]` row-major with leading dimension `ldb`). Tiles of 4 rows x 8
 *   (then 4, then 1) columns keep their accumulators in registers while `k` streams past.
 * - {@link gram}: the lower triangle of `A B^T` (`B` given transposed), for the chunk's Gram matrices.
 * - {@link transpose}, {@link scaleRows}, {@link hadamard}: the glue between them.
 *
 * Strides and leading dimensions are in floats; pointers are byte addresses.
 */

import { madd } from "./simd";

/** `A` is dense. */
export const FULL: i32 = 0;
/** `A(i, k)` is zero for `k > i` (lower triangular): the `k` loop stops after the tile's last row. */
export const LOWER: i32 = 1;
/** `A(i, k)` is zero for `k < i` (upper triangular, e.g. the transpose of a lower one). */
export const UPPER: i32 = 2;

function at(p: usize, i: i32): usize {
  return p + (<usize> i << 2);
}

function ld(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize> i << 2));
}

/**
 * `C = A B` (or `C += A B` with `acc`): `A(i, k)` at `a + (i * ars + k * acs)`, `B[k, j]` at
 * `b + (k * ldb + j)`, `C[i, j]` at `c + (i * ldc + j)`; `tri` ({@link FULL}, {@link LOWER},
 * {@link UPPER}) skips the known-zero part of `A`.
 */
export function mm(
  c: usize,
  ldc: i32,
  a: usize,
  ars: i32,
  acs: i32,
  b: usize,
  ldb: i32,
  m: i32,
  kd: i32,
  n: i32,
  acc: bool,
  tri: i32,
): void {
  let i = 0;
  for (; i + 4 <= m; i += 4) {
    const k0 = tri == UPPER ? i : 0;
    const k1 = tri == LOWER ? min(kd, i + 4) : kd;
    rows4(at(c, i * ldc), ldc, at(a, i * ars), ars, acs, b, ldb, k0, k1, n, acc);
  }
  for (; i < m; i++) {
    const k0 = tri == UPPER ? i : 0;
    const k1 = tri == LOWER ? min(kd, i + 1) : kd;
    row1(at(c, i * ldc), at(a, i * ars), acs, b, ldb, k0, k1, n, acc);
  }
}

function put(p: usize, v: v128, acc: bool): void {
  v128.store(p, acc ? f32x4.add(v128.load(p), v) : v);
}

function putS(p: usize, v: f32, acc: bool): void {
  store<f32>(p, acc ? load<f32>(p) + v : v);
}

/** Four rows of {@link mm}: `c`, `a` point at the first row. */
function rows4(
  c: usize,
  ldc: i32,
  a: usize,
  ars: i32,
  acs: i32,
  b: usize,
  ldb: i32,
  k0: i32,
  k1: i32,
  n: i32,
  acc: bool,
): void {
  const ra = <usize> ars << 2;
  const rc = <usize> ldc << 2;
  const sa = <usize> acs << 2;
  const sb = <usize> ldb << 2;
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    let c00 = f32x4.splat(0);
    let c01 = f32x4.splat(0);
    let c10 = f32x4.splat(0);
    let c11 = f32x4.splat(0);
    let c20 = f32x4.splat(0);
    let c21 = f32x4.splat(0);
    let c30 = f32x4.splat(0);
    let c31 = f32x4.splat(0);
    let ap = at(a, k0 * acs);
    let bp = at(b, k0 * ldb + j);
    for (let k = k0; k < k1; k++) {
      const b0 = v128.load(bp);
      const b1 = v128.load(bp + 16);
      const a0 = v128.load32_splat(ap);
      const a1 = v128.load32_splat(ap + ra);
      const a2 = v128.load32_splat(ap + 2 * ra);
      const a3 = v128.load32_splat(ap + 3 * ra);
      c00 = madd(a0, b0, c00);
      c01 = madd(a0, b1, c01);
      c10 = madd(a1, b0, c10);
      c11 = madd(a1, b1, c11);
      c20 = madd(a2, b0, c20);
      c21 = madd(a2, b1, c21);
      c30 = madd(a3, b0, c30);
      c31 = madd(a3, b1, c31);
      ap += sa;
      bp += sb;
    }
    const cp = at(c, j);
    put(cp, c00, acc);
    put(cp + 16, c01, acc);
    put(cp + rc, c10, acc);
    put(cp + rc + 16, c11, acc);
    put(cp + 2 * rc, c20, acc);
    put(cp + 2 * rc + 16, c21, acc);
    put(cp + 3 * rc, c30, acc);
    put(cp + 3 * rc + 16, c31, acc);
  }
  for (; j + 4 <= n; j += 4) {
    let c0 = f32x4.splat(0);
    let c1 = f32x4.splat(0);
    let c2 = f32x4.splat(0);
    let c3 = f32x4.splat(0);
    let ap = at(a, k0 * acs);
    let bp = at(b, k0 * ldb + j);
    for (let k = k0; k < k1; k++) {
      const b0 = v128.load(bp);
      c0 = madd(v128.load32_splat(ap), b0, c0);
      c1 = madd(v128.load32_splat(ap + ra), b0, c1);
      c2 = madd(v128.load32_splat(ap + 2 * ra), b0, c2);
      c3 = madd(v128.load32_splat(ap + 3 * ra), b0, c3);
      ap += sa;
      bp += sb;
    }
    const cp = at(c, j);
    put(cp, c0, acc);
    put(cp + rc, c1, acc);
    put(cp + 2 * rc, c2, acc);
    put(cp + 3 * rc, c3, acc);
  }
  for (; j < n; j++) {
    let s0: f32 = 0;
    let s1: f32 = 0;
    let s2: f32 = 0;
    let s3: f32 = 0;
    for (let k = k0; k < k1; k++) {
      const ap = at(a, k * acs);
      const bk = ld(b, k * ldb + j);
      s0 += load<f32>(ap) * bk;
      s1 += load<f32>(ap + ra) * bk;
      s2 += load<f32>(ap + 2 * ra) * bk;
      s3 += load<f32>(ap + 3 * ra) * bk;
    }
    const cp = at(c, j);
    putS(cp, s0, acc);
    putS(cp + rc, s1, acc);
    putS(cp + 2 * rc, s2, acc);
    putS(cp + 3 * rc, s3, acc);
  }
}

/** One row of {@link mm}. */
function row1(c: usize, a: usize, acs: i32, b: usize, ldb: i32, k0: i32, k1: i32, n: i32, acc: bool): void {
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    let c0 = f32x4.splat(0);
    let c1 = f32x4.splat(0);
    let ap = at(a, k0 * acs);
    let bp = at(b, k0 * ldb + j);
    const sa = <usize> acs << 2;
    const sb = <usize> ldb << 2;
    for (let k = k0; k < k1; k++) {
      const av = v128.load32_splat(ap);
      c0 = madd(av, v128.load(bp), c0);
      c1 = madd(av, v128.load(bp + 16), c1);
      ap += sa;
      bp += sb;
    }
    put(at(c, j), c0, acc);
    put(at(c, j) + 16, c1, acc);
  }
  for (; j + 4 <= n; j += 4) {
    let c0 = f32x4.splat(0);
    for (let k = k0; k < k1; k++) c0 = madd(f32x4.splat(ld(a, k * acs)), v128.load(at(b, k * ldb + j)), c0);
    put(at(c, j), c0, acc);
  }
  for (; j < n; j++) {
    let s: f32 = 0;
    for (let k = k0; k < k1; k++) s += ld(a, k * acs) * ld(b, k * ldb + j);
    putS(at(c, j), s, acc);
  }
}

/**
 * `M[i, j] = A_i . B_j` for `j < i` (`strict`) or `j <= i`, and 0 above, for rows `i < n` of length
 * `d`. `B` comes transposed (`bt [d, n]`, leading dimension `ldbt`) so the products run as 4-row tiles
 * of {@link mm} that stop at the diagonal. `M` has leading dimension `ldm`, `A` row stride `lda`.
 */
export function gram(
  m: usize,
  ldm: i32,
  a: usize,
  lda: i32,
  bt: usize,
  ldbt: i32,
  n: i32,
  d: i32,
  strict: bool,
): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) rows4(at(m, i * ldm), ldm, at(a, i * lda), lda, 1, bt, ldbt, 0, d, i + 4, false);
  for (; i < n; i++) row1(at(m, i * ldm), at(a, i * lda), 1, bt, ldbt, 0, d, i + 1, false);
  for (let r = 0; r < n; r++) {
    const j0 = strict ? r : r + 1;
    const j1 = min(n, (r & ~3) + 4);
    for (let j = j0; j < j1; j++) store<f32>(at(m, r * ldm + j), 0);
  }
}

/** `dst[j, i] = src[i, j]` for a dense `rows x cols` `src`; `dst` has leading dimension `ldd`. */
export function transpose(dst: usize, src: usize, rows: i32, cols: i32, ldd: i32): void {
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) store<f32>(at(dst, j * ldd + i), ld(src, i * cols + j));
  }
}

/** `dst_i = s[i] * src_i` for `n` rows of `d` floats (`s` float32, strides in floats). */
export function scaleRows(dst: usize, ldd: i32, src: usize, lds: i32, s: usize, n: i32, d: i32): void {
  for (let i = 0; i < n; i++) {
    const sv = f32x4.splat(ld(s, i));
    const di = at(dst, i * ldd);
    const si = at(src, i * lds);
    let j = 0;
    for (; j + 4 <= d; j += 4) v128.store(at(di, j), f32x4.mul(sv, v128.load(at(si, j))));
    for (; j < d; j++) store<f32>(at(di, j), ld(s, i) * ld(si, j));
  }
}

/** `dst[i, j] = x[i, j] * y[i, j]` on the lower triangle `j <= i < n` (leading dimension `ld`). */
export function hadamard(dst: usize, x: usize, y: usize, n: i32, ldm: i32): void {
  for (let i = 0; i < n; i++) {
    const r = i * ldm;
    let j = 0;
    for (; j + 4 <= i + 1; j += 4) {
      v128.store(at(dst, r + j), f32x4.mul(v128.load(at(x, r + j)), v128.load(at(y, r + j))));
    }
    for (; j <= i; j++) store<f32>(at(dst, r + j), ld(x, r + j) * ld(y, r + j));
  }
}

/** `y[j] *= s` over `n` floats. */
export function scaleF(y: usize, s: f32, n: i32): void {
  const sv = f32x4.splat(s);
  let j = 0;
  for (; j + 4 <= n; j += 4) v128.store(at(y, j), f32x4.mul(sv, v128.load(at(y, j))));
  for (; j < n; j++) store<f32>(at(y, j), s * ld(y, j));
}

/**
 * `e^x` per lane (Cephes expf: `2^n * p(r)` with `x = n ln 2 + r`, about 1 ulp); 0 below -87.3, where
 * the float32 result underflows.
 */
export function expF32x4(x: v128): v128 {
  const xc = f32x4.min(f32x4.max(x, f32x4.splat(-87.3)), f32x4.splat(88.3));
  const n = f32x4.floor(madd(xc, f32x4.splat(1.44269504088896341), f32x4.splat(0.5)));
  let r = madd(n, f32x4.splat(-0.693359375), xc);
  r = madd(n, f32x4.splat(2.12194440e-4), r);
  let p = f32x4.splat(1.9875691500e-4);
  p = madd(p, r, f32x4.splat(1.3981999507e-3));
  p = madd(p, r, f32x4.splat(8.3334519073e-3));
  p = madd(p, r, f32x4.splat(4.1665795894e-2));
  p = madd(p, r, f32x4.splat(1.6666665459e-1));
  p = madd(p, r, f32x4.splat(5.0000001201e-1));
  p = madd(p, f32x4.mul(r, r), f32x4.add(r, f32x4.splat(1)));
  const scale = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  const e = f32x4.mul(p, scale);
  return v128.and(e, f32x4.ge(x, f32x4.splat(-87.3)));
}

/** `y[j] = e^y[j]` over `n` floats ({@link expF32x4}; the tail through one lane of it). */
export function expF(y: usize, n: i32): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) v128.store(at(y, j), expF32x4(v128.load(at(y, j))));
  for (; j < n; j++) store<f32>(at(y, j), f32x4.extract_lane(expF32x4(f32x4.splat(ld(y, j))), 0));
}
