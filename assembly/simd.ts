/**
 * Small SIMD helpers shared by the kernels: fused multiply-add (relaxed where the build enables it),
 * horizontal sums and row operations over float32 arrays with a scalar tail (no length needs to be a
 * multiple of 4). Pointers are byte addresses in the imported shared memory.
 */

/** `a * b + c` per lane; `relaxed_madd` in the relaxed-SIMD build, mul + add otherwise. */

export function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(f32x4.mul(a, b), c);
}

/** `c - a * b` per lane; `relaxed_nmadd` in the relaxed-SIMD build, mul + sub otherwise. */

export function nmadd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_nmadd(a, b, c);
  return f32x4.sub(c, f32x4.mul(a, b));
}

/** Sum of the four lanes. */

export function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 2) +
    f32x4.extract_lane(v, 3);
}

/** `sum_j a[j] * b[j]` over `n` floats. */
export function dotF(a: usize, b: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> (j << 2);
    acc = madd(v128.load(a + o), v128.load(b + o), acc);
  }
  let s = hsum(acc);
  for (; j < n; j++) s += load<f32>(a + (<usize> j << 2)) * load<f32>(b + (<usize> j << 2));
  return s;
}

/** `y[j] += s * x[j]` over `n` floats. */
export function axpyF(y: usize, x: usize, s: f32, n: i32): void {
  const sv = f32x4.splat(s);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> (j << 2);
    v128.store(y + o, madd(sv, v128.load(x + o), v128.load(y + o)));
  }
  for (; j < n; j++) {
    const o = <usize> j << 2;
    store<f32>(y + o, load<f32>(y + o) + s * load<f32>(x + o));
  }
}

/** `sum_j x[j]^2` over `n` floats, accumulated in float64 (two f64x2 partial sums, then the tail). */
export function sumSquaresF64(x: usize, n: i32): f64 {
  let a0 = f64x2.splat(0);
  let a1 = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const p = x + (<usize> j << 2);
    const lo = f64x2.promote_low_f32x4(v128.load64_zero(p));
    const hi = f64x2.promote_low_f32x4(v128.load64_zero(p, 8));
    a0 = f64x2.add(a0, f64x2.mul(lo, lo));
    a1 = f64x2.add(a1, f64x2.mul(hi, hi));
  }
  const a = f64x2.add(a0, a1);
  let s = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);
  for (; j < n; j++) {
    const u = <f64> load<f32>(x + (<usize> j << 2));
    s += u * u;
  }
  return s;
}

/** `sum_j a[j] * b[j]` over `n` floats, accumulated in float64 (two f64x2 partial sums, then the tail). */
export function dotF64(a: usize, b: usize, n: i32): f64 {
  let a0 = f64x2.splat(0);
  let a1 = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> j << 2;
    const lo = f64x2.promote_low_f32x4(v128.load64_zero(a + o));
    const hi = f64x2.promote_low_f32x4(v128.load64_zero(a + o, 8));
    a0 = f64x2.add(a0, f64x2.mul(lo, f64x2.promote_low_f32x4(v128.load64_zero(b + o))));
    a1 = f64x2.add(a1, f64x2.mul(hi, f64x2.promote_low_f32x4(v128.load64_zero(b + o, 8))));
  }
  const acc = f64x2.add(a0, a1);
  let s = f64x2.extract_lane(acc, 0) + f64x2.extract_lane(acc, 1);
  for (; j < n; j++) {
    const o = <usize> j << 2;
    s += <f64> load<f32>(a + o) * <f64> load<f32>(b + o);
  }
  return s;
}

/** `sum_j a[j]` over `n` floats, accumulated in float64 (two f64x2 partial sums, then the tail). */
export function sumF64(a: usize, n: i32): f64 {
  let a0 = f64x2.splat(0);
  let a1 = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> j << 2;
    a0 = f64x2.add(a0, f64x2.promote_low_f32x4(v128.load64_zero(a + o)));
    a1 = f64x2.add(a1, f64x2.promote_low_f32x4(v128.load64_zero(a + o, 8)));
  }
  const acc = f64x2.add(a0, a1);
  let s = f64x2.extract_lane(acc, 0) + f64x2.extract_lane(acc, 1);
  for (; j < n; j++) s += <f64> load<f32>(a + (<usize> j << 2));
  return s;
}

