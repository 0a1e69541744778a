/**
 * WGSL of the chunk-parallel fast-weight kernels of the ADDITIVE rules (falcon1a, falcon3a, linear,
 * retnet, mamba2), forward and backward, float32 (SPEC section 4, SSD style).
 *
 * Recurrence: `S_t = gamma_t S_{t-1} + g_t sum_{j=lo_t}^{t} x_j y_j^T`, readout `o_t = S_t^T q_t`, with
 * `gamma_t`, `g_t` (the `b` of `fast_weight_coef.ts`, `eta_t / B_t` for the Falcon rules) from the same
 * `coef()` code as the recurrent kernels. For a chunk `a..e` entering with `S_in`, with
 * `P_t = sum log gamma_r` over `r` from the start of `t`'s segment to `t`, where a segment begins at
 * the chunk start, at a sequence start, or at a cut (a `gamma` that underflowed to 0, whose chain
 * carries nothing), and `seg(t)` names `t`'s segment:
 * - `M[t,j] = sum_{s=max(j,a)}^{min(t, j+W-1)} [seg(s) = seg(t), lo_s <= j] exp(P_t - P_s) g_s`
 *   (masked before `exp`; `j` runs from `a-W+1`, the pairs before the chunk),
 * - `S_t = exp(P_t) base_t + sum_j M[t,j] x_j y_j^T`, with `base_t` = `S_in` in the chunk's first
 *   segment, `S0` after a start, 0 after a cut,
 * - `o_t = exp(P_t) base_t^T q_t + sum_j M[t,j] (q_t . x_j) y_j`.
 *
 * Kernels (`fastweight_chunk_<pass>_f32`), each spread over many workgroups:
 * - `coef`: one invocation per `(b, h, t)`: `log gamma_t` (`log eps_gamma` where clamped) and `g_t`;
 * - `local`: per `(b, h, chunk, 64 state elements)`: `dS_n = sum_j M[e,j] x_j y_j^T`, the chunk decay
 *   `exp(P_e)` and which base the exit state has (`Z`: 0 `S_in`, 1 `S0`, 2 zero);
 * - `scan`: per `(b, h, state element)`, sequential over chunks: the entering state of every chunk;
 * - `out`: per `(b, h, chunk, R rows)`: the outputs;
 * - backward: `uv` (per-chunk `sum exp(P_t) q_t dO_t^T`, split by the base: `S_in` or `S0`), `rscan`
 *   (reverse scan: the gradient `G_n` of every chunk's exit state, `dS0`, `dCarryState`), `dq` (rows:
 *   `dq_t = S_t dO_t`, and its base part `DQB`), `cols` (per `(b, h, chunk, RC pair columns)`: `dx_j`,
 *   `dy_j`, the terms of `d g_s` (`CON`) and the readout and exit weights `DMM`, `EXJ`), `coefb1` (per
 *   `(b, h, chunk)`: `d g_t` and `d log gamma_t` by `decayGradKernel` of `chunk_wgsl.ts`: the sum
 *   over the decay factors whose chain holds step `t`, so no cancellation), `coefb2` (per step:
 *   `d gamma = d log gamma / gamma` (0 where clamped or cut), then `coef_back(co, d gamma, 0, dg)` as
 *   in the recurrent backward) and `rowfix` (per pair row: adds the pair gradients that later chunks
 *   computed for earlier rows, and the step statistic's gradient).
 *
 * Shapes (`BH = B*H`, `NCK = ceil(T / C)`, `PAD = W-1`): `ws` is the head-major workspace of
 * `fast_weight_recurrent.ts` (`QN [BH,T,Dk]`, `X [BH,XR,Dk]`, `Y [BH,YR,Dv]`, pair `p` at row `PAD+p`);
 * `stepinfo [B,T,2]` (`lo_t`, start flag); `cw` the chunk workspace, sections at the offsets of the
 * uniform block: `LG, GK, DG, DP, DST [BH,T]`, `DEC, Z [BH,NCK]`, `DS, SIN, GB [BH,NCK,Dk,Dv]`,
 * `SFIN [BH,Dk,Dv]`, `UV [BH,NCK,2,Dk,Dv]`, `SPX [BH,NCK,PAD,Dk]`, `SPY [BH,NCK,PAD,Dv]`,
 * `CON [BH,NCK,C+PAD,W]`, `DMM [BH,NCK,C,C+PAD]`, `EXJ [BH,NCK,C+PAD]`, `DQB [BH,T,Dk]` (`DP` holds
 * `d log gamma`); `g` the gradient workspace of the recurrent backward.
 * The `out`, `dq`, `cols` and `uv` kernels also serve the delta rules (`fast_weight_chunk_delta.ts`),
 * with the solved pseudo-values `w` as values and `M = Gam`; `uv` also falcon3
 * (`fast_weight_chunk_window_reg.ts`), whose `coef` also writes the window's top eigenvector (`EIG`);
 * `chunkShader` dispatches every pass.
 * Preconditions: additive rule with scalar `gamma`, `g` per step (not falcon2a); workgroup memory
 * for the chunk's step arrays (`4C` floats, `6C` for the delta rules) and the row/column tiles.
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import { type HeadConstants, statKind } from "./fast_weight_coef.ts";
import { windowSlots } from "./fast_weight_recurrent.ts";
import {
  CHUNK_WG,
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  decayGradKernel,
  flatEntry,
  isDeltaChunkRule,
  isSolveChunkRule,
  prelude,
  stepCoefWgsl,
} from "./chunk_wgsl.ts";
import { deltaShader, isDeltaPass } from "./fast_weight_chunk_delta.ts";
import { isWindowRegPass, windowRegShader } from "./fast_weight_chunk_window_reg.ts";

export {
  CHUNK_PASSES,
  CHUNK_UNIFORM_FIELDS,
  CHUNK_WG,
  type ChunkBindingName,
  chunkBindings,
  chunkKey,
  type ChunkPass,
  type ChunkShape,
  chunkSharedFloats,
  type ChunkUniformField,
  chunkWork,
  isAdditiveChunkRule,
  isChunkRule,
  isDeltaChunkRule,
  isSolveChunkRule,
  isWindowRegChunkRule,
} from "./chunk_wgsl.ts";

/** WGSL of the chunk kernel `pass` (entry point `main`; bindings of {@linkcode chunkBindings}, then the uniform). */
export function chunkShader(
  pass: ChunkPass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
  if (isDeltaPass(pass)) return deltaShader(pass, config, s, heads);
  if (isWindowRegPass(pass)) return windowRegShader(pass, config, s, heads);
  const head = prelude(pass, config, s, heads);
  const kind = statKind(config.rule);
  const delta = isDeltaChunkRule(config);
  const solve = isSolveChunkRule(config);
  switch (pass) {
    case "coef":
      return head + stepCoefWgsl(config) + `
${flatEntry("u.B * H * u.T")}
  let t = idx % u.T;
  let bh = idx / u.T;
  let co = step_co(bh, bh / H, bh % H, t);
  cw[u.LG + idx] = log_gamma(co);
  cw[u.GK + idx] = co.b;
  ${solve ? "cw[u.GA + idx] = co.a;" : ""}
  ${
        kind === "mu"
          ? `// the top eigenvector of the window's Gram matrix, for the statistic's gradient
  var st = step_stat(bh, t, pairs_at(bh / H, t));
  for (var o = 0u; o < NW; o++) { cw[u.EIG + idx * NW + o] = st.u[o]; }`
          : ""
      }
}`;
    case "local":
      return head + chunkSteps(false) + `
var<workgroup> me: array<f32, CP>;
${chunkEntry(`${Math.ceil((s.dk * s.dv) / CHUNK_WG)}u`)}
  let j0 = i32(a) - i32(PAD);
  for (var k = lid; k < len + PAD; k += WG) { me[k] = m_of(len - 1u, j0 + i32(k), a); }
  workgroupBarrier();
  let e = tile * WG + lid;
  if (e < DK * DV) {
    let i = e / DV;
    let c = e % DV;
    var acc = 0.0;
    for (var k = 0u; k < len + PAD; k++) {
      let m = me[k];
      if (m != 0.0) { acc += m * xp(bh, j0 + i32(k), i) * yp(bh, j0 + i32(k), c); }
    }
    cw[u.DS + (bh * nck() + n) * DK * DV + e] = acc;
  }
  if (tile == 0u && lid == 0u) {
    cw[u.DEC + bh * nck() + n] = exp(cp[len - 1u]);
    cw[u.Z + bh * nck() + n] = f32(base_kind(len - 1u));
  }
}`;
    case "scan":
      return head + `
${flatEntry("u.B * H * DK * DV")}
  let e = idx % (DK * DV);
  let bh = idx / (DK * DV);
  var st = select(0.0, init[idx], u.hasInit != 0u);
  let sz = select(0.0, s0[idx], u.hasS0 != 0u);
  for (var n = 0u; n < nck(); n++) {
    let k = (bh * nck() + n) * DK * DV + e;
    cw[u.SIN + k] = st;
    let dec = cw[u.DEC + bh * nck() + n];
    let zk = cw[u.Z + bh * nck() + n];
    st = dec * select(select(0.0, sz, zk == 1.0), st, zk == 0.0) + cw[u.DS + k];
  }
  cw[u.SFIN + idx] = st;
}`;
    case "out":
    case "dq":
      return head + chunkSteps(delta) + rowsKernel(pass, s, windowSlots(config) - 1, delta);
    case "uv":
      return head + chunkSteps(delta) + `
${chunkEntry(`${Math.ceil((s.dk * s.dv) / CHUNK_WG)}u`)}
  let h = bh % H;
  let e = tile * WG + lid;
  if (e < DK * DV) {
    let i = e / DV;
    let c = e % DV;
    var uu = 0.0;
    var vv = 0.0;
    for (var tt = 0u; tt < len; tt++) {
      let t = a + tt;
      let w = exp(cp[tt]) * qn(bh, t, i) * dout[((b * u.T + t) * H + h) * DV + c];
      let bk = base_kind(tt);
      if (bk == 0u) { uu += w; } else if (bk == 1u) { vv += w; }
    }
    let k = ((bh * nck() + n) * 2u) * DK * DV + e;
    cw[u.UV + k] = uu;
    cw[u.UV + k + DK * DV] = vv;
  }
}`;
    case "rscan":
      return head + `
${flatEntry("u.B * H * DK * DV")}
  let e = idx % (DK * DV);
  let bh = idx / (DK * DV);
  var gs = 0.0;
  var acc = 0.0;
  for (var nn = i32(nck()) - 1; nn >= 0; nn--) {
    let n = u32(nn);
    let k = (bh * nck() + n) * DK * DV + e;
    cw[u.GB + k] = gs;
    let dg = cw[u.DEC + bh * nck() + n] * gs;
    let ku = ((bh * nck() + n) * 2u) * DK * DV + e;
    acc += cw[u.UV + ku + DK * DV];
    let zk = cw[u.Z + bh * nck() + n];
    if (zk == 0.0) {
      gs = cw[u.UV + ku] + dg;
    } else {
      if (zk == 1.0) { acc += dg; }
      gs = cw[u.UV + ku];
    }
  }
  out[u.gDS0 + idx] = acc;
  out[u.gDC + idx] = gs;
}`;
    case "cols":
      return head + chunkSteps(delta) + colsKernel(s, windowSlots(config) - 1, delta ? "delta" : "additive");
    case "colsq":
      return head + chunkSteps(true) + colsKernel(s, 0, "deltaNoExit");
    case "coefb1":
      return head + chunkSteps(false) + decayGradKernel(false);
    case "coefb2":
      return head + stepCoefWgsl(config) + `
${flatEntry("u.B * H * u.T")}
  let t = idx % u.T;
  let bh = idx / u.T;
  let b = bh / H;
  let h = bh % H;
  let dlg = cw[u.DP + idx];
  let co = step_co(bh, b, h, t);
  let cb = coef_back(co, dgamma_of(co, dlg), 0.0, cw[u.DG + idx]);
  out[u.gDB + idx] = cb.x;
  out[u.gDLB + idx] = cb.y;
  cw[u.DST + idx] = cb.z;
}`;
    case "rowfix":
      return head + `
${flatEntry("u.B * H * (PAD + u.T + 1u)")}
  let r = idx % (PAD + u.T + 1u);
  let bh = idx / (PAD + u.T + 1u);
  let b = bh / H;
  let p = i32(r) - i32(PAD);
  // pairs before chunk n (rows a_n - PAD .. a_n - 1) were differentiated by chunk n
  for (var n = u32(max(p + 1, 0) + i32(C) - 1) / C; n < nck() && i32(n * C) <= p + i32(PAD); n++) {
    let jj = u32(p - (i32(n * C) - i32(PAD)));
    for (var i = 0u; i < DK; i++) {
      let k = u.gDX + (bh * (PAD + u.T + 1u) + r) * DK + i;
      out[k] = out[k] + cw[u.SPX + ((bh * nck() + n) * PAD + jj) * DK + i];
    }
    for (var c = 0u; c < DV; c++) {
      let k = u.gDY + (bh * (PAD + u.T) + r) * DV + c;
      out[k] = out[k] + cw[u.SPY + ((bh * nck() + n) * PAD + jj) * DV + c];
    }
  }
  ${
        kind === "none" ? "" : `// the step statistic (E or Ebar) of every step whose window holds pair p
  var w = 0.0;
  for (var o = 0u; o < NW; o++) {
    let s = p + i32(o);
    if (s < 0 || s >= i32(u.T)) { continue; }
    let lo = stepinfo[(b * u.T + u32(s)) * 2u];
    if (lo > p) { continue; }
    w += cw[u.DST + bh * u.T + u32(s)] * 2.0 / f32(s - lo + 1);
  }
  if (w != 0.0) {
    for (var i = 0u; i < DK; i++) {
      let k = u.gDX + (bh * (PAD + u.T + 1u) + r) * DK + i;
      out[k] = out[k] + w * xp(bh, p, i);
    }
  }`
      }
}`;
  }
}

