/**
 * Causal softmax attention with RoPE (the Transformer baseline): q, k, v, out `[B, T, H, D]`, lse
 * `[B, T, H]`. RoPE rotates the pairs `(i, i + D/2)` of q and k by `p * base^(-2i/D)` with `p` the
 * position inside the current sequence (a start flag restarts it and cuts attention); scores are
 * scaled by `1/sqrt(D)`. Scratch: 4 * T * D floats. Backward accumulates into dq, dk, dv.
 */

function ad(p: usize, i: i32): usize {
  return p + (<usize> i << 2);
}

let T_: i32 = 0;
let H_: i32 = 0;
let D_: i32 = 0;
let BASE: f64 = 10000;
let STARTS: usize = 0;

function row(t: i32, b: i32, h: i32): i32 {
  return ((b * T_ + t) * H_ + h) * D_;
}

/** Rotate `src` row (position p) into `dst`; `inverse` applies the transpose. */
function rope(dst: usize, src: usize, p: i32, inverse: bool): void {
  const D = D_;
  const half = D >> 1;
  for (let i = 0; i < half; i++) {
    const ang = <f64> p * Math.pow(BASE, -2.0 * <f64> i / <f64> D);
    const c = Math.cos(ang);
    const s = inverse ? -Math.sin(ang) : Math.sin(ang);
    const a = <f64> load<f32>(ad(src, i));
    const b = <f64> load<f32>(ad(src, i + half));
    store<f32>(ad(dst, i), <f32> (a * c - b * s));
    store<f32>(ad(dst, i + half), <f32> (a * s + b * c));
  }
  if (D & 1) store<f32>(ad(dst, D - 1), load<f32>(ad(src, D - 1)));
}

function setup(T: i32, H: i32, D: i32, base: f64, starts: usize): void {
  T_ = T;
  H_ = H;
  D_ = D;
  BASE = base;
  STARTS = starts;
}

function isStart(b: i32, t: i32): bool {
  return t == 0 || (STARTS != 0 && load<u8>(STARTS + <usize> (b * T_ + t)) != 0);
}

function dot(a: usize, b: usize, n: i32): f64 {
  let s: f64 = 0;
  for (let i = 0; i < n; i++) s += <f64> load<f32>(ad(a, i)) * <f64> load<f32>(ad(b, i));
  return s;
}

/** Rotate q and k of head (b, h) into Qr, Kr `[T, D]`. */
function rotateAll(qr: usize, kr: usize, q: usize, k: usize, b: i32, h: i32): void {
  let s0 = 0;
  for (let t = 0; t < T_; t++) {
    if (isStart(b, t)) s0 = t;
    rope(ad(qr, t * D_), ad(q, row(t, b, h)), t - s0, false);
    rope(ad(kr, t * D_), ad(k, row(t, b, h)), t - s0, false);
  }
}

/** Forward. */
export function attention_forward_f32(
  out: usize,
  lse: usize,
  q: usize,
  k: usize,
  v: usize,
  B: i32,
  T: i32,
  H: i32,
  D: i32,
  base: f64,
  starts: usize,
  scratch: usize,
): void {
  setup(T, H, D, base, starts);
  const qr = scratch;
  const kr = ad(qr, T * D);
  const pr = ad(kr, T * D);
  const scale = 1 / Math.sqrt(<f64> D);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      rotateAll(qr, kr, q, k, b, h);
      let s0 = 0;
      for (let t = 0; t < T; t++) {
        if (isStart(b, t)) s0 = t;
        let m = -Infinity;
        for (let s = s0; s <= t; s++) {
          const sc = dot(ad(qr, t * D), ad(kr, s * D), D) * scale;
          store<f32>(ad(pr, s), <f32> sc);
          m = Math.max(m, sc);
        }
        let sum: f64 = 0;
        for (let s = s0; s <= t; s++) sum += Math.exp(<f64> load<f32>(ad(pr, s)) - m);
        const o = ad(out, row(t, b, h));
        for (let i = 0; i < D; i++) {
          let acc: f64 = 0;
          for (let s = s0; s <= t; s++) {
            acc += Math.exp(<f64> load<f32>(ad(pr, s)) - m) * <f64> load<f32>(ad(v, row(s, b, h) + i));
          }
          store<f32>(ad(o, i), <f32> (acc / sum));
        }
        store<f32>(ad(lse, (b * T + t) * H + h), <f32> (m + Math.log(sum)));
      }
    }
  }
}

/** Backward (accumulates into dq, dk, dv). */
export function attention_backward_f32(
  dq: usize,
  dk: usize,
  dv: usize,
  dOut: usize,
  out: usize,
  lse: usize,
  q: usize,
  k: usize,
  v: usize,
  B: i32,
  T: i32,
  H: i32,
  D: i32,
  base: f64,
  starts: usize,
  scratch: usize,
): void {
  setup(T, H, D, base, starts);
  const qr = scratch;
  const kr = ad(qr, T * D);
  const dqr = ad(kr, T * D);
  const dkr = ad(dqr, T * D);
  const tmp = ad(dkr, T * D);
  const scale = 1 / Math.sqrt(<f64> D);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      rotateAll(qr, kr, q, k, b, h);
      for (let i = 0; i < 2 * T * D; i++) store<f32>(ad(dqr, i), 0);
      let s0 = 0;
      for (let t = 0; t < T; t++) {
        if (isStart(b, t)) s0 = t;
        const go = ad(dOut, row(t, b, h));
        const Dt = dot(go, ad(out, row(t, b, h)), D);
        const l = <f64> load<f32>(ad(lse, (b * T + t) * H + h));
        for (let s = s0; s <= t; s++) {
          const p = Math.exp(dot(ad(qr, t * D), ad(kr, s * D), D) * scale - l);
          const vs = ad(v, row(s, b, h));
          const dvs = ad(dv, row(s, b, h));
          for (let i = 0; i < D; i++) {
            store<f32>(ad(dvs, i), load<f32>(ad(dvs, i)) + <f32> (p * <f64> load<f32>(ad(go, i))));
          }
          const ds = p * (dot(go, vs, D) - Dt) * scale;
          for (let i = 0; i < D; i++) {
            store<f32>(
              ad(dqr, t * D + i),
              load<f32>(ad(dqr, t * D + i)) + <f32> (ds * <f64> load<f32>(ad(kr, s * D + i))),
            );
            store<f32>(
              ad(dkr, s * D + i),
              load<f32>(ad(dkr, s * D + i)) + <f32> (ds * <f64> load<f32>(ad(qr, t * D + i))),
            );
          }
        }
      }
      s0 = 0;
      for (let t = 0; t < T; t++) {
        if (isStart(b, t)) s0 = t;
        rope(tmp, ad(dqr, t * D), t - s0, true);
        const dqt = ad(dq, row(t, b, h));
        for (let i = 0; i < D; i++) store<f32>(ad(dqt, i), load<f32>(ad(dqt, i)) + load<f32>(ad(tmp, i)));
        rope(tmp, ad(dkr, t * D), t - s0, true);
        const dkt = ad(dk, row(t, b, h));
        for (let i = 0; i < D; i++) store<f32>(ad(dkt, i), load<f32>(ad(dkt, i)) + load<f32>(ad(tmp, i)));
      }
    }
  }
}
