/**
 * Column-blocked state kernels of the coefficient-stream rules. The state `S [Dk, Dv]` (row stride Dv)
 * is swept in blocks of 8 (then 4, then 1) value columns; inside a block the accumulators stay in
 * registers while the rows stream past, so each step touches S once (forward) or twice (backward).
 *
 * - {@link stepFused}: `S = gam ⊙ S + x w^T`, then `o = S^T q` and `pn = S^T xn` in the same sweep
 *   (pn is the next step's prediction); {@link stepSplat2} / {@link stepSplat1} are the same sweep with
 *   the row scalars pre-splatted ({@link splatRows}), in place with two readouts or with one.
 * - {@link predict}: `p = S^T x`.
 * - {@link backASplat}: `dS += q dO^T`, `g = dS^T x`, `dgam = colsum(dS ⊙ P)`, row sums of `P (gam ⊙ dO)`
 *   (with `x (w . dO)` added by the caller: `dq = Snew dO`).
 * - {@link backBSplat}: row sums of `dx = dS w - P ag`, then `dS = gam ⊙ dS - x ag^T`.
 *
 * Row reductions (`dq`, `dx`) are collected per row in f32x4 partial sums (scratch `acc`, Dk vectors)
 * plus a scalar array for the column tail, then reduced once per step ({@link reduceRows}).
 */

import { hsum, madd, nmadd } from "./simd";

function ld(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize> i << 2));
}

function st(p: usize, i: i32, v: f32): void {
  store<f32>(p + (<usize> i << 2), v);
}

/** `S = gam ⊙ src + x w^T; o = S^T q; pn = S^T xn` (o and pn overwritten; `src` may be `S`). */
export function stepFused(
  S: usize,
  src: usize,
  x: usize,
  q: usize,
  xn: usize,
  gam: usize,
  w: usize,
  o: usize,
  pn: usize,
  dk: i32,
  dv: i32,
): void {
  stepCols(S, src, x, q, xn, gam, w, o, pn, dk, dv, 0);
}

/**
 * {@link stepFused} for value columns `j0..dv-1` only (rows stay `dv` floats apart): 8-column blocks
 * with one row per iteration (4 invariant vectors, 4 accumulators: no spills), then 4-column blocks,
 * then single columns. The tail of the pre-splatted kernels below.
 */
function stepCols(
  S: usize,
  src: usize,
  x: usize,
  q: usize,
  xn: usize,
  gam: usize,
  w: usize,
  o: usize,
  pn: usize,
  dk: i32,
  dv: i32,
  j0: i32,
): void {
  const rs = <usize> dv << 2;
  const xe = x + (<usize> dk << 2);
  let j = j0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    const g0 = v128.load(gam + jo);
    const g1 = v128.load(gam + jo, 16);
    const w0 = v128.load(w + jo);
    const w1 = v128.load(w + jo, 16);
    let o0 = f32x4.splat(0);
    let o1 = f32x4.splat(0);
    let p0 = f32x4.splat(0);
    let p1 = f32x4.splat(0);
    let sp = S + jo;
    let rp = src + jo;
    let xp = x;
    let qp = q;
    let np = xn;
    while (xp < xe) {
      const xi = v128.load32_splat(xp);
      const s0 = madd(xi, w0, f32x4.mul(g0, v128.load(rp)));
      const s1 = madd(xi, w1, f32x4.mul(g1, v128.load(rp, 16)));
      v128.store(sp, s0);
      v128.store(sp, s1, 16);
      const qi = v128.load32_splat(qp);
      o0 = madd(qi, s0, o0);
      o1 = madd(qi, s1, o1);
      const ni = v128.load32_splat(np);
      p0 = madd(ni, s0, p0);
      p1 = madd(ni, s1, p1);
      sp += rs;
      rp += rs;
      xp += 4;
      qp += 4;
      np += 4;
    }
    v128.store(o + jo, o0);
    v128.store(o + jo, o1, 16);
    v128.store(pn + jo, p0);
    v128.store(pn + jo, p1, 16);
  }
  for (; j + 4 <= dv; j += 4) {
    const jo = <usize> j << 2;
    const g0 = v128.load(gam + jo);
    const w0 = v128.load(w + jo);
    let o0 = f32x4.splat(0);
    let p0 = f32x4.splat(0);
    let sp = S + jo;
    let rp = src + jo;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      const s0 = madd(v128.load32_splat(x + io), w0, f32x4.mul(g0, v128.load(rp)));
      v128.store(sp, s0);
      o0 = madd(v128.load32_splat(q + io), s0, o0);
      p0 = madd(v128.load32_splat(xn + io), s0, p0);
      sp += rs;
      rp += rs;
    }
    v128.store(o + jo, o0);
    v128.store(pn + jo, p0);
  }
  for (; j < dv; j++) {
    const gj = ld(gam, j);
    const wj = ld(w, j);
    let oj: f32 = 0;
    let pj: f32 = 0;
    let sp = S + (<usize> j << 2);
    let rp = src + (<usize> j << 2);
    for (let i = 0; i < dk; i++) {
      const s = gj * load<f32>(rp) + ld(x, i) * wj;
      store<f32>(sp, s);
      oj += ld(q, i) * s;
      pj += ld(xn, i) * s;
      sp += rs;
      rp += rs;
    }
    st(o, j, oj);
    st(pn, j, pj);
  }
}