/**
 * `out`: `o_t = exp(P_t) base_t^T q_t + sum_j (M[t,j] q_t.x_j) y_j`;
 * `dq`: `dq_t = exp(P_t) base_t dO_t + sum_j (M[t,j] dO_t.y_j) x_j` (= `S_t dO_t`).
 */
function rowsKernel(pass: "out" | "dq", s: ChunkShape, pad: number, delta: boolean): string {
  const fwd = pass === "out";
  const dout = "dout[((b * u.T + t) * H + h) * DV";
  return `${valueWgsl(delta)}
var<workgroup> sc: array<f32, ${s.R * (s.C + pad)}>;
${chunkEntry(`${Math.ceil(s.C / s.R)}u`)}
  let h = bh % H;
  let r0 = tile * R;
  let j0 = i32(a) - i32(PAD);
  // scores of the tile's rows
  for (var k = lid; k < R * CP; k += WG) {
    let tr = k / CP;
    let jj = k % CP;
    let tt = r0 + tr;
    var v = 0.0;
    if (tt < len && jj <= tt + PAD) {
      let t = a + tt;
      let j = j0 + i32(jj);
      let m = m_of(tt, j, a);
      if (m != 0.0) {
        var d = 0.0;
        ${
    fwd
      ? "for (var i = 0u; i < DK; i++) { d += qn(bh, t, i) * xp(bh, j, i); }"
      : `for (var c = 0u; c < DV; c++) { d += ${dout} + c] * vp(bh, j, c); }`
  }
        v = m * d;
      }
    }
    sc[k] = v;
  }
  workgroupBarrier();
  let base = u.SIN + (bh * nck() + n) * DK * DV;
  for (var k = lid; k < R * ${fwd ? "DV" : "DK"}; k += WG) {
    let tr = k / ${fwd ? "DV" : "DK"};
    let col = k % ${fwd ? "DV" : "DK"};
    let tt = r0 + tr;
    if (tt >= len) { continue; }
    let t = a + tt;
    // inter-chunk part: exp(P_t) times base_t (S0 after a start, else the entering state)
    let bk = base_kind(tt);
    let fromS0 = bk == 1u;
    var inter = 0.0;
    if (bk == 0u || (fromS0 && u.hasS0 != 0u)) {
      let sb = select(base, bh * DK * DV, fromS0);
      ${
    fwd
      ? `for (var i = 0u; i < DK; i++) {
        let k = sb + i * DV + col;
        inter += qn(bh, t, i) * select(cw[k], s0[k], fromS0);
      }`
      : `for (var c = 0u; c < DV; c++) {
        let k = sb + col * DV + c;
        inter += ${dout} + c] * select(cw[k], s0[k], fromS0);
      }`
  }
    }
    var acc = exp(cp[tt]) * inter;
    ${fwd ? "" : "cw[u.DQB + (bh * u.T + t) * DK + col] = acc;"}
    for (var jj = 0u; jj <= tt + PAD; jj++) {
      let v = sc[tr * CP + jj];
      if (v != 0.0) { acc += v * ${fwd ? "vp(bh, j0 + i32(jj), col)" : "xp(bh, j0 + i32(jj), col)"}; }
    }
    ${fwd ? "out[((b * u.T + t) * H + h) * DV + col] = acc;" : "out[(bh * u.T + t) * DK + col] = acc;"}
  }
}`;
}

