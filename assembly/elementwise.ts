/**
 * Element-wise ops over `n` float32 values (any `n`: SIMD body, scalar tail): add, mul, axpy, fill,
 * sum of squares, the activations sigmoid / softplus / silu with their backward, SwiGLU, and AdamW.
 * Backward ops accumulate into their gradients.
 */

import { sigmoidF64x2 } from "./exp_f64x2";
import { accumulate2, load2, madd, store2 } from "./simd";

function at(p: usize, i: i32): usize {
  return p + (<usize> i << 2);
}

/** `out = a + b`. */
export function add_f32(out: usize, a: usize, b: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(out, i), f32x4.add(v128.load(at(a, i)), v128.load(at(b, i))));
  for (; i < n; i++) store<f32>(at(out, i), load<f32>(at(a, i)) + load<f32>(at(b, i)));
}

/** `out = a * b`. */
export function mul_f32(out: usize, a: usize, b: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(out, i), f32x4.mul(v128.load(at(a, i)), v128.load(at(b, i))));
  for (; i < n; i++) store<f32>(at(out, i), load<f32>(at(a, i)) * load<f32>(at(b, i)));
}

/** `y += alpha * x`. */
export function axpy_f32(y: usize, x: usize, alpha: f32, n: i32): void {
  const av = f32x4.splat(alpha);
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(y, i), madd(av, v128.load(at(x, i)), v128.load(at(y, i))));
  for (; i < n; i++) store<f32>(at(y, i), load<f32>(at(y, i)) + alpha * load<f32>(at(x, i)));
}

/** `x = value`. */
export function fill_f32(x: usize, value: f32, n: i32): void {
  const v = f32x4.splat(value);
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(x, i), v);
  for (; i < n; i++) store<f32>(at(x, i), value);
}

/** `sum x^2`, accumulated in float64. */
export function sumsq_f32(x: usize, n: i32): f64 {
  let s: f64 = 0;
  for (let i = 0; i < n; i++) {
    const v = <f64> load<f32>(at(x, i));
    s += v * v;
  }
  return s;
}

/** The logistic function in float64, without overflow: `e^x / (1 + e^x)` for negative `x` (one exp). */
export function sigmoid(x: f64): f64 {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

function softplus(x: f64): f64 {
  return x > 20 ? x : (x < -20 ? Math.exp(x) : Math.log1p(Math.exp(x)));
}

/**
 * `out = scale * f(x)`; kind 0 sigmoid, 1 softplus, 2 silu. Sigmoid and silu run two lanes at a time
 * (exp_f64x2.ts), each lane computed exactly as the scalar tail computes it.
 */
export function act_forward_f32(kind: i32, out: usize, x: usize, scale: f32, n: i32): void {
  const s = <f64> scale;
  let i = 0;
  if (kind != 1) {
    const sv = f64x2.splat(s);
    for (; i + 2 <= n; i += 2) {
      const v = load2(at(x, i));
      const sg = sigmoidF64x2(v);
      store2(at(out, i), f64x2.mul(sv, kind == 0 ? sg : f64x2.mul(v, sg)));
    }
  }
  for (; i < n; i++) {
    const v = <f64> load<f32>(at(x, i));
    let y: f64;
    if (kind == 0) y = sigmoid(v);
    else if (kind == 1) y = softplus(v);
    else y = v * sigmoid(v);
    store<f32>(at(out, i), <f32> (s * y));
  }
}

/** `dx += dOut * scale * f'(x)` (two lanes at a time, as act_forward_f32). */
export function act_backward_f32(kind: i32, dx: usize, dOut: usize, x: usize, scale: f32, n: i32): void {
  const s = <f64> scale;
  const sv = f64x2.splat(s);
  const one = f64x2.splat(1);
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    const v = load2(at(x, i));
    const sg = sigmoidF64x2(v);
    let d: v128;
    if (kind == 0) d = f64x2.mul(sg, f64x2.sub(one, sg));
    else if (kind == 1) d = sg;
    else d = f64x2.mul(sg, f64x2.add(one, f64x2.mul(v, f64x2.sub(one, sg))));
    accumulate2(at(dx, i), f64x2.mul(f64x2.mul(load2(at(dOut, i)), sv), d));
  }
  for (; i < n; i++) {
    const v = <f64> load<f32>(at(x, i));
    const sg = sigmoid(v);
    let d: f64;
    if (kind == 0) d = sg * (1 - sg);
    else if (kind == 1) d = sg;
    else d = sg * (1 + v * (1 - sg));
    store<f32>(at(dx, i), load<f32>(at(dx, i)) + <f32> (<f64> load<f32>(at(dOut, i)) * s * d));
  }
}