/** Bytes of the pre-splatted row buffer of {@link splatRows} for `dk` rows. */
export function splatBytes(dk: i32): usize {
  return <usize> dk * 48;
}

/**
 * Row buffer of the splatted kernels: `R[i] = (splat x_i, splat u_i, splat v_i)`, 48 bytes per row, so
 * the sweeps load whole vectors instead of broadcasting three scalars per row and column block.
 */
export function splatRows(R: usize, x: usize, u: usize, v: usize, dk: i32): void {
  let d = R;
  for (let i = 0; i < dk; i++) {
    const io = <usize> i << 2;
    v128.store(d, v128.load32_splat(x + io));
    v128.store(d, v128.load32_splat(u + io), 16);
    v128.store(d, v128.load32_splat(v + io), 32);
    d += 48;
  }
}

/**
 * In place: `S = gam ⊙ S + x w^T; o = S^T q; pn = S^T xn`, with `R` from `splatRows(R, x, q, xn)`.
 * The forward step of the regression rules: one load and one store of S per element (in place is
 * measurably faster than reading another state), 4 vector operations per 4 elements.
 */
export function stepSplat2(
  S: usize,
  R: usize,
  x: usize,
  q: usize,
  xn: usize,
  gam: usize,
  w: usize,
  o: usize,
  pn: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const re = R + splatBytes(dk);
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    const g0 = v128.load(gam + jo);
    const g1 = v128.load(gam + jo, 16);
    const w0 = v128.load(w + jo);
    const w1 = v128.load(w + jo, 16);
    let o0 = f32x4.splat(0);
    let o1 = f32x4.splat(0);
    let p0 = f32x4.splat(0);
    let p1 = f32x4.splat(0);
    let sp = S + jo;
    let d = R;
    while (d < re) {
      const xi = v128.load(d);
      const s0 = madd(xi, w0, f32x4.mul(g0, v128.load(sp)));
      const s1 = madd(xi, w1, f32x4.mul(g1, v128.load(sp, 16)));
      v128.store(sp, s0);
      v128.store(sp, s1, 16);
      const qi = v128.load(d, 16);
      o0 = madd(qi, s0, o0);
      o1 = madd(qi, s1, o1);
      const ni = v128.load(d, 32);
      p0 = madd(ni, s0, p0);
      p1 = madd(ni, s1, p1);
      sp += rs;
      d += 48;
    }
    v128.store(o + jo, o0);
    v128.store(o + jo, o1, 16);
    v128.store(pn + jo, p0);
    v128.store(pn + jo, p1, 16);
  }
  if (j < dv) stepCols(S, S, x, q, xn, gam, w, o, pn, dk, dv, j);
}

/**
 * `S = gam ⊙ src + x w^T; r = S^T u` (one readout), with `R` from `splatRows(R, x, u, u)`; `src` may be
 * `S`. The step when only one of o, pn is wanted: the additive rules' forward (o), the recording
 * recomputation of the backward (pn), the last step of a call. 3 vector operations per 4 elements.
 */
export function stepSplat1(
  S: usize,
  src: usize,
  R: usize,
  x: usize,
  u: usize,
  gam: usize,
  w: usize,
  r: usize,
  dummy: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const re = R + splatBytes(dk);
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    const g0 = v128.load(gam + jo);
    const g1 = v128.load(gam + jo, 16);
    const w0 = v128.load(w + jo);
    const w1 = v128.load(w + jo, 16);
    let o0 = f32x4.splat(0);
    let o1 = f32x4.splat(0);
    let sp = S + jo;
    let rp = src + jo;
    let d = R;
    while (d < re) {
      const xi = v128.load(d);
      const s0 = madd(xi, w0, f32x4.mul(g0, v128.load(rp)));
      const s1 = madd(xi, w1, f32x4.mul(g1, v128.load(rp, 16)));
      v128.store(sp, s0);
      v128.store(sp, s1, 16);
      const ui = v128.load(d, 16);
      o0 = madd(ui, s0, o0);
      o1 = madd(ui, s1, o1);
      sp += rs;
      rp += rs;
      d += 48;
    }
    v128.store(r + jo, o0);
    v128.store(r + jo, o1, 16);
  }
  if (j < dv) stepCols(S, src, x, u, u, gam, w, r, dummy, dk, dv, j);
}

