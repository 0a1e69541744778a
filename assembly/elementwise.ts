/**
 * Element-wise ops over `n` float32 values (any `n`: SIMD body, scalar tail): add, mul, axpy, fill,
 * sum of squares, the activations sigmoid / softplus / silu with their backward, SwiGLU, and AdamW.
 * Backward ops accumulate into their gradients.
 */

import { madd } from "./simd";

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

function sigmoid(x: f64): f64 {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

function softplus(x: f64): f64 {
  return x > 20 ? x : (x < -20 ? Math.exp(x) : Math.log1p(Math.exp(x)));
}

/** `out = scale * f(x)`; kind 0 sigmoid, 1 softplus, 2 silu. */
export function act_forward_f32(kind: i32, out: usize, x: usize, scale: f32, n: i32): void {
  const s = <f64> scale;
  for (let i = 0; i < n; i++) {
    const v = <f64> load<f32>(at(x, i));
    let y: f64;
    if (kind == 0) y = sigmoid(v);
    else if (kind == 1) y = softplus(v);
    else y = v * sigmoid(v);
    store<f32>(at(out, i), <f32> (s * y));
  }
}

/** `dx += dOut * scale * f'(x)`. */
export function act_backward_f32(kind: i32, dx: usize, dOut: usize, x: usize, scale: f32, n: i32): void {
  const s = <f64> scale;
  for (let i = 0; i < n; i++) {
    const v = <f64> load<f32>(at(x, i));
    const sg = sigmoid(v);
    let d: f64;
    if (kind == 0) d = sg * (1 - sg);
    else if (kind == 1) d = sg;
    else d = sg * (1 + v * (1 - sg));
    store<f32>(at(dx, i), load<f32>(at(dx, i)) + <f32> (<f64> load<f32>(at(dOut, i)) * s * d));
  }
}

/** `out = silu(gate) * up`. */
export function swiglu_forward_f32(out: usize, gate: usize, up: usize, n: i32): void {
  for (let i = 0; i < n; i++) {
    const g = <f64> load<f32>(at(gate, i));
    store<f32>(at(out, i), <f32> (g * sigmoid(g) * <f64> load<f32>(at(up, i))));
  }
}

/** `dGate += dOut * up * silu'(gate)`, `dUp += dOut * silu(gate)`. */
export function swiglu_backward_f32(
  dGate: usize,
  dUp: usize,
  dOut: usize,
  gate: usize,
  up: usize,
  n: i32,
): void {
  for (let i = 0; i < n; i++) {
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
  for (let i = 0; i < n; i++) {
    const g = <f64> load<f32>(at(grad, i)) * gradScale;
    const mi = b1 * <f64> load<f32>(at(m, i)) + (1 - b1) * g;
    const vi = b2 * <f64> load<f32>(at(v, i)) + (1 - b2) * g * g;
    store<f32>(at(m, i), <f32> mi);
    store<f32>(at(v, i), <f32> vi);
    const pi = <f64> load<f32>(at(p, i));
    store<f32>(at(p, i), <f32> (pi - lr * ((mi / c1) / (Math.sqrt(vi / c2) + eps) + wd * pi)));
  }
}