/**
 * `cols`: for pair columns `j` of the chunk (`j = a-PAD .. e`), with `G` the exit-state gradient:
 * `dx_j = sum_t M[t,j] (y_j.dO_t) q_t + M[e,j] G y_j`, `dy_j = sum_t M[t,j] (q_t.x_j) dO_t + M[e,j] G^T x_j`,
 * and `CON[j, o] = sum_{t >= s} [seg] exp(P_t - P_s) (q_t.x_j)(y_j.dO_t) + [seg] exp(P_e - P_s) x_j^T G y_j`
 * for `s = j + o` (the terms of `d g_s`).
 */
function colsKernel(s: ChunkShape, pad: number, variant: "additive" | "delta" | "deltaNoExit"): string {
  const dout = "dout[((b * u.T + t) * H + h) * DV";
  const delta = variant !== "additive";
  const exit = variant !== "deltaNoExit";
  // the G y_j loop: a block of 32 invocations covers tj pair columns x ttn rows of G
  const tj = Math.min(8, s.RC);
  const ttn = 32 / tj;
  const ngj = Math.ceil(s.RC / tj);
  const totalK = ngj * tj * Math.ceil(s.dk / ttn) * ttn;
  const jbn = Math.ceil(s.RC / 4);
  const blocks = jbn * Math.ceil(s.C / 4);
  const tile = productTile(exit);
  return `${valueWgsl(delta)}
var<workgroup> gy: array<f32, ${s.RC * s.dk}>;
var<workgroup> gx: array<f32, ${s.RC * s.dv}>;
var<workgroup> wq: array<f32, ${s.RC * s.C}>;
var<workgroup> wd: array<f32, ${s.RC * s.C}>;
var<workgroup> dm: array<f32, ${s.RC * s.C}>;
var<workgroup> mex: array<f32, ${2 * s.RC}>;
${chunkEntry(`${Math.ceil((s.C + pad) / s.RC)}u`)}
  let h = bh % H;
  let c0 = tile * RC;
  let j0 = i32(a) - i32(PAD);
  let ncol = len + PAD;
  ${exit ? "let gb = u.GB + (bh * nck() + n) * DK * DV;" : ""}
  ${
    exit
      ? `// G y_j: rows of G differ per q, so a block of 32 invocations covers ${tj} columns x ${ttn} rows
  for (var k = lid; k < ${totalK}u; k += WG) {
    let w = k % 32u;
    let g = k / 32u;
    let jr = (g % ${ngj}u) * ${tj}u + w % ${tj}u;
    let q = (g / ${ngj}u) * ${ttn}u + w / ${tj}u;
    if (jr >= RC || q >= DK) { continue; }
    let jj = c0 + jr;
    var v = 0.0;
    if (jj < ncol) {
      let j = j0 + i32(jj);
      for (var c = 0u; c < DV; c++) { v += cw[gb + q * DV + c] * vp(bh, j, c); }
    }
    gy[jr * DK + q] = v;
  }
  // G^T x_j: consecutive invocations read consecutive columns of G
  for (var k = lid; k < RC * DV; k += WG) {
    let jr = k / DV;
    let c = k % DV;
    let jj = c0 + jr;
    var v = 0.0;
    if (jj < ncol) {
      let j = j0 + i32(jj);
      for (var i = 0u; i < DK; i++) { v += cw[gb + i * DV + c] * xp(bh, j, i); }
    }
    gx[jr * DV + c] = v;
  }`
      : `// no exit-state gradient in this variant
  for (var k = lid; k < RC * DK; k += WG) { gy[k] = 0.0; }
  for (var k = lid; k < RC * DV; k += WG) { gx[k] = 0.0; }`
  }
  workgroupBarrier();
  // (pair column, row) products, register-tiled: each invocation computes a 4 x 4 block of rows x pair
  // columns, so every value it reads serves 4 products (rows of q, dO, x, y differ per invocation)
  for (var bk = lid; bk < ${blocks}u; bk += WG) {
    let jr0 = (bk % ${jbn}u) * 4u;
    let tt0 = (bk / ${jbn}u) * 4u;
    ${tile.decl}
    for (var i = 0u; i < DK; i++) {
      ${tile.qxBody}
    }
    for (var c = 0u; c < DV; c++) {
      ${tile.ydBody}
    }
    ${tile.store}
  }
  for (var jr = lid; jr < RC; jr += WG) {
    let jj = c0 + jr;
    var me = 0.0;
    var ex = 0.0;
    if (jj < ncol) {
      let j = j0 + i32(jj);
      me = m_of(len - 1u, j, a);
      for (var i = 0u; i < DK; i++) { ex += xp(bh, j, i) * gy[jr * DK + i]; }
    }
    mex[2u * jr] = me;
    mex[2u * jr + 1u] = ex;
    ${exit ? "if (jj < ncol) { cw[u.EXJ + (bh * nck() + n) * CP + jj] = ex; }" : ""}
  }
  workgroupBarrier();
  for (var k = lid; k < RC * (DK + DV); k += WG) {
    let jr = k / (DK + DV);
    let q = k % (DK + DV);
    let jj = c0 + jr;
    if (jj >= ncol) { continue; }
    let j = j0 + i32(jj);
    if (q < DK) {
      ${
    exit
      ? `var v = mex[2u * jr] * gy[jr * DK + q];
      for (var tt = 0u; tt < len; tt++) { v += wq[jr * C + tt] * qn(bh, a + tt, q); }
      if (jj >= PAD) {
        out[u.gDX + (bh * (PAD + u.T + 1u) + u32(j + i32(PAD))) * DK + q] = v;
      } else {
        cw[u.SPX + ((bh * nck() + n) * PAD + jj) * DK + q] = v;
      }`
      : ""
  }
    } else {
      let c = q - DK;
      var v = mex[2u * jr] * gx[jr * DV + c];
      for (var tt = 0u; tt < len; tt++) {
        let t = a + tt;
        v += wd[jr * C + tt] * ${dout} + c];
      }
      ${
    delta ? `cw[u.${exit ? "DW" : "QD"} + (bh * u.T + u32(j)) * DV + c] = v;` : `if (jj >= PAD) {
        out[u.gDY + (bh * (PAD + u.T) + u32(j + i32(PAD))) * DV + c] = v;
      } else {
        cw[u.SPY + ((bh * nck() + n) * PAD + jj) * DV + c] = v;
      }`
  }
    }
  }
  ${
    delta ? "" : `  for (var k = lid; k < RC * NW; k += WG) {
    let jr = k / NW;
    let o = k % NW;
    let jj = c0 + jr;
    if (jj >= ncol) { continue; }
    let sa = i32(jj) - i32(PAD) + i32(o); // s - a
    if (sa < 0 || sa >= i32(len)) { continue; }
    let ss = u32(sa);
    var v = 0.0;
    for (var tt = ss; tt < len; tt++) {
      if (cseg[tt] == cseg[ss]) { v += exp(cp[tt] - cp[ss]) * dm[jr * C + tt]; }
    }
    if (cseg[len - 1u] == cseg[ss]) { v += exp(cp[len - 1u] - cp[ss]) * mex[2u * jr + 1u]; }
    cw[u.CON + ((bh * nck() + n) * CP + jj) * NW + o] = v;
  }
`
  }
}`;
}