/** `p = S^T x` (overwritten). */
export function predict(S: usize, x: usize, p: usize, dk: i32, dv: i32): void {
  const rs = <usize> dv << 2;
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    // two rows per iteration into separate accumulators: four FMA chains (the sweep is latency bound)
    const jo = <usize> j << 2;
    let p0 = f32x4.splat(0);
    let p1 = f32x4.splat(0);
    let p2 = f32x4.splat(0);
    let p3 = f32x4.splat(0);
    let sp = S + jo;
    let i = 0;
    for (; i + 2 <= dk; i += 2) {
      const xp = x + (<usize> i << 2);
      const xi = v128.load32_splat(xp);
      const xj = v128.load32_splat(xp, 4);
      p0 = madd(xi, v128.load(sp), p0);
      p1 = madd(xi, v128.load(sp, 16), p1);
      p2 = madd(xj, v128.load(sp + rs), p2);
      p3 = madd(xj, v128.load(sp + rs, 16), p3);
      sp += rs + rs;
    }
    if (i < dk) {
      const xi = v128.load32_splat(x + (<usize> i << 2));
      p0 = madd(xi, v128.load(sp), p0);
      p1 = madd(xi, v128.load(sp, 16), p1);
    }
    v128.store(p + jo, f32x4.add(p0, p2));
    v128.store(p + jo, f32x4.add(p1, p3), 16);
  }
  for (; j + 4 <= dv; j += 4) {
    const jo = <usize> j << 2;
    let p0 = f32x4.splat(0);
    let sp = S + jo;
    for (let i = 0; i < dk; i++) {
      p0 = madd(v128.load32_splat(x + (<usize> i << 2)), v128.load(sp), p0);
      sp += rs;
    }
    v128.store(p + jo, p0);
  }
  for (; j < dv; j++) {
    let pj: f32 = 0;
    let sp = S + (<usize> j << 2);
    for (let i = 0; i < dk; i++) {
      pj += ld(x, i) * load<f32>(sp);
      sp += rs;
    }
    st(p, j, pj);
  }
}

/**
 * `p_a = S^T x_a` for the `n` rows `x_a` of `xs` (`[n, Dk]`) into the rows of `p` (`[n, Dv]`): for 1 to 4
 * pairs one sweep over S with 8 accumulators (4 pairs x 2 vectors, a missing pair reads pair 0 and is
 * not stored) instead of n predicts; otherwise n calls of {@link predict}.
 */
export function predictPairs(S: usize, xs: usize, n: i32, p: usize, dk: i32, dv: i32): void {
  const rs = <usize> dv << 2;
  const xr = <usize> dk << 2;
  if (n < 1 || n > 4) {
    for (let a = 0; a < n; a++) predict(S, xs + <usize> a * xr, p + <usize> a * rs, dk, dv);
    return;
  }
  const x1 = n > 1 ? xs + xr : xs;
  const x2 = n > 2 ? xs + 2 * xr : xs;
  const x3 = n > 3 ? xs + 3 * xr : xs;
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    let a0 = f32x4.splat(0), a1 = f32x4.splat(0), b0 = f32x4.splat(0), b1 = f32x4.splat(0);
    let c0 = f32x4.splat(0), c1 = f32x4.splat(0), d0 = f32x4.splat(0), d1 = f32x4.splat(0);
    let sp = S + jo;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      const s0 = v128.load(sp);
      const s1 = v128.load(sp, 16);
      let x = v128.load32_splat(xs + io);
      a0 = madd(x, s0, a0);
      a1 = madd(x, s1, a1);
      x = v128.load32_splat(x1 + io);
      b0 = madd(x, s0, b0);
      b1 = madd(x, s1, b1);
      x = v128.load32_splat(x2 + io);
      c0 = madd(x, s0, c0);
      c1 = madd(x, s1, c1);
      x = v128.load32_splat(x3 + io);
      d0 = madd(x, s0, d0);
      d1 = madd(x, s1, d1);
      sp += rs;
    }
    v128.store(p + jo, a0);
    v128.store(p + jo, a1, 16);
    if (n > 1) {
      v128.store(p + rs + jo, b0);
      v128.store(p + rs + jo, b1, 16);
    }
    if (n > 2) {
      v128.store(p + 2 * rs + jo, c0);
      v128.store(p + 2 * rs + jo, c1, 16);
    }
    if (n > 3) {
      v128.store(p + 3 * rs + jo, d0);
      v128.store(p + 3 * rs + jo, d1, 16);
    }
  }
  for (; j < dv; j++) {
    for (let a = 0; a < n; a++) {
      let pj: f32 = 0;
      let sp = S + (<usize> j << 2);
      const xa = xs + <usize> a * xr;
      for (let i = 0; i < dk; i++) {
        pj += ld(xa, i) * load<f32>(sp);
        sp += rs;
      }
      st(p + <usize> a * rs, j, pj);
    }
  }
}

