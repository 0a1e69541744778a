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
 * - `state_increment`: per `(b, h, chunk, 64 state elements)`: `dS_n = sum_j M[e,j] x_j y_j^T`, the chunk decay
 *   `exp(P_e)` and which base the exit state has (`exitBaseKind`: 0 `S_in`, 1 `S0`, 2 zero);
 * - `state_scan`: per `(b, h, state element)`, sequential over chunks: the entering state of every chunk;
 * - `readout`: per `(b, h, chunk, R rows)`: the outputs;
 * - backward: `base_readout_grads` (per-chunk `sum exp(P_t) q_t dO_t^T`, split by the base: `S_in` or `S0`), `reverse_scan`
 *   (reverse scan: the gradient `G_n` of every chunk's exit state, `dS0`, `dCarryState`), `query_grads` (rows:
 *   `dq_t = S_t dO_t`, and its base part `dqBase`), `pair_column_grads` (per `(b, h, chunk, RC pair columns)`: `dx_j`,
 *   `dy_j`, the terms of `d g_s` (`dWriteGainTerms`) and the readout and exit weights `decayWeightsReadout`, `decayWeightsExit`), `decay_grads` (per
 *   `(b, h, chunk)`: `d g_t` and `d log gamma_t` by `decayGradKernel` of `chunk_wgsl.ts`: the sum
 *   over the decay factors whose chain holds step `t`, so no cancellation), `coef_grads` (per step:
 *   `d gamma = d log gamma / gamma` (0 where clamped or cut), then `coef_back(co, d gamma, 0, dg)` as
 *   in the recurrent backward) and `pair_row_grads` (per pair row: adds the pair gradients that later chunks
 *   computed for earlier rows, and the step statistic's gradient).
 *
 * Shapes (`BH = B*H`, `NCK = ceil(T / C)`, `PAD = W-1`): `ws` is the head-major workspace of
 * `fast_weight_recurrent.ts` (`QN [BH,T,Dk]`, `X [BH,XR,Dk]`, `Y [BH,YR,Dv]`, pair `p` at row `PAD+p`);
 * `stepinfo [B,T,2]` (`lo_t`, start flag); `cw` the chunk workspace, sections at the offsets of the
 * uniform block: `logDecay, writeGain, dWriteGain, dLogDecay, dStatistic [BH,T]`, `chunkDecay, exitBaseKind [BH,NCK]`, `chunkStateIncrement, entryState, dExitState [BH,NCK,Dk,Dv]`,
 * `finalState [BH,Dk,Dv]`, `dBaseReadout [BH,NCK,2,Dk,Dv]`, `dxPrecedingPairs [BH,NCK,PAD,Dk]`, `dyPrecedingPairs [BH,NCK,PAD,Dv]`,
 * `dWriteGainTerms [BH,NCK,C+PAD,W]`, `decayWeightsReadout [BH,NCK,C,C+PAD]`, `decayWeightsExit [BH,NCK,C+PAD]`, `dqBase [BH,T,Dk]` (`dLogDecay` holds
 * `d log gamma`); `g` the gradient workspace of the recurrent backward.
 * The `readout`, `query_grads`, `pair_column_grads` and `base_readout_grads` kernels also serve the delta rules (`fast_weight_chunk_delta.ts`),
 * with the solved pseudo-values `w` as values and `M = Gam`; `base_readout_grads` also falcon3
 * (`fast_weight_chunk_window_delta.ts`), whose `coef` also writes the window's top eigenvector (`topEigenvector`);
 * `chunkShader` (`fast_weight_chunk_shader.ts`) dispatches every pass.
 * The per-column rules (falcon2, falcon2a) run their own passes (`fast_weight_chunk_per_column.ts`).
 * Preconditions: additive rule with scalar `gamma`, `g` per step (not falcon2a); workgroup memory
 * for the chunk's step arrays (`4C` floats, `6C` for the delta rules) and the row/column tiles.
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import { type HeadConstants, statKind } from "./fast_weight_coef.ts";
import { windowSlots } from "./fast_weight_recurrent.ts";
import {
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  coefBackKernel,
  decayGradKernel,
  flatEntry,
  isDeltaChunkRule,
  isSolveChunkRule,
  prelude,
  stateTiles,
  stepCoefWgsl,
  tile4,
  tile4Each,
} from "./chunk_wgsl.ts";
import type { DeltaPass } from "./fast_weight_chunk_delta.ts";
import type { PerColumnPass } from "./fast_weight_chunk_per_column.ts";
import type { WindowDeltaPass } from "./fast_weight_chunk_window_delta.ts";

/** The passes of this file: every chunk pass but the delta, per-column and window-delta families' own. */
export type AdditivePass = Exclude<ChunkPass, DeltaPass | PerColumnPass | WindowDeltaPass>;

/**
 * WGSL of the additive family's chunk kernel `pass`, or of a pass it shares with the delta and
 * window families (`readout`, `query_grads`, `pair_column_grads`, `base_readout_grads`, ...); `fast_weight_chunk_shader.ts` dispatches every pass.
 */
export function additiveShader(
  pass: AdditivePass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
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
  cw[u.logDecay + idx] = log_gamma(co);
  cw[u.writeGain + idx] = co.b;
  ${solve ? "cw[u.eraseGain + idx] = co.a;" : ""}
  ${
        kind === "mu"
          ? `// the top eigenvector of the window's Gram matrix, for the statistic's gradient
  var st = step_stat(bh, t, pairs_at(bh / H, t));
  for (var o = 0u; o < NW; o++) { cw[u.topEigenvector + idx * NW + o] = st.u[o]; }`
          : ""
      }
}`;
    case "state_increment":
      return head + chunkSteps(false) + `
var<workgroup> me: array<f32, CP>;
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let j0 = i32(a) - i32(PAD);
  for (var k = lid; k < len + PAD; k += WG) { me[k] = m_of(len - 1u, j0 + i32(k), a); }
  workgroupBarrier();
  // a 4 x 4 block of the state per invocation
  let bk = tile * WG + lid;
  let nbc = (DV + 3u) / 4u;
  if (bk < ((DK + 3u) / 4u) * nbc) {
    let i0 = (bk / nbc) * 4u;
    let cb0 = (bk % nbc) * 4u;
    ${
        tile4(
          "e",
          "len + PAD",
          "xp(bh, j0 + i32(k), min(i0 + ${r}u, DK - 1u))",
          "yp(bh, j0 + i32(k), min(cb0 + ${c}u, DV - 1u))",
          "me[k]",
        )
      }
    ${
        tile4Each((r, c) =>
          `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) { cw[u.chunkStateIncrement + (bh * nck() + n) * DK * DV + (i0 + ${r}u) * DV + cb0 + ${c}u] = e${r}${c}; }`
        )
      }
  }
  if (tile == 0u && lid == 0u) {
    cw[u.chunkDecay + bh * nck() + n] = exp(cp[len - 1u]);
    cw[u.exitBaseKind + bh * nck() + n] = f32(base_kind(len - 1u));
  }
}`;
    case "state_scan":
      return head + `
