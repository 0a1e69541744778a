/**
 * WGSL of causal softmax attention with RoPE (the Transformer baseline), forward and backward.
 *
 * Shapes: `q, k, v, out [B, T, H, D]` (D even), `lse [B, T, H]`, `seg [B*T]` the latest sequence
 * start `<= t` (host computed). RoPE position is `t - seg[t]`; rotate-half convention: for
 * `i < D/2`, angle `pos * base^(-2i/D)`, `(x_i, x_{i+D/2}) -> (x_i c - x_{i+D/2} s, x_{i+D/2} c + x_i s)`.
 * Scores `q.k / sqrt(D)`; position `t` attends to `s` in `[seg[t], t]`. One invocation per
 * `(b, t, h)` row, with a `D`-float register accumulator (D is a compile-time constant).
 *
 * @module
 */

const HEAD = (D: number) => `
const D = ${D}u;
const HALF = ${D / 2}u;
struct P { n: u32, T: u32, H: u32, base: f32 }`;

const IDX = `@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (gid.y * nwg.x + gid.x) * 64u + lid.x;
  if (idx >= u.n) { return; }
  let h = idx % u.H;
  let bt = idx / u.H;
  let t = bt % u.T;
  let b = bt / u.T;`;

/** RoPE (`inverse` = 0) or its transpose (`inverse` = 1, accumulating into dst): one invocation per row. */
export function ropeShader(D: number, inverse: boolean): string {
  const write = inverse
    ? `dst[r + i] += x0 * c + x1 * s;
    dst[r + i + HALF] += x1 * c - x0 * s;`
    : `dst[r + i] = x0 * c - x1 * s;
    dst[r + i + HALF] = x1 * c + x0 * s;`;
  return `${HEAD(D)}
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> seg: array<i32>;
@group(0) @binding(3) var<uniform> u: P;
${IDX}
  let pos = f32(i32(t) - seg[bt]);
  let r = idx * D;
  for (var i = 0u; i < HALF; i++) {
    let ang = pos * pow(u.base, -2.0 * f32(i) / f32(D));
    let c = cos(ang);
    let s = sin(ang);
    let x0 = src[r + i];
    let x1 = src[r + i + HALF];
    ${write}
  }
}`;
}

const QKV = `
@group(0) @binding(1) var<storage, read> qr: array<f32>;
@group(0) @binding(2) var<storage, read> kr: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> seg: array<i32>;`;

/** Forward: online softmax over keys `s in [seg[t], t]`; writes out and lse. */
export function attentionForwardShader(D: number): string {
  return `${HEAD(D)}
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
${QKV}
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(6) var<uniform> u: P;
${IDX}
  let scale = 1.0 / sqrt(f32(D));
  let rq = idx * D;
  var acc: array<f32, D>;
  for (var i = 0u; i < D; i++) { acc[i] = 0.0; }
  var m = -3.4e38;
  var l = 0.0;
  for (var s = u32(seg[bt]); s <= t; s++) {
    let rk = ((b * u.T + s) * u.H + h) * D;
    var sc = 0.0;
    for (var i = 0u; i < D; i++) { sc += qr[rq + i] * kr[rk + i]; }
    sc *= scale;
    let mn = max(m, sc);
    let corr = exp(m - mn);
    let p = exp(sc - mn);
    l = l * corr + p;
    for (var i = 0u; i < D; i++) { acc[i] = acc[i] * corr + p * v[rk + i]; }
    m = mn;
  }
  for (var i = 0u; i < D; i++) { out_[rq + i] = acc[i] / l; }
  lse[idx] = m + log(l);
}`;
}

/** Backward for the rotated query: `dqr_t = scale sum_s P_ts (dO_t.v_s - delta_t) kr_s`, `delta_t = dO_t.out_t`. */
export function attentionQueryGradShader(D: number): string {
  return `${HEAD(D)}
@group(0) @binding(0) var<storage, read_write> dqr: array<f32>;
${QKV}
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> out_: array<f32>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;
@group(0) @binding(9) var<uniform> u: P;
${IDX}
  let scale = 1.0 / sqrt(f32(D));
  let rq = idx * D;
  var dl = 0.0;
  for (var i = 0u; i < D; i++) { dl += dout[rq + i] * out_[rq + i]; }
  delta[idx] = dl;
  var acc: array<f32, D>;
  for (var i = 0u; i < D; i++) { acc[i] = 0.0; }
  for (var s = u32(seg[bt]); s <= t; s++) {
    let rk = ((b * u.T + s) * u.H + h) * D;
    var sc = 0.0;
    var dp = 0.0;
    for (var i = 0u; i < D; i++) { sc += qr[rq + i] * kr[rk + i]; dp += dout[rq + i] * v[rk + i]; }
    let p = exp(sc * scale - lse[idx]);
    let w = scale * p * (dp - dl);
    for (var i = 0u; i < D; i++) { acc[i] += w * kr[rk + i]; }
  }
  for (var i = 0u; i < D; i++) { dqr[rq + i] = acc[i]; }
}`;
}

/** Backward for key row `s`: `dkr_s = scale sum_t P_ts (dP_ts - delta_t) qr_t`, `dv_s += sum_t P_ts dO_t`. */
export function attentionKeyGradShader(D: number): string {
  return `${HEAD(D)}
@group(0) @binding(0) var<storage, read_write> dkr: array<f32>;
${QKV}
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read_write> dv: array<f32>;
@group(0) @binding(8) var<storage, read> delta: array<f32>;
@group(0) @binding(9) var<uniform> u: P;
${IDX}
  // here (b, t, h) is the key row s = t
  let scale = 1.0 / sqrt(f32(D));
  let rk = idx * D;
  var dk: array<f32, D>;
  var dvv: array<f32, D>;
  for (var i = 0u; i < D; i++) { dk[i] = 0.0; dvv[i] = 0.0; }
  for (var tq = t; tq < u.T; tq++) {
    if (seg[b * u.T + tq] > i32(t)) { break; }
    let row = (b * u.T + tq) * u.H + h;
    let rq = row * D;
    var sc = 0.0;
    var dp = 0.0;
    for (var i = 0u; i < D; i++) { sc += qr[rq + i] * kr[rk + i]; dp += dout[rq + i] * v[rk + i]; }
    let p = exp(sc * scale - lse[row]);
    let w = scale * p * (dp - delta[row]);
    for (var i = 0u; i < D; i++) { dk[i] += w * qr[rq + i]; dvv[i] += p * dout[rq + i]; }
  }
  for (var i = 0u; i < D; i++) { dkr[rk + i] = dk[i]; dv[rk + i] += dvv[i]; }
}`;
}