/**
 * Backward pass A of one step, with the row scalars pre-splatted (`R` from `splatRows(R, x, q, x)`):
 * `dS += q dO^T`, `g = dS^T x`, `dgam = colsum(dS ⊙ P)`, and the row partial sums of `P gd` into `accQ`
 * (Dk f32x4 partial sums followed by Dk scalars for the tail columns; zeroed here, added up by
 * {@link reduceRows}) with `gd = gam ⊙ dO`: since `Snew = gam ⊙ P + x w^T`,
 * `dq = Snew dO = P gd + x (w . dO)` (the caller adds the rank-one part), so the pass reads P once for both
 * dgam and dq and never loads Snew. The dx partial sums are left to {@link backBSplat}, which loads dS anyway.
 */
export function backASplat(
  dS: usize,
  P: usize,
  R: usize,
  x: usize,
  q: usize,
  dO: usize,
  gd: usize,
  g: usize,
  dgam: usize,
  accQ: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const vb = <usize> dk << 4;
  memory.fill(accQ, 0, vb + (<usize> dk << 2));
  const re = R + splatBytes(dk);
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    const d0 = v128.load(dO + jo);
    const d1 = v128.load(dO + jo, 16);
    const h0 = v128.load(gd + jo);
    const h1 = v128.load(gd + jo, 16);
    let g0 = f32x4.splat(0);
    let g1 = f32x4.splat(0);
    let e0 = f32x4.splat(0);
    let e1 = f32x4.splat(0);
    let sp = dS + jo;
    let pp = P + jo;
    let aq = accQ;
    let d = R;
    while (d < re) {
      const xi = v128.load(d);
      const qi = v128.load(d, 16);
      const a0 = madd(qi, d0, v128.load(sp));
      const a1 = madd(qi, d1, v128.load(sp, 16));
      v128.store(sp, a0);
      v128.store(sp, a1, 16);
      g0 = madd(xi, a0, g0);
      g1 = madd(xi, a1, g1);
      const p0 = v128.load(pp);
      const p1 = v128.load(pp, 16);
      e0 = madd(a0, p0, e0);
      e1 = madd(a1, p1, e1);
      v128.store(aq, madd(p1, h1, madd(p0, h0, v128.load(aq))));
      sp += rs;
      pp += rs;
      aq += 16;
      d += 48;
    }
    v128.store(g + jo, g0);
    v128.store(g + jo, g1, 16);
    v128.store(dgam + jo, e0);
    v128.store(dgam + jo, e1, 16);
  }
  const tq = accQ + vb;
  for (; j < dv; j++) {
    const dj = ld(dO, j);
    const hj = ld(gd, j);
    let gj: f32 = 0;
    let ej: f32 = 0;
    let off = <usize> j << 2;
    for (let i = 0; i < dk; i++) {
      const a = ld(q, i) * dj + load<f32>(dS + off);
      store<f32>(dS + off, a);
      gj += ld(x, i) * a;
      const pv = load<f32>(P + off);
      ej += a * pv;
      st(tq, i, ld(tq, i) + pv * hj);
      off += rs;
    }
    st(g, j, gj);
    st(dgam, j, ej);
  }
}

/**
 * Backward pass B with the row scalars pre-splatted (`R` as for {@link backASplat}): the row partial
 * sums of the whole `dx = dS w - P ag` into `accP` (dS as pass A left it, read before its update), then
 * `dS = gam ⊙ dS - x ag^T`.
 */