${flatEntry("u.B * H * DK * DV")}
  let e = idx % (DK * DV);
  let bh = idx / (DK * DV);
  var st = select(0.0, init[idx], u.hasInit != 0u);
  let sz = select(0.0, s0[idx], u.hasS0 != 0u);
  for (var n = 0u; n < nck(); n++) {
    let k = (bh * nck() + n) * DK * DV + e;
    cw[u.entryState + k] = st;
    let dec = cw[u.chunkDecay + bh * nck() + n];
    let zk = cw[u.exitBaseKind + bh * nck() + n];
    st = dec * select(select(0.0, sz, zk == 1.0), st, zk == 0.0) + cw[u.chunkStateIncrement + k];
  }
  cw[u.finalState + idx] = st;
}`;
    case "readout":
    case "query_grads":
      return head + chunkSteps(delta) + rowsKernel(pass, s, windowSlots(config) - 1, delta);
    case "base_readout_grads":
      return head + chunkSteps(delta) + `
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let h = bh % H;
  // a 4 x 4 block of the state per invocation, split by the base of each step (S_in or S0)
  let bk = tile * WG + lid;
  let nbc = (DV + 3u) / 4u;
  if (bk < ((DK + 3u) / 4u) * nbc) {
    let i0 = (bk / nbc) * 4u;
    let cb0 = (bk % nbc) * 4u;
    ${
        ["uu", "vv"].map((p, kind) =>
          tile4(
            p,
            "len",
            "qn(bh, a + k, min(i0 + ${r}u, DK - 1u))",
            "dout[((b * u.T + a + k) * H + h) * DV + min(cb0 + ${c}u, DV - 1u)]",
            `select(0.0, exp(cp[k]), base_kind(k) == ${kind}u)`,
          )
        ).join("\n    ")
      }
    let k0 = ((bh * nck() + n) * 2u) * DK * DV;
    ${
        tile4Each((r, c) =>
          `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) {
      cw[u.dBaseReadout + k0 + (i0 + ${r}u) * DV + cb0 + ${c}u] = uu${r}${c};
      cw[u.dBaseReadout + k0 + DK * DV + (i0 + ${r}u) * DV + cb0 + ${c}u] = vv${r}${c};
    }`
        )
      }
  }
}`;
    case "reverse_scan":
      return head + `