/** `dst[j] = f32(r * f64(g[j]) + c * f64(src[j]))` over `n` floats (float64 arithmetic, one rounding). */
export function combineF64(dst: usize, g: usize, r: f64, src: usize, c: f64, n: i32): void {
  const rv = f64x2.splat(r);
  const cv = f64x2.splat(c);
  let j = 0;
  for (; j + 2 <= n; j += 2) {
    const o = <usize> j << 2;
    const gv = f64x2.promote_low_f32x4(v128.load64_zero(g + o));
    const sv = f64x2.promote_low_f32x4(v128.load64_zero(src + o));
    const v = f64x2.add(f64x2.mul(rv, gv), f64x2.mul(cv, sv));
    v128.store64_lane(dst + o, f32x4.demote_f64x2_zero(v), 0);
  }
  for (; j < n; j++) {
    const o = <usize> j << 2;
    store<f32>(dst + o, <f32> (r * <f64> load<f32>(g + o) + c * <f64> load<f32>(src + o)));
  }
}

/** `dst[j] = f32(f64(src[j]) * r)` over `n` floats (the product rounded once, as in scalar code). */
export function scaleF64(dst: usize, src: usize, r: f64, n: i32): void {
  const rv = f64x2.splat(r);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize> j << 2;
    const lo = f64x2.mul(f64x2.promote_low_f32x4(v128.load64_zero(src + o)), rv);
    const hi = f64x2.mul(f64x2.promote_low_f32x4(v128.load64_zero(src + o, 8)), rv);
    v128.store64_lane(dst + o, f32x4.demote_f64x2_zero(lo), 0);
    v128.store64_lane(dst + o, f32x4.demote_f64x2_zero(hi), 0, 8);
  }
  for (; j < n; j++) {
    const o = <usize> j << 2;
    store<f32>(dst + o, <f32> (<f64> load<f32>(src + o) * r));
  }
}

/** `out[j] = b[j] * y[j] - a[j] * p[j]` over `n` floats (`a == 0`: `out = b * y`, p unread). */
export function mulSubF(out: usize, b: usize, y: usize, a: usize, p: usize, n: i32): void {
  let j = 0;
  if (a == 0) {
    for (; j + 4 <= n; j += 4) {
      const o = <usize> j << 2;
      v128.store(out + o, f32x4.mul(v128.load(b + o), v128.load(y + o)));
    }
    for (; j < n; j++) {
      const o = <usize> j << 2;
      store<f32>(out + o, load<f32>(b + o) * load<f32>(y + o));
    }
    return;
  }
  for (; j + 4 <= n; j += 4) {
    const o = <usize> j << 2;
    const by = f32x4.mul(v128.load(b + o), v128.load(y + o));
    v128.store(out + o, f32x4.sub(by, f32x4.mul(v128.load(a + o), v128.load(p + o))));
  }
  for (; j < n; j++) {
    const o = <usize> j << 2;
    store<f32>(out + o, load<f32>(b + o) * load<f32>(y + o) - load<f32>(a + o) * load<f32>(p + o));
  }
}

/** `y[j] = v` over `n` floats. */
export function fillF(y: usize, v: f32, n: i32): void {
  const sv = f32x4.splat(v);
  let j = 0;
  for (; j + 4 <= n; j += 4) v128.store(y + (<usize> j << 2), sv);
  for (; j < n; j++) store<f32>(y + (<usize> j << 2), v);
}

/** Copy `n` floats from `src` to `dst`. */
export function copyF(dst: usize, src: usize, n: i32): void {
  memory.copy(dst, src, <usize> n << 2);
}

/** Read float32 element `i` of the array at `p`. */

export function ldf(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize> i << 2));
}

/** Write float32 element `i` of the array at `p`. */

export function stf(p: usize, i: i32, v: f32): void {
  store<f32>(p + (<usize> i << 2), v);
}

/** Read float64 element `i` of the array at `p`. */

export function ldd(p: usize, i: i32): f64 {
  return load<f64>(p + (<usize> i << 3));
}

/** Write float64 element `i` of the array at `p`. */

export function std(p: usize, i: i32, v: f64): void {
  store<f64>(p + (<usize> i << 3), v);
}

/** Two float32 values at `p` as float64 lanes. */
export function load2(p: usize): v128 {
  return f64x2.promote_low_f32x4(v128.load64_zero(p));
}

/** Store both float64 lanes, each rounded to float32 (as a scalar `<f32>` cast rounds), at `p`. */
export function store2(p: usize, v: v128): void {
  v128.store64_lane(p, f32x4.demote_f64x2_zero(v), 0);
}

/** `p[0..1] += f32(v)`: each lane rounded to float32, then added in float32 (as the scalar code does). */
export function accumulate2(p: usize, v: v128): void {
  v128.store64_lane(p, f32x4.add(v128.load64_zero(p), f32x4.demote_f64x2_zero(v)), 0);
}