export function backBSplat(
  dS: usize,
  P: usize,
  R: usize,
  x: usize,
  gam: usize,
  ag: usize,
  w: usize,
  accP: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const vb = <usize> dk << 4;
  memory.fill(accP, 0, vb + (<usize> dk << 2));
  const re = R + splatBytes(dk);
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    const a0 = v128.load(ag + jo);
    const a1 = v128.load(ag + jo, 16);
    const g0 = v128.load(gam + jo);
    const g1 = v128.load(gam + jo, 16);
    const w0 = v128.load(w + jo);
    const w1 = v128.load(w + jo, 16);
    let sp = dS + jo;
    let pp = P + jo;
    let ap = accP;
    let d = R;
    while (d < re) {
      const xi = v128.load(d);
      const s0 = v128.load(sp);
      const s1 = v128.load(sp, 16);
      const p0 = v128.load(pp);
      const p1 = v128.load(pp, 16);
      v128.store(ap, madd(s1, w1, madd(s0, w0, nmadd(p1, a1, nmadd(p0, a0, v128.load(ap))))));
      v128.store(sp, nmadd(xi, a0, f32x4.mul(g0, s0)));
      v128.store(sp, nmadd(xi, a1, f32x4.mul(g1, s1)), 16);
      sp += rs;
      pp += rs;
      ap += 16;
      d += 48;
    }
  }
  const tp = accP + vb;
  for (; j < dv; j++) {
    const aj = ld(ag, j);
    const gj = ld(gam, j);
    const wj = ld(w, j);
    let off = <usize> j << 2;
    for (let i = 0; i < dk; i++) {
      const sv = load<f32>(dS + off);
      st(tp, i, ld(tp, i) + sv * wj - load<f32>(P + off) * aj);
      store<f32>(dS + off, gj * sv - ld(x, i) * aj);
      off += rs;
    }
  }
}

/** `out[i] (+)= sign * (hsum(acc[i]) + tail[i])` for the row partial sums of the backward passes. */
export function reduceRows(out: usize, acc: usize, dk: i32, sign: f32, accumulate: bool): void {
  const tail = acc + (<usize> dk << 4);
  const sv = f32x4.splat(sign);
  let i = 0;
  for (; i + 4 <= dk; i += 4) {
    // four rows at once: a 4 x 4 transpose-and-add leaves the four lane sums in one vector
    const a = acc + (<usize> i << 4);
    const v0 = v128.load(a);
    const v1 = v128.load(a, 16);
    const v2 = v128.load(a, 32);
    const v3 = v128.load(a, 48);
    const s01 = f32x4.add(v128.shuffle<f32>(v0, v1, 0, 4, 1, 5), v128.shuffle<f32>(v0, v1, 2, 6, 3, 7));
    const s23 = f32x4.add(v128.shuffle<f32>(v2, v3, 0, 4, 1, 5), v128.shuffle<f32>(v2, v3, 2, 6, 3, 7));
    const sums = f32x4.add(v128.shuffle<f32>(s01, s23, 0, 1, 4, 5), v128.shuffle<f32>(s01, s23, 2, 3, 6, 7));
    const io = <usize> i << 2;
    const v = f32x4.mul(sv, f32x4.add(sums, v128.load(tail + io)));
    v128.store(out + io, accumulate ? f32x4.add(v128.load(out + io), v) : v);
  }
  for (; i < dk; i++) {
    const v = sign * (hsum(v128.load(acc + (<usize> i << 4))) + ld(tail, i));
    st(out, i, accumulate ? ld(out, i) + v : v);
  }
}

/**
 * Window update: `S = g * S + sum_a xs[a] ws[a]^T` and `o = S^T q`, with `xs` `[n, Dk]` contiguous
 * and `ws` `[n, Dv]` contiguous (rows `Dv` floats apart).
 */
export function updateWindow(
  S: usize,
  g: f32,
  xs: usize,
  ws: usize,
  n: i32,
  q: usize,
  o: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const xr = <usize> dk << 2;
  const gv = f32x4.splat(g);
  let j = 0;
  if (n >= 1 && n <= 4) j = updateWindow4(S, gv, xs, ws, n, q, o, dk, dv);
  for (; j + 4 <= dv; j += 4) {
    const jo = <usize> j << 2;
    let o0 = f32x4.splat(0);
    let sp = S + jo;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      let s0 = f32x4.mul(gv, v128.load(sp));
      let xp = xs + io;
      let wp = ws + jo;
      for (let a = 0; a < n; a++) {
        s0 = madd(v128.load32_splat(xp), v128.load(wp), s0);
        xp += xr;
        wp += rs;
      }
      v128.store(sp, s0);
      o0 = madd(v128.load32_splat(q + io), s0, o0);
      sp += rs;
    }
    v128.store(o + jo, o0);
  }
  for (; j < dv; j++) {
    let oj: f32 = 0;
    let sp = S + (<usize> j << 2);
    for (let i = 0; i < dk; i++) {
      let s = g * load<f32>(sp);
      for (let a = 0; a < n; a++) s += ld(xs, a * dk + i) * ld(ws, a * dv + j);
      store<f32>(sp, s);
      oj += ld(q, i) * s;
      sp += rs;
    }
    st(o, j, oj);
  }
}