/**
 * WGSL pieces of the `cols` kernel's 4 x 4 register tile (rows `tt0 + r` x pair columns `jr0 + c`):
 * declarations, the `q . x` and `dO . y` accumulation bodies, and the masked stores. Rows and columns
 * past the chunk are clamped for the loads and skipped at the store.
 */
function productTile(exit: boolean) {
  const R = [0, 1, 2, 3];
  const decl = [
    ...R.map((r) => `let t${r} = a + min(tt0 + ${r}u, len - 1u);`),
    ...R.map((c) => `let x${c} = j0 + i32(min(c0 + jr0 + ${c}u, ncol - 1u));`),
    ...R.flatMap((r) => R.map((c) => `var qx${r}${c} = 0.0;\n    var yd${r}${c} = 0.0;`)),
  ].join("\n    ");
  const qxBody = [
    ...R.map((r) => `let q${r} = qn(bh, t${r}, i);`),
    ...R.map((c) => `let p${c} = xp(bh, x${c}, i);`),
    ...R.flatMap((r) => R.map((c) => `qx${r}${c} += q${r} * p${c};`)),
  ].join("\n      ");
  const ydBody = [
    ...R.map((r) => `let d${r} = dout[((b * u.T + t${r}) * H + h) * DV + c];`),
    ...R.map((c) => `let y${c} = vp(bh, x${c}, c);`),
    ...R.flatMap((r) => R.map((c) => `yd${r}${c} += d${r} * y${c};`)),
  ].join("\n      ");
  const store = R.flatMap((r) =>
    R.map((c) =>
      `{
      let tt = tt0 + ${r}u;
      let jr = jr0 + ${c}u;
      let jj = c0 + jr;
      if (jr < RC && tt < C) {
        var vq = 0.0;
        var vd = 0.0;
        var vm = 0.0;
        if (jj < ncol && tt < len && jj <= tt + PAD) {
          let m = m_of(tt, x${c}, a);
          vq = m * yd${r}${c};
          vd = m * qx${r}${c};
          vm = qx${r}${c} * yd${r}${c};
        }
        wq[jr * C + tt] = vq;
        wd[jr * C + tt] = vd;
        dm[jr * C + tt] = vm;
        ${
        exit ? "if (jj < ncol && tt < len) { cw[u.DMM + ((bh * nck() + n) * C + tt) * CP + jj] = vm; }" : ""
      }
      }
    }`
    )
  ).join("\n    ");
  return { decl, qxBody, ydBody, store };
}

/** WGSL `vp(bh, j, c)`: the values the readout mixes: targets `y_j` (additive) or pseudo-values `w_j` (delta). */
function valueWgsl(delta: boolean): string {
  return delta
    ? "fn vp(bh: u32, j: i32, c: u32) -> f32 { return cw[u.WW + (bh * u.T + u32(j)) * DV + c]; }"
    : "fn vp(bh: u32, j: i32, c: u32) -> f32 { return yp(bh, j, c); }";
}
