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