/**
 * The 8-column blocks of {@link updateWindow} for a window of 1 to 4 pairs: the pairs' `w` vectors stay
 * in registers for the whole column block (8 of them; a missing pair gets a zero `w` and reads pair 0's
 * features, which adds exact zeros, so results equal the general loop's). Returns the first column left.
 */
function updateWindow4(
  S: usize,
  gv: v128,
  xs: usize,
  ws: usize,
  n: i32,
  q: usize,
  o: usize,
  dk: i32,
  dv: i32,
): i32 {
  const rs = <usize> dv << 2;
  const xr = <usize> dk << 2;
  const z = f32x4.splat(0);
  let x1 = xs;
  let x2 = xs;
  let x3 = xs;
  if (n > 1) x1 = xs + xr;
  if (n > 2) x2 = xs + 2 * xr;
  if (n > 3) x3 = xs + 3 * xr;
  let j = 0;
  for (; j + 8 <= dv; j += 8) {
    const jo = <usize> j << 2;
    const w00 = n > 0 ? v128.load(ws + jo) : z;
    const w01 = n > 0 ? v128.load(ws + jo, 16) : z;
    const w10 = n > 1 ? v128.load(ws + rs + jo) : z;
    const w11 = n > 1 ? v128.load(ws + rs + jo, 16) : z;
    const w20 = n > 2 ? v128.load(ws + 2 * rs + jo) : z;
    const w21 = n > 2 ? v128.load(ws + 2 * rs + jo, 16) : z;
    const w30 = n > 3 ? v128.load(ws + 3 * rs + jo) : z;
    const w31 = n > 3 ? v128.load(ws + 3 * rs + jo, 16) : z;
    let o0 = z;
    let o1 = z;
    let sp = S + jo;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      let s0 = f32x4.mul(gv, v128.load(sp));
      let s1 = f32x4.mul(gv, v128.load(sp, 16));
      let xa = v128.load32_splat(xs + io);
      s0 = madd(xa, w00, s0);
      s1 = madd(xa, w01, s1);
      xa = v128.load32_splat(x1 + io);
      s0 = madd(xa, w10, s0);
      s1 = madd(xa, w11, s1);
      xa = v128.load32_splat(x2 + io);
      s0 = madd(xa, w20, s0);
      s1 = madd(xa, w21, s1);
      xa = v128.load32_splat(x3 + io);
      s0 = madd(xa, w30, s0);
      s1 = madd(xa, w31, s1);
      v128.store(sp, s0);
      v128.store(sp, s1, 16);
      const qi = v128.load32_splat(q + io);
      o0 = madd(qi, s0, o0);
      o1 = madd(qi, s1, o1);
      sp += rs;
    }
    v128.store(o + jo, o0);
    v128.store(o + jo, o1, 16);
  }
  return j;
}

/** `<dS, P>` of the last {@link windowBackA} call. */
export let WB_DGAM: f64 = 0;

/**
 * Window backward, sweep A: `dS += q dO^T`, `dq += Snew dO` (row partial sums into `accQ`, laid out as
 * in backASplat), and for the n pairs `xs [n, Dk]`: `Pn[a] = P^T x_a`, `Gn[a] = dS^T x_a` (`[n, Dv]` each,
 * overwritten), and {@link WB_DGAM} `= <dS, P>` (after the readout update).
 */