${flatEntry("u.B * H * DK * DV")}
  let e = idx % (DK * DV);
  let bh = idx / (DK * DV);
  var gs = 0.0;
  var acc = 0.0;
  for (var nn = i32(nck()) - 1; nn >= 0; nn--) {
    let n = u32(nn);
    let k = (bh * nck() + n) * DK * DV + e;
    cw[u.dExitState + k] = gs;
    let dg = cw[u.chunkDecay + bh * nck() + n] * gs;
    let ku = ((bh * nck() + n) * 2u) * DK * DV + e;
    acc += cw[u.dBaseReadout + ku + DK * DV];
    let zk = cw[u.exitBaseKind + bh * nck() + n];
    if (zk == 0.0) {
      gs = cw[u.dBaseReadout + ku] + dg;
    } else {
      if (zk == 1.0) { acc += dg; }
      gs = cw[u.dBaseReadout + ku];
    }
  }
  out[u.gDS0 + idx] = acc;
  out[u.gDC + idx] = gs;
}`;
    case "pair_column_grads":
      return head + chunkSteps(delta) + colsKernel(s, windowSlots(config) - 1, delta ? "delta" : "additive");
    case "readout_dw":
      return head + chunkSteps(true) + colsKernel(s, 0, "deltaNoExit");
    case "decay_grads":
      return head + chunkSteps(false) + decayGradKernel(false);
    case "coef_grads":
      return head + coefBackKernel(config, "0.0", "cw[u.dWriteGain + idx]");
    case "pair_row_grads":
      return head + `
${flatEntry("u.B * H * (PAD + u.T + 1u) * (DK + DV)")}
  // one invocation per entry of a pair's dx row (e < DK) or dy row (e >= DK): neighbours touch neighbouring floats
  let e = idx % (DK + DV);
  let r = (idx / (DK + DV)) % (PAD + u.T + 1u);
  let bh = idx / ((DK + DV) * (PAD + u.T + 1u));
  let b = bh / H;
  let p = i32(r) - i32(PAD);
  let isX = e < DK;
  // X has PAD + T + 1 rows, Y has PAD + T
  if (!isX && r >= PAD + u.T) { return; }
  var k = u.gDX + (bh * (PAD + u.T + 1u) + r) * DK + e;
  if (!isX) { k = u.gDY + (bh * (PAD + u.T) + r) * DV + e - DK; }
  var acc = out[k];
  // pairs before chunk n (rows a_n - PAD .. a_n - 1) were differentiated by chunk n
  for (var n = u32(max(p + 1, 0) + i32(C) - 1) / C; n < nck() && i32(n * C) <= p + i32(PAD); n++) {
    let jj = u32(p - (i32(n * C) - i32(PAD)));
    if (isX) {
      acc += cw[u.dxPrecedingPairs + ((bh * nck() + n) * PAD + jj) * DK + e];
    } else {
      acc += cw[u.dyPrecedingPairs + ((bh * nck() + n) * PAD + jj) * DV + e - DK];
    }
  }
  ${
        kind === "none" ? "" : `// the step statistic (E or Ebar) of every step whose window holds pair p
  if (isX) {
    var w = 0.0;
    for (var o = 0u; o < NW; o++) {
      let s = p + i32(o);
      if (s < 0 || s >= i32(u.T)) { continue; }
      let lo = stepinfo[(b * u.T + u32(s)) * 2u];
      if (lo > p) { continue; }
      w += cw[u.dStatistic + bh * u.T + u32(s)] * 2.0 / f32(s - lo + 1);
    }
    acc += w * xp(bh, p, e);
  }`
      }
  out[k] = acc;
}`;
  }
}

/**
 * `readout`: `o_t = exp(P_t) base_t^T q_t + sum_j (M[t,j] q_t.x_j) y_j`;
 * `query_grads`: `dq_t = exp(P_t) base_t dO_t + sum_j (M[t,j] dO_t.y_j) x_j` (= `S_t dO_t`).
 */
function rowsKernel(pass: "readout" | "query_grads", s: ChunkShape, pad: number, delta: boolean): string {
  const fwd = pass === "readout";
  // the dO row of block row r (bound to t\${r}), for the dq kernel's inter-chunk part
  const NC = fwd ? "DV" : "DK";
  const doutAt = "dout[((b * u.T + t${r}) * H + h) * DV";
  return `${valueWgsl(delta)}