/** `out = silu(gate) * up` (two lanes at a time, each as the scalar tail computes it). */
export function swiglu_forward_f32(out: usize, gate: usize, up: usize, n: i32): void {
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    const g = load2(at(gate, i));
    store2(at(out, i), f64x2.mul(f64x2.mul(g, sigmoidF64x2(g)), load2(at(up, i))));
  }
  for (; i < n; i++) {
    const g = <f64> load<f32>(at(gate, i));
    store<f32>(at(out, i), <f32> (g * sigmoid(g) * <f64> load<f32>(at(up, i))));
  }
}

/** `dGate += dOut * up * silu'(gate)`, `dUp += dOut * silu(gate)` (two lanes at a time, as above). */
export function swiglu_backward_f32(
  dGate: usize,
  dUp: usize,
  dOut: usize,
  gate: usize,
  up: usize,
  n: i32,
): void {
  const one = f64x2.splat(1);
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    const g = load2(at(gate, i));
    const u = load2(at(up, i));
    const d = load2(at(dOut, i));
    const sg = sigmoidF64x2(g);
    const slope = f64x2.add(one, f64x2.mul(g, f64x2.sub(one, sg)));
    accumulate2(at(dGate, i), f64x2.mul(f64x2.mul(f64x2.mul(d, u), sg), slope));
    accumulate2(at(dUp, i), f64x2.mul(f64x2.mul(d, g), sg));
  }
  for (; i < n; i++) {
    const g = <f64> load<f32>(at(gate, i));
    const u = <f64> load<f32>(at(up, i));
    const d = <f64> load<f32>(at(dOut, i));
    const sg = sigmoid(g);
    store<f32>(at(dGate, i), load<f32>(at(dGate, i)) + <f32> (d * u * sg * (1 + g * (1 - sg))));
    store<f32>(at(dUp, i), load<f32>(at(dUp, i)) + <f32> (d * g * sg));
  }
}

/**
 * One AdamW step (decoupled weight decay, bias-corrected): `g = grad * gradScale`,
 * `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`, `p -= lr (mhat / (sqrt(vhat) + eps) + wd p)`.
 */
export function adamw_f32(
  p: usize,
  grad: usize,
  m: usize,
  v: usize,
  n: i32,
  lr: f64,
  b1: f64,
  b2: f64,
  eps: f64,
  wd: f64,
  step: f64,
  gradScale: f64,
): void {
  const c1 = 1 - Math.pow(b1, step);
  const c2 = 1 - Math.pow(b2, step);
  // two lanes at a time, each lane the scalar tail's arithmetic
  const b1v = f64x2.splat(b1);
  const b2v = f64x2.splat(b2);
  const rest1 = f64x2.splat(1 - b1);
  const rest2 = f64x2.splat(1 - b2);
  const c1v = f64x2.splat(c1);
  const c2v = f64x2.splat(c2);
  const scale = f64x2.splat(gradScale);
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    const g = f64x2.mul(load2(at(grad, i)), scale);
    const mi = f64x2.add(f64x2.mul(b1v, load2(at(m, i))), f64x2.mul(rest1, g));
    const vi = f64x2.add(f64x2.mul(b2v, load2(at(v, i))), f64x2.mul(f64x2.mul(rest2, g), g));
    store2(at(m, i), mi);
    store2(at(v, i), vi);
    const pi = load2(at(p, i));
    const denominator = f64x2.add(f64x2.sqrt(f64x2.div(vi, c2v)), f64x2.splat(eps));
    const update = f64x2.add(f64x2.div(f64x2.div(mi, c1v), denominator), f64x2.mul(f64x2.splat(wd), pi));
    store2(at(p, i), f64x2.sub(pi, f64x2.mul(f64x2.splat(lr), update)));
  }
  for (; i < n; i++) {
    const g = <f64> load<f32>(at(grad, i)) * gradScale;
    const mi = b1 * <f64> load<f32>(at(m, i)) + (1 - b1) * g;
    const vi = b2 * <f64> load<f32>(at(v, i)) + (1 - b2) * g * g;
    store<f32>(at(m, i), <f32> mi);
    store<f32>(at(v, i), <f32> vi);
    const pi = <f64> load<f32>(at(p, i));
    store<f32>(at(p, i), <f32> (pi - lr * ((mi / c1) / (Math.sqrt(vi / c2) + eps) + wd * pi)));
  }
}