export function windowBackA(
  dS: usize,
  P: usize,
  Snew: usize,
  q: usize,
  dO: usize,
  xs: usize,
  n: i32,
  Pn: usize,
  Gn: usize,
  accQ: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const xr = <usize> dk << 2;
  const vb = <usize> dk << 4;
  memory.fill(accQ, 0, vb + (<usize> dk << 2));
  memory.fill(Pn, 0, <usize> n * rs);
  memory.fill(Gn, 0, <usize> n * rs);
  let e = f32x4.splat(0);
  let es: f32 = 0;
  let j = 0;
  if (n <= 4) {
    // the pairs' column sums stay in registers over a 4-column block (a missing pair reads pair 0's
    // features into an accumulator that is never stored); same summation order as the loop below
    const x1 = n > 1 ? xs + xr : xs;
    const x2 = n > 2 ? xs + 2 * xr : xs;
    const x3 = n > 3 ? xs + 3 * xr : xs;
    for (; j + 4 <= dv; j += 4) {
      const jo = <usize> j << 2;
      const d0 = v128.load(dO + jo);
      let p0 = f32x4.splat(0), p1 = f32x4.splat(0), p2 = f32x4.splat(0), p3 = f32x4.splat(0);
      let g0 = f32x4.splat(0), g1 = f32x4.splat(0), g2 = f32x4.splat(0), g3 = f32x4.splat(0);
      let off = jo;
      let aq = accQ;
      for (let i = 0; i < dk; i++) {
        const io = <usize> i << 2;
        const a0 = madd(v128.load32_splat(q + io), d0, v128.load(dS + off));
        v128.store(dS + off, a0);
        v128.store(aq, madd(v128.load(Snew + off), d0, v128.load(aq)));
        const pv = v128.load(P + off);
        e = madd(a0, pv, e);
        let xa = v128.load32_splat(xs + io);
        p0 = madd(xa, pv, p0);
        g0 = madd(xa, a0, g0);
        xa = v128.load32_splat(x1 + io);
        p1 = madd(xa, pv, p1);
        g1 = madd(xa, a0, g1);
        xa = v128.load32_splat(x2 + io);
        p2 = madd(xa, pv, p2);
        g2 = madd(xa, a0, g2);
        xa = v128.load32_splat(x3 + io);
        p3 = madd(xa, pv, p3);
        g3 = madd(xa, a0, g3);
        off += rs;
        aq += 16;
      }
      if (n > 0) {
        v128.store(Pn + jo, p0);
        v128.store(Gn + jo, g0);
      }
      if (n > 1) {
        v128.store(Pn + rs + jo, p1);
        v128.store(Gn + rs + jo, g1);
      }
      if (n > 2) {
        v128.store(Pn + 2 * rs + jo, p2);
        v128.store(Gn + 2 * rs + jo, g2);
      }
      if (n > 3) {
        v128.store(Pn + 3 * rs + jo, p3);
        v128.store(Gn + 3 * rs + jo, g3);
      }
    }
  }
  for (; j + 4 <= dv; j += 4) {
    const jo = <usize> j << 2;
    const d0 = v128.load(dO + jo);
    let off = jo;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      const a0 = madd(v128.load32_splat(q + io), d0, v128.load(dS + off));
      v128.store(dS + off, a0);
      const aq = accQ + (<usize> i << 4);
      v128.store(aq, madd(v128.load(Snew + off), d0, v128.load(aq)));
      const p0 = v128.load(P + off);
      e = madd(a0, p0, e);
      let xp = xs + io;
      let po = Pn + jo;
      let go = Gn + jo;
      for (let a = 0; a < n; a++) {
        const xa = v128.load32_splat(xp);
        v128.store(po, madd(xa, p0, v128.load(po)));
        v128.store(go, madd(xa, a0, v128.load(go)));
        xp += xr;
        po += rs;
        go += rs;
      }
      off += rs;
    }
  }
  const tq = accQ + vb;
  for (; j < dv; j++) {
    const dj = ld(dO, j);
    let off = <usize> j << 2;
    for (let i = 0; i < dk; i++) {
      const a0 = ld(q, i) * dj + load<f32>(dS + off);
      store<f32>(dS + off, a0);
      st(tq, i, ld(tq, i) + load<f32>(Snew + off) * dj);
      const p0 = load<f32>(P + off);
      es += a0 * p0;
      for (let a = 0; a < n; a++) {
        const xa = ld(xs, a * dk + i);
        st(Pn, a * dv + j, ld(Pn, a * dv + j) + xa * p0);
        st(Gn, a * dv + j, ld(Gn, a * dv + j) + xa * a0);
      }
      off += rs;
    }
  }
  WB_DGAM = <f64> hsum(e) + <f64> es;
}

/**
 * Window backward, sweep B: for the n pairs, `dx_a = dS w_a + P dp_a` (row partial sums into `accX`:
 * n blocks of Dk f32x4 followed by n * Dk tail floats; reduce with {@link reduceWindowRows}), then
 * `dS = g dS + sum_a x_a dp_a^T`. `ws`, `dps`: `[n, Dv]`.
 */