var<workgroup> sc: array<f32, ${s.R * (s.C + pad)}>;
${chunkEntry(`${Math.ceil(s.C / s.R)}u`)}
  let h = bh % H;
  let r0 = tile * R;
  let j0 = i32(a) - i32(PAD);
  // scores of the tile's rows, 4 rows x 4 pair columns per invocation (each value read serves 4 products)
  ${
    scoreTile(
      fwd ? "DK" : "DV",
      fwd ? "qn(bh, t${r}, k)" : "dout[((b * u.T + t${r}) * H + h) * DV + k]",
      fwd ? "xp(bh, jx${c}, k)" : "vp(bh, jx${c}, k)",
    )
  }
  workgroupBarrier();
  let base = u.entryState + (bh * nck() + n) * DK * DV;
  // 4 rows x 4 columns per invocation: the inter-chunk part against both bases (S_in and S0; each row
  // takes its own), then the intra-chunk part from the scores
  for (var bk = lid; bk < ((R + 3u) / 4u) * ((${NC} + 3u) / 4u); bk += WG) {
    let cl0 = (bk % ((${NC} + 3u) / 4u)) * 4u;
    let tr0 = (bk / ((${NC} + 3u) / 4u)) * 4u;
    ${[0, 1, 2, 3].map((r) => `let t${r} = a + min(r0 + tr0 + ${r}u, len - 1u);`).join("\n    ")}
    ${
    fwd
      ? tile4("ei", "DK", "qn(bh, t${r}, k)", "cw[base + k * DV + min(cl0 + ${c}u, DV - 1u)]") + "\n    " +
        tile4("es", "DK", "qn(bh, t${r}, k)", "s0[bh * DK * DV + k * DV + min(cl0 + ${c}u, DV - 1u)]")
      : tile4("ei", "DV", `${doutAt} + k]`, "cw[base + min(cl0 + ${c}u, DK - 1u) * DV + k]") + "\n    " +
        tile4("es", "DV", `${doutAt} + k]`, "s0[bh * DK * DV + min(cl0 + ${c}u, DK - 1u) * DV + k]")
  }
    ${
    tile4(
      "ea",
      "len + PAD",
      "sc[min(tr0 + ${r}u, R - 1u) * CP + k]",
      fwd
        ? "vp(bh, j0 + i32(k), min(cl0 + ${c}u, DV - 1u))"
        : "xp(bh, j0 + i32(k), min(cl0 + ${c}u, DK - 1u))",
    )
  }
    ${
    tile4Each((r, c) =>
      `{
      let tt = r0 + tr0 + ${r}u;
      let col = cl0 + ${c}u;
      if (tr0 + ${r}u < R && col < ${NC} && tt < len) {
        let t = a + tt;
        let bk = base_kind(tt);
        let fromS0 = bk == 1u;
        var inter = 0.0;
        if (bk == 0u || (fromS0 && u.hasS0 != 0u)) { inter = select(ei${r}${c}, es${r}${c}, fromS0); }
        let acc = exp(cp[tt]) * inter;
        ${fwd ? "" : "cw[u.dqBase + (bh * u.T + t) * DK + col] = acc;"}
        ${
        fwd
          ? `out[((b * u.T + t) * H + h) * DV + col] = acc + ea${r}${c};`
          : `out[(bh * u.T + t) * DK + col] = acc + ea${r}${c};`
      }
      }
    }`
    )
  }
  }
}`;
}

/**
 * `pair_column_grads`: for pair columns `j` of the chunk (`j = a-PAD .. e`), with `G` the exit-state gradient:
 * `dx_j = sum_t M[t,j] (y_j.dO_t) q_t + M[e,j] G y_j`, `dy_j = sum_t M[t,j] (q_t.x_j) dO_t + M[e,j] G^T x_j`,
 * and `dWriteGainTerms[j, o] = sum_{t >= s} [seg] exp(P_t - P_s) (q_t.x_j)(y_j.dO_t) + [seg] exp(P_e - P_s) x_j^T G y_j`
 * for `s = j + o` (the terms of `d g_s`).
 */
function colsKernel(s: ChunkShape, pad: number, variant: "additive" | "delta" | "deltaNoExit"): string {
  const delta = variant !== "additive";
  const exit = variant !== "deltaNoExit";
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
  ${exit ? "let gb = u.dExitState + (bh * nck() + n) * DK * DV;" : ""}
  ${
    exit
      ? `// G y_j and G^T x_j as 4 x 4 register tiles (4 rows of G x 4 pair columns, then 4 columns of G x
  // 4 pair columns): every value an invocation reads serves 4 products
  ${exitTile("gy", "DK", "DV", "cw[gb + min(o0 + ${r}u, DK - 1u) * DV + k]", "vp(bh, jx${c}, k)")}
  ${exitTile("gx", "DV", "DK", "cw[gb + k * DV + min(o0 + ${r}u, DV - 1u)]", "xp(bh, jx${c}, k)")}`
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
    ${tile.qxBody}
    ${tile.ydBody}
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
    ${exit ? "if (jj < ncol) { cw[u.decayWeightsExit + (bh * nck() + n) * CP + jj] = ex; }" : ""}
  }
  workgroupBarrier();
  // dx_j (exit variants) and dy_j, 4 pair columns x 4 entries per invocation
  ${
    exit
      ? colsGradTile("DK", "wq", "qn(bh, a + k, min(o0 + ${c}u, DK - 1u))", "gy", (o) =>
        `if (jj >= PAD) {
        out[u.gDX + (bh * (PAD + u.T + 1u) + u32(j + i32(PAD))) * DK + ${o}] = v;
      } else {
        cw[u.dxPrecedingPairs + ((bh * nck() + n) * PAD + jj) * DK + ${o}] = v;
      }`)
      : ""
  }
  ${
    colsGradTile(
      "DV",
      "wd",
      "dout[((b * u.T + a + k) * H + h) * DV + min(o0 + ${c}u, DV - 1u)]",
      "gx",
      (o) =>
        delta
          ? `cw[u.${exit ? "dPseudoValues" : "dPseudoValuesReadout"} + (bh * u.T + u32(j)) * DV + ${o}] = v;`
          : `if (jj >= PAD) {
        out[u.gDY + (bh * (PAD + u.T) + u32(j + i32(PAD))) * DV + ${o}] = v;
      } else {
        cw[u.dyPrecedingPairs + ((bh * nck() + n) * PAD + jj) * DV + ${o}] = v;
      }`,
    )
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
    cw[u.dWriteGainTerms + ((bh * nck() + n) * CP + jj) * NW + o] = v;
  }
`
  }
}`;
}

/**
 * WGSL of the `readout` / `query_grads` scores as 4 x 4 register tiles: `sc[tr * CP + jj] = M[t, j] sum_k A(t, k) B(j, k)`
 * over `k < K` for the tile's rows `tr < R` (`t = a + r0 + tr`) and pair columns `jj < CP`, zero where the
 * mask is; `a` / `b` are WGSL templates with `${r}` (row of the block, bound to `t${r}`) / `${c}` (pair
 * column, bound to `jx${c}`) and the loop index `k`. Reads are clamped to valid rows and columns.
 */
function scoreTile(K: string, a: string, b: string): string {
  return `for (var bk = lid; bk < ((R + 3u) / 4u) * ((CP + 3u) / 4u); bk += WG) {
    let jj0 = (bk % ((CP + 3u) / 4u)) * 4u;
    let tr0 = (bk / ((CP + 3u) / 4u)) * 4u;
    ${[0, 1, 2, 3].map((r) => `let t${r} = a + min(r0 + tr0 + ${r}u, len - 1u);`).join("\n    ")}
    ${[0, 1, 2, 3].map((c) => `let jx${c} = j0 + i32(min(jj0 + ${c}u, CP - 1u));`).join("\n    ")}
    ${tile4("e", K, a, b)}
    ${
    tile4Each((r, c) =>
      `{
      let tr = tr0 + ${r}u;
      let jj = jj0 + ${c}u;
      let tt = r0 + tr;
      if (tr < R && jj < CP) {
        var v = 0.0;
        if (tt < len && jj <= tt + PAD) { v = m_of(tt, jx${c}, a) * e${r}${c}; }
        sc[tr * CP + jj] = v;
      }
    }`
    )
  }
  }`;
}

/**
 * WGSL of one `pair_column_grads` exit-state product as 4 x 4 register tiles: `dst[jr * N + o] = sum_k A(o, k) B(j, k)`
 * over `k < K`, for the tile's pair columns `jr < RC` and outputs `o < N`; `a` / `b` are WGSL templates
 * with `${r}` (output row of the block) / `${c}` (pair column of the block, bound to `jx${c}`) and the
 * loop index `k`. Reads are clamped inside the arrays; what lies outside is not stored.
 */
function exitTile(dst: string, N: string, K: string, a: string, b: string): string {
  return `for (var bk = lid; bk < ((RC + 3u) / 4u) * ((${N} + 3u) / 4u); bk += WG) {
    let jr0 = (bk % ((RC + 3u) / 4u)) * 4u;
    let o0 = (bk / ((RC + 3u) / 4u)) * 4u;
    ${[0, 1, 2, 3].map((c) => `let jx${c} = j0 + i32(min(c0 + jr0 + ${c}u, ncol - 1u));`).join("\n    ")}
    ${tile4("e", K, a, b)}
    ${
    tile4Each((r, c) =>
      `if (jr0 + ${c}u < RC && o0 + ${r}u < ${N}) { ${dst}[(jr0 + ${c}u) * ${N} + o0 + ${r}u] = select(0.0, e${r}${c}, c0 + jr0 + ${c}u < ncol); }`
    )
  }
  }`;
}

/**
 * WGSL of a `pair_column_grads` gradient as 4 x 4 blocks (pair columns `jr0 + r` x entries `o0 + c`, `o < N`):
 * `v = mex[jr] ex[jr, o] + sum_{tt < len} w[jr, tt] B(tt, o)` with `w` the workgroup weights (`wq`, `wd`),
 * `b` a WGSL template in `${c}` and the loop index `k`; `store(o)` writes `v` for the pair `j`.
 */
function colsGradTile(N: string, w: string, b: string, ex: string, store: (o: string) => string): string {
  return `for (var bk = lid; bk < ((RC + 3u) / 4u) * ((${N} + 3u) / 4u); bk += WG) {
    let jr0 = (bk % ((RC + 3u) / 4u)) * 4u;
    let o0 = (bk / ((RC + 3u) / 4u)) * 4u;
    ${tile4("e", "len", `${w}[min(jr0 + \${r}u, RC - 1u) * C + k]`, b)}
    ${
    tile4Each((r, c) =>
      `{
      let jr = jr0 + ${r}u;
      let o = o0 + ${c}u;
      let jj = c0 + jr;
      if (jr < RC && o < ${N} && jj < ncol) {
        let j = j0 + i32(jj);
        let v = mex[2u * jr] * ${ex}[jr * ${N} + o] + e${r}${c};
        ${store("o")}
      }
    }`
    )
  }
  }`;
}

/**
 * WGSL pieces of the `pair_column_grads` kernel's 4 x 4 register tile (rows `tt0 + r` x pair columns `jr0 + c`):
 * `qx` = q_t . x_j, `yd` = dO_t . y_j, then the masked stores of the readout weights and their gradient
 * terms. Rows and columns past the chunk are clamped for the loads and skipped at the store.
 */
function productTile(exit: boolean) {
  const decl = [0, 1, 2, 3].map((r) =>
    `let t${r} = a + min(tt0 + ${r}u, len - 1u);
    let x${r} = j0 + i32(min(c0 + jr0 + ${r}u, ncol - 1u));`
  ).join("\n    ");
  const qxBody = tile4("qx", "DK", "qn(bh, t${r}, k)", "xp(bh, x${c}, k)");
  const ydBody = tile4("yd", "DV", "dout[((b * u.T + t${r}) * H + h) * DV + k]", "vp(bh, x${c}, k)");
  const store = tile4Each((r, c) =>
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
      exit
        ? "if (jj < ncol && tt < len) { cw[u.decayWeightsReadout + ((bh * nck() + n) * C + tt) * CP + jj] = vm; }"
        : ""
    }
      }
    }`
  );
  return { decl, qxBody, ydBody, store };
}

/** WGSL `vp(bh, j, c)`: the values the readout mixes: targets `y_j` (additive) or pseudo-values `w_j` (delta). */
function valueWgsl(delta: boolean): string {
  return delta
    ? "fn vp(bh: u32, j: i32, c: u32) -> f32 { return cw[u.pseudoValues + (bh * u.T + u32(j)) * DV + c]; }"
    : "fn vp(bh: u32, j: i32, c: u32) -> f32 { return yp(bh, j, c); }";
}