export function windowBackB(
  dS: usize,
  P: usize,
  xs: usize,
  n: i32,
  ws: usize,
  dps: usize,
  g: f32,
  accX: usize,
  dk: i32,
  dv: i32,
): void {
  const rs = <usize> dv << 2;
  const xr = <usize> dk << 2;
  const nb = (<usize> n * <usize> dk) << 4;
  memory.fill(accX, 0, nb + ((<usize> n * <usize> dk) << 2));
  const gv = f32x4.splat(g);
  let j = 0;
  if (n >= 1 && n <= 4) j = windowBackB4(dS, P, xs, n, ws, dps, gv, accX, dk, dv);
  for (; j + 4 <= dv; j += 4) {
    const jo = <usize> j << 2;
    let off = jo;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      const d0 = v128.load(dS + off);
      const p0 = v128.load(P + off);
      let s = f32x4.mul(gv, d0);
      let xp = xs + io;
      let wo = ws + jo;
      let qo = dps + jo;
      let ao = accX + (<usize> i << 4);
      for (let a = 0; a < n; a++) {
        const dp = v128.load(qo);
        v128.store(ao, madd(p0, dp, madd(d0, v128.load(wo), v128.load(ao))));
        s = madd(v128.load32_splat(xp), dp, s);
        xp += xr;
        wo += rs;
        qo += rs;
        ao += <usize> dk << 4;
      }
      v128.store(dS + off, s);
      off += rs;
    }
  }
  const tail = accX + nb;
  for (; j < dv; j++) {
    let off = <usize> j << 2;
    for (let i = 0; i < dk; i++) {
      const d0 = load<f32>(dS + off);
      const p0 = load<f32>(P + off);
      let s = g * d0;
      for (let a = 0; a < n; a++) {
        const dp = ld(dps, a * dv + j);
        st(tail, a * dk + i, ld(tail, a * dk + i) + d0 * ld(ws, a * dv + j) + p0 * dp);
        s += ld(xs, a * dk + i) * dp;
      }
      store<f32>(dS + off, s);
      off += rs;
    }
  }
}

/**
 * The 4-column blocks of {@link windowBackB} for 1 to 4 pairs: each pair's `w` and `dp` vectors stay in
 * registers over the block (a missing pair gets a zero `dp`, which adds exact zeros to dS, and no partial
 * sum); same summation order as the general loop. Returns the first column left.
 */
function windowBackB4(
  dS: usize,
  P: usize,
  xs: usize,
  n: i32,
  ws: usize,
  dps: usize,
  gv: v128,
  accX: usize,
  dk: i32,
  dv: i32,
): i32 {
  const rs = <usize> dv << 2;
  const xr = <usize> dk << 2;
  const ab = <usize> dk << 4; // bytes between the pairs' partial-sum blocks
  const z = f32x4.splat(0);
  const x1 = n > 1 ? xs + xr : xs;
  const x2 = n > 2 ? xs + 2 * xr : xs;
  const x3 = n > 3 ? xs + 3 * xr : xs;
  let j = 0;
  for (; j + 4 <= dv; j += 4) {
    const jo = <usize> j << 2;
    const w0 = v128.load(ws + jo);
    const q0 = v128.load(dps + jo);
    const w1 = n > 1 ? v128.load(ws + rs + jo) : z;
    const q1 = n > 1 ? v128.load(dps + rs + jo) : z;
    const w2 = n > 2 ? v128.load(ws + 2 * rs + jo) : z;
    const q2 = n > 2 ? v128.load(dps + 2 * rs + jo) : z;
    const w3 = n > 3 ? v128.load(ws + 3 * rs + jo) : z;
    const q3 = n > 3 ? v128.load(dps + 3 * rs + jo) : z;
    let off = jo;
    let ao = accX;
    for (let i = 0; i < dk; i++) {
      const io = <usize> i << 2;
      const d0 = v128.load(dS + off);
      const p0 = v128.load(P + off);
      let s = f32x4.mul(gv, d0);
      v128.store(ao, madd(p0, q0, madd(d0, w0, v128.load(ao))));
      s = madd(v128.load32_splat(xs + io), q0, s);
      if (n > 1) v128.store(ao + ab, madd(p0, q1, madd(d0, w1, v128.load(ao + ab))));
      s = madd(v128.load32_splat(x1 + io), q1, s);
      if (n > 2) v128.store(ao + 2 * ab, madd(p0, q2, madd(d0, w2, v128.load(ao + 2 * ab))));
      s = madd(v128.load32_splat(x2 + io), q2, s);
      if (n > 3) v128.store(ao + 3 * ab, madd(p0, q3, madd(d0, w3, v128.load(ao + 3 * ab))));
      s = madd(v128.load32_splat(x3 + io), q3, s);
      v128.store(dS + off, s);
      off += rs;
      ao += 16;
    }
  }
  return j;
}

/** `dx[a, i] = hsum(accX[a][i]) + tail[a, i]` for the partial sums of {@link windowBackB}; dx rows `stride` floats apart. */
export function reduceWindowRows(dx: usize, stride: i32, accX: usize, n: i32, dk: i32): void {
  const tail = accX + ((<usize> n * <usize> dk) << 4);
  for (let a = 0; a < n; a++) {
    for (let i = 0; i < dk; i++) {
      const k = a * dk + i;
      st(dx, a * stride + i, hsum(v128.load(accX + (<usize> k << 4))) + ld(tail, k));
    }
  }
}
