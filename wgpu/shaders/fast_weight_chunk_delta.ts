/**
 * WGSL of the chunk-parallel kernels of the DELTA rules with scalar coefficients and no window
 * (falcon1, deltanet, gated_deltanet), forward and backward, float32 (SPEC section 4).
 *
 * Recurrence: `S_t = gamma_t S_{t-1} + x_t w_t^T`, `w_t = b_t y_t - a_t S_{t-1}^T x_t` (coefficients
 * from the recurrent kernels' `coef()`). For a chunk `a..e` entering with `S_in`, with `P_t` and
 * `seg(t)` as in `fast_weight_chunk_additive.ts`, `Pp_t = P_t - log gamma_t` (0 at a start),
 * `base_t = seg(t) > 0 ? S0 : S_in`, `Gam[t,s] = [s <= t, same segment] exp(P_t - P_s)` and
 * `Gp[t,s] = [s < t, same segment] exp(Pp_t - P_s)` (masked before `exp`):
 * - `(I + A) W = R` with `A[t,s] = a_t Gp[t,s] x_t.x_s`, `R_t = b_t y_t - a_t exp(Pp_t) base_t^T x_t`;
 *   split as `W = U0 - V S_in` (`U0` solves the `S0` and `y` terms, `V` the `S_in` rows; sections `pseudoValuesConstant`,
 *   `pseudoValuesStateFactor`);
 * - `o_t = exp(P_t) base_t^T q_t + sum_s Gam[t,s] (q_t.x_s) w_s` (the additive readout with values `w`);
 * - `S_exit = K S_in + Bv`, `K = [no start] exp(P_e) I - X^T diag(Gam[e,:]) V`,
 *   `Bv = [start] exp(P_e) S0 + X^T diag(Gam[e,:]) U0`.
 *
 * Kernels (`fastweight_chunk_<pass>_f32`): `solve_matrix` (per `(b, h, chunk)`, 4 x 4 blocks: `A`), `solve`
 * (per `(b, h, chunk)`, one invocation per column of `U0 | V`: forward substitution), `trans` (per
 * `(b, h, chunk)`, 4 x 4 blocks: `K`, `Bv`), `delta_state_scan` (per `(b, h)` and 4 value columns, sequential over
 * chunks: `S_in` of every chunk), `pseudo_values` (per `(b, h, t, column)`: `W`). The readout runs the
 * shared `out` kernel with values `w`.
 * Backward: `uv`, `readout_dw` (the readout's `dW` without the exit term, `Qd`) and `scan_link`
 * (`L_n = U_n - V^T Qd`) give the reverse scan `delta_reverse_scan` (`G_{n-1} = K_n^T G_n + L_n`); then `cols`
 * (`dx` of the readout and exit, `dW`), `solve_transposed` (`dR = (I + A)^-T dW`, back substitution per
 * column), `dq`, `pairs` (per `(b, h, chunk, RP rows)`: everything `A` and `R` feed: `dx`, `dy = b dR`,
 * `da`, `db`, the log-decay terms), `delta_decay_grads`/`delta_coef_grads` (`d log gamma`, then `coef_back`), `s0_grad_parts`/
 * `s0_grad_sum` (`dS0`) and `pair_row_grads` (the statistic's `dx`).
 * Log-decay gradient (`delta_decay_grads`, `decayGradKernel` of `chunk_wgsl.ts`): per step `r`, the sum over the
 * decay factors whose chain holds `r`, readout and exit as for the additive rules (values `w`), plus
 * the solve's `Gp[t,s]` (`decayWeightsSolve[t,s] = dA[t,s] A[t,s]`) and `exp(Pp_t)` (`decayWeightsSolveBase_t`) factors.
 * Workspace sections `[BH, ...]` (offsets in the uniform block): `eraseGain [T]`, `solveMatrix [NCK, C, C]`,
 * `pseudoValuesConstant [NCK, C, Dv]`, `pseudoValuesStateFactor [NCK, C, Dk]`, `transitionMatrix [NCK, Dk, Dk]`, `chunkStateIncrement` (= `Bv`), `pseudoValues, dPseudoValuesReadout, dPseudoValues, dRightHandSide [T, Dv]`,
 * `reverseScanLink, dS0Parts [NCK, Dk, Dv]`, `dEraseGain, dDeltaWriteGain, decayWeightsSolveBase [T]`, `decayWeightsSolve [NCK, C, C]`, with `entryState`, `finalState`, `dExitState`, `dBaseReadout`, `dLogDecay`,
 * `dStatistic`, `decayWeightsReadout`, `decayWeightsExit`, `dqBase` shared.
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import type { HeadConstants } from "./fast_weight_coef.ts";
import {
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  coefBackKernel,
  decayGradKernel,
  flatEntry,
  prelude,
  SCAN_COLUMNS,
  solveMatrixTiles,
  stateTiles,
  tile4,
  tile4Each,
  transitionTiles,
} from "./chunk_wgsl.ts";

/** Passes only the delta rules run. */
export const DELTA_ONLY_PASSES = [
  "solve_matrix",
  "solve",
  "trans",
  "delta_state_scan",
  "pseudo_values",
  "scan_link",
  "delta_reverse_scan",
  "solve_transposed",
  "pairs",
  "delta_decay_grads",
  "delta_coef_grads",
  "s0_grad_parts",
  "s0_grad_sum",
] as const satisfies readonly ChunkPass[];

/** One delta-only pass. */
export type DeltaPass = typeof DELTA_ONLY_PASSES[number];

/** Whether a pass is delta-only. */
export function isDeltaPass(pass: ChunkPass): pass is DeltaPass {
  return (DELTA_ONLY_PASSES as readonly string[]).includes(pass);
}

// addressing helpers of the delta sections (n = chunk, t = step inside the chunk)
const ADDR = `
fn solve_matrix_at(bh: u32, n: u32, t: u32, s: u32) -> u32 { return u.solveMatrix + ((bh * nck() + n) * C + t) * C + s; }
fn pseudo_values_constant_at(bh: u32, n: u32, t: u32, c: u32) -> u32 { return u.pseudoValuesConstant + ((bh * nck() + n) * C + t) * DV + c; }
fn pseudo_values_state_factor_at(bh: u32, n: u32, t: u32, i: u32) -> u32 { return u.pseudoValuesStateFactor + ((bh * nck() + n) * C + t) * DK + i; }
fn row(bh: u32, t: u32, c: u32) -> u32 { return (bh * u.T + t) * DV + c; }
`;

/** WGSL of a delta-only pass (entry point `main`). */
export function deltaShader(
  pass: DeltaPass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
  const head = prelude(pass, config, s, heads) + ADDR;
  switch (pass) {
    case "solve_matrix":
      return head + chunkSteps(true) + `
${chunkEntry(`${solveMatrixTiles(s.C)}u`)}
  // one 4 x 4 block of (t, s) per invocation: every x value read serves 4 products
  let bk = tile * WG + lid;
  let nb = (C + 3u) / 4u;
  if (bk < nb * nb) {
    let t0 = (bk / nb) * 4u;
    let sb0 = (bk % nb) * 4u;
    ${solveMatrixBlock()}
  }
}`;
    case "solve":
      return head + chunkSteps(true) + `
${chunkEntry("1u")}
  for (var col = lid; col < DV + DK; col += WG) {
    for (var t = 0u; t < len; t++) {
      let ex = exp(cpp[t]);
      var r = 0.0;
      if (col < DV) {
        r = cg[t] * yp(bh, i32(a + t), col);
        if (base_kind(t) == 1u && u.hasS0 != 0u) {
          var sx = 0.0;
          for (var i = 0u; i < DK; i++) { sx += s0[(bh * DK + i) * DV + col] * xp(bh, i32(a + t), i); }
          r -= cga[t] * ex * sx;
        }
        for (var q = 0u; q < t; q++) { r -= cw[solve_matrix_at(bh, n, t, q)] * cw[pseudo_values_constant_at(bh, n, q, col)]; }
        cw[pseudo_values_constant_at(bh, n, t, col)] = r;
      } else {
        let i = col - DV;
        if (base_kind(t) == 0u) { r = cga[t] * ex * xp(bh, i32(a + t), i); }
        for (var q = 0u; q < t; q++) { r -= cw[solve_matrix_at(bh, n, t, q)] * cw[pseudo_values_state_factor_at(bh, n, q, i)]; }
        cw[pseudo_values_state_factor_at(bh, n, t, i)] = r;
      }
    }
  }
}`;
    case "trans":
      return head + chunkSteps(true) + `
var<workgroup> ge: array<f32, C>;
${chunkEntry(`${transitionTiles(s.dk, s.dv)}u`)}
  for (var k = lid; k < len; k += WG) {
    var v = 0.0;
    if (cseg[k] == cseg[len - 1u]) { v = exp(cp[len - 1u] - cp[k]); }
    ge[k] = v;
  }
  workgroupBarrier();
  let dec = exp(cp[len - 1u]);
  let bk = base_kind(len - 1u);
  // 4 x 4 blocks per invocation: first of K [Dk, Dk], then of D [Dk, Dv]
  let blk = tile * WG + lid;
  let nr = (DK + 3u) / 4u;
  let nkm = nr * nr;
  let nds = nr * ((DV + 3u) / 4u);
  if (blk < nkm) {
    let i0 = (blk / nr) * 4u;
    let i20 = (blk % nr) * 4u;
    ${
        tile4(
          "e",
          "len",
          "xp(bh, i32(a + k), min(i0 + ${r}u, DK - 1u))",
          "cw[pseudo_values_state_factor_at(bh, n, k, min(i20 + ${c}u, DK - 1u))]",
          "ge[k]",
        )
      }
    ${
        tile4Each((r, c) =>
          `if (i0 + ${r}u < DK && i20 + ${c}u < DK) { cw[u.transitionMatrix + ((bh * nck() + n) * DK + i0 + ${r}u) * DK + i20 + ${c}u] = select(0.0, dec, bk == 0u && ${r}u + i0 == ${c}u + i20) - e${r}${c}; }`
        )
      }
  } else if (blk < nkm + nds) {
    let nc = (DV + 3u) / 4u;
    let i0 = ((blk - nkm) / nc) * 4u;
    let cb0 = ((blk - nkm) % nc) * 4u;
    ${
        tile4(
          "e",
          "len",
          "xp(bh, i32(a + k), min(i0 + ${r}u, DK - 1u))",
          "cw[pseudo_values_constant_at(bh, n, k, min(cb0 + ${c}u, DV - 1u))]",
          "ge[k]",
        )
      }
    ${
        tile4Each((r, c) =>
          `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) {
      var v = 0.0;
      if (bk == 1u && u.hasS0 != 0u) { v = dec * s0[(bh * DK + i0 + ${r}u) * DV + cb0 + ${c}u]; }
      cw[u.chunkStateIncrement + ((bh * nck() + n) * DK + i0 + ${r}u) * DV + cb0 + ${c}u] = v + e${r}${c};
    }`
        )
      }
  }
}`;
    case "delta_state_scan":
      return head + scanKernel(s, false);
    case "pseudo_values":
      return head + `
${flatEntry("u.B * H * u.T * DV")}
  let c = idx % DV;
  let bt = idx / DV;
  let t = bt % u.T;
  let bh = bt / u.T;
  let n = t / C;
  let tt = t - n * C;
  var w = cw[pseudo_values_constant_at(bh, n, tt, c)];
  for (var i = 0u; i < DK; i++) {
    w -= cw[pseudo_values_state_factor_at(bh, n, tt, i)] * cw[u.entryState + ((bh * nck() + n) * DK + i) * DV + c];
  }
  cw[u.pseudoValues + idx] = w;
}`;
    case "scan_link":
      return head + chunkSteps(true) + `
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  ${
        stateBlock(
          "cw[pseudo_values_state_factor_at(bh, n, k, min(i0 + ${r}u, DK - 1u))]",
          "cw[u.dPseudoValuesReadout + row(bh, a + k, min(cb0 + ${c}u, DV - 1u))]",
          "",
          (e) =>
            `cw[u.reverseScanLink + (bh * nck() + n) * DK * DV + ${e}] = cw[u.dBaseReadout + ((bh * nck() + n) * 2u) * DK * DV + ${e}] - `,
        )
      }
}`;
    case "delta_reverse_scan":
      return head + scanKernel(s, true);
    case "solve_transposed":
      return head + chunkSteps(true) + `
${chunkEntry("1u")}
  for (var c = lid; c < DV; c += WG) {
    for (var tr = i32(len) - 1; tr >= 0; tr--) {
      let t = u32(tr);
      var r = cw[u.dPseudoValues + row(bh, a + t, c)];
      for (var t2 = t + 1u; t2 < len; t2++) { r -= cw[solve_matrix_at(bh, n, t2, t)] * cw[u.dRightHandSide + row(bh, a + t2, c)]; }
      cw[u.dRightHandSide + row(bh, a + t, c)] = r;
    }
  }
}`;
    case "pairs":
      return head + chunkSteps(true) + pairsKernel(s);
    case "delta_decay_grads":
      return head + chunkSteps(true) + decayGradKernel(true);
    case "delta_coef_grads":
      return head + coefBackKernel(config, "cw[u.dEraseGain + idx]", "cw[u.dDeltaWriteGain + idx]");
    case "s0_grad_parts":
      return head + chunkSteps(true) + `
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let gexit = select(0.0, exp(cp[len - 1u]), base_kind(len - 1u) == 1u);
  ${
        stateBlock(
          "xp(bh, i32(a + k), min(i0 + ${r}u, DK - 1u))",
          "cw[u.dRightHandSide + row(bh, a + k, min(cb0 + ${c}u, DV - 1u))]",
          "select(0.0, cga[k] * exp(cpp[k]), base_kind(k) == 1u)",
          (e) =>
            `cw[u.dS0Parts + (bh * nck() + n) * DK * DV + ${e}] = cw[u.dBaseReadout + ((bh * nck() + n) * 2u + 1u) * DK * DV + ${e}] + gexit * cw[u.dExitState + (bh * nck() + n) * DK * DV + ${e}] - `,
        )
      }
}`;
    case "s0_grad_sum":
      return head + `
${flatEntry("u.B * H * DK * DV")}
  let e = idx % (DK * DV);
  let bh = idx / (DK * DV);
  var acc = 0.0;
  for (var n = 0u; n < nck(); n++) { acc += cw[u.dS0Parts + (bh * nck() + n) * DK * DV + e]; }
  out[u.gDS0 + idx] = acc;
}`;
  }
}

/** WGSL of one `solve_matrix` block: `A[t, s] = a_t exp(Pp_t - P_s) x_t . x_s` for `s < t` in one segment, else 0. */
function solveMatrixBlock(): string {
  return `${[0, 1, 2, 3].map((r) => `let ta${r} = i32(a + min(t0 + ${r}u, len - 1u));`).join("\n    ")}
    ${[0, 1, 2, 3].map((c) => `let sa${c} = i32(a + min(sb0 + ${c}u, len - 1u));`).join("\n    ")}
    ${tile4("e", "DK", "xp(bh, ta${r}, k)", "xp(bh, sa${c}, k)")}
    ${
    tile4Each((r, c) =>
      `{
      let t = t0 + ${r}u;
      let sx = sb0 + ${c}u;
      if (t < C && sx < C) {
        var v = 0.0;
        if (t < len && sx < t && cseg[sx] == cseg[t]) { v = cga[t] * exp(cpp[t] - cp[sx]) * e${r}${c}; }
        cw[solve_matrix_at(bh, n, t, sx)] = v;
      }
    }`
    )
  }`;
}

/**
 * WGSL of one `pairs` block (rows `jt = r0 + jr0 + r`, columns `kk = kb0 + c`): per entry in one segment
 * off the diagonal, with `(t, s) = (max, min)(jt, kk)`, `f = -(dR_t . W_s) a_t exp(Pp_t - P_s)` into `scx`,
 * and below the diagonal `-(dR_t . W_s) exp(Pp_t - P_s) (x_jt . x_kk)` into `sv1` and `f (x_jt . x_kk)`
 * into `decayWeightsSolve`; zero elsewhere.
 */
function pairsBlock(): string {
  return `${[0, 1, 2, 3].map((r) => `let jt${r} = a + min(r0 + jr0 + ${r}u, len - 1u);`).join("\n    ")}
    ${[0, 1, 2, 3].map((c) => `let kk${c} = a + min(kb0 + ${c}u, len - 1u);`).join("\n    ")}
    ${tile4("xx", "DK", "xp(bh, i32(jt${r}), k)", "xp(bh, i32(kk${c}), k)")}
    ${
    tile4("dl", "DV", "cw[u.dRightHandSide + row(bh, jt${r}, k)]", "cw[u.pseudoValues + row(bh, kk${c}, k)]")
  }
    ${
    tile4("du", "DV", "cw[u.pseudoValues + row(bh, jt${r}, k)]", "cw[u.dRightHandSide + row(bh, kk${c}, k)]")
  }
    ${
    tile4Each((r, c) =>
      `{
      let jr = jr0 + ${r}u;
      let jt = r0 + jr;
      let kk = kb0 + ${c}u;
      if (jr < RP && kk < C) {
        var cx = 0.0;
        var v1 = 0.0;
        var v2 = 0.0;
        if (jt < len && kk < len && kk != jt && cseg[kk] == cseg[jt]) {
          let tq = max(jt, kk);
          let sq = min(jt, kk);
          let dw = select(du${r}${c}, dl${r}${c}, kk < jt);
          let gp = exp(cpp[tq] - cp[sq]);
          let f = -dw * cga[tq] * gp;
          cx = f;
          if (kk < jt) {
            v1 = -dw * gp * xx${r}${c};
            v2 = f * xx${r}${c};
          }
        }
        scx[jr * C + kk] = cx;
        sv1[jr * C + kk] = v1;
        if (jt < len && kk < len) { cw[u.decayWeightsSolve + ((bh * nck() + n) * C + jt) * C + kk] = select(0.0, v2, kk < jt); }
      }
    }`
    )
  }`;
}

/**
 * WGSL of a state-shaped pass as 4 x 4 blocks per invocation: `assign(e)` + `sum_k [w(k)] a(k, i) b(k, c)`
 * for the block's entries `e = i * DV + c` (`a`, `b`, `w` as in {@linkcode tile4}, the block at `i0`,
 * `cb0`; `assign` ends with the operator that joins the sum).
 */
function stateBlock(a: string, b: string, w: string, assign: (e: string) => string): string {
  return `let bk = tile * WG + lid;
  let nbc = (DV + 3u) / 4u;
  if (bk < ((DK + 3u) / 4u) * nbc) {
    let i0 = (bk / nbc) * 4u;
    let cb0 = (bk % nbc) * 4u;
    ${tile4("e", "len", a, b, w || undefined)}
    ${
    tile4Each((r, c) =>
      `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) { ${assign(`(i0 + ${r}u) * DV + cb0 + ${c}u`)}e${r}${c}; }`
    )
  }
  }`;
}

/**
 * `pairs`: for rows `j` of the chunk, with `F[t,s] = -(dR_t.w_s) a_t Gp[t,s]` (`s < t`):
 * `dx_j += sum_k (F[j,k] + F[k,j]) x_k - a_j exp(Pp_j) base_j dR_j`, `dy_j = b_j dR_j`,
 * `da_j = sum_s -(dR_j.w_s) Gp[j,s] x_j.x_s - exp(Pp_j) dR_j.(base_j^T x_j)`, `db_j = dR_j.y_j`,
 * and the decay factors' shares for `delta_decay_grads`: `decayWeightsSolve[t,s] = F[t,s] x_t.x_s` (factor `Gp[t,s]`) and
 * `decayWeightsSolveBase_t = -a_t exp(Pp_t) dR_t.(base_t^T x_t)` (factor `exp(Pp_t)`).
 */
function pairsKernel(s: ChunkShape): string {
  return `
var<workgroup> scx: array<f32, ${s.RP * s.C}>;
var<workgroup> sv1: array<f32, ${s.RP * s.C}>;
var<workgroup> sxb: array<f32, ${s.RP * s.dk}>;
${chunkEntry(`${Math.ceil(s.C / s.RP)}u`)}
  let r0 = tile * RP;
  // 4 rows jt x 4 columns kk per invocation: x_jt . x_kk, DR_jt . W_kk (used below the diagonal) and
  // DR_kk . W_jt (above it), each value read serving 4 products
  for (var bk = lid; bk < ((RP + 3u) / 4u) * ((C + 3u) / 4u); bk += WG) {
    let jr0 = (bk / ((C + 3u) / 4u)) * 4u;
    let kb0 = (bk % ((C + 3u) / 4u)) * 4u;
    ${pairsBlock()}
  }
  workgroupBarrier();
  let bin = u.entryState + (bh * nck() + n) * DK * DV;

  // dx rows as 4 x 4 blocks (rows jt x key entries q): the pair terms, and the right-hand side's
  // -a_t exp(Pp_t) base_t^T x_t against both bases (S_in and S0; each row takes its own)
  for (var bk = lid; bk < ((RP + 3u) / 4u) * ((DK + 3u) / 4u); bk += WG) {
    let q0 = (bk % ((DK + 3u) / 4u)) * 4u;
    let jr0 = (bk / ((DK + 3u) / 4u)) * 4u;
    ${[0, 1, 2, 3].map((r) => `let tp${r} = a + min(r0 + jr0 + ${r}u, len - 1u);`).join("\n    ")}
    ${
    tile4(
      "px",
      "len",
      "scx[min(jr0 + ${r}u, RP - 1u) * C + k]",
      "xp(bh, i32(a + k), min(q0 + ${c}u, DK - 1u))",
    )
  }
    ${
    tile4(
      "bi",
      "DV",
      "cw[u.dRightHandSide + row(bh, tp${r}, k)]",
      "cw[bin + min(q0 + ${c}u, DK - 1u) * DV + k]",
    )
  }
    ${
    tile4(
      "bs",
      "DV",
      "cw[u.dRightHandSide + row(bh, tp${r}, k)]",
      "s0[bh * DK * DV + min(q0 + ${c}u, DK - 1u) * DV + k]",
    )
  }
    ${
    tile4Each((r, c) =>
      `{
      let jr = jr0 + ${r}u;
      let q = q0 + ${c}u;
      let jt = r0 + jr;
      if (jr < RP && q < DK && jt < len) {
        let t = a + jt;
        let bk = base_kind(jt);
        let fromS0 = bk == 1u;
        var bd = 0.0;
        if (bk == 0u || (fromS0 && u.hasS0 != 0u)) { bd = select(bi${r}${c}, bs${r}${c}, fromS0); }
        let v = px${r}${c} - cga[jt] * exp(cpp[jt]) * bd;
        sxb[jr * DK + q] = xp(bh, i32(t), q) * bd;
        let kx = u.gDX + (bh * (u.T + 1u) + t) * DK + q;
        out[kx] = out[kx] + v;
      }
    }`
    )
  }
  }
  for (var k = lid; k < RP * DV; k += WG) {
    let jt = r0 + k / DV;
    let c = k % DV;
    if (jt < len) { out[u.gDY + (bh * u.T + a + jt) * DV + c] = cg[jt] * cw[u.dRightHandSide + row(bh, a + jt, c)]; }
  }
  workgroupBarrier();
  for (var jr = lid; jr < RP; jr += WG) {
    let jt = r0 + jr;
    if (jt >= len) { continue; }
    let t = a + jt;
    var s1 = 0.0;
    for (var kk = 0u; kk < len; kk++) { s1 += sv1[jr * C + kk]; }
    var xbd = 0.0;
    for (var i = 0u; i < DK; i++) { xbd += sxb[jr * DK + i]; }
    var db = 0.0;
    for (var c = 0u; c < DV; c++) { db += cw[u.dRightHandSide + row(bh, t, c)] * yp(bh, i32(t), c); }
    let ex = exp(cpp[jt]);
    let k = bh * u.T + t;
    cw[u.dEraseGain + k] = s1 - ex * xbd;
    cw[u.dDeltaWriteGain + k] = db;
    cw[u.decayWeightsSolveBase + k] = -cga[jt] * ex * xbd;
  }
}`;
}

/**
 * `delta_state_scan` (forward, `S_{n+1} = K_n S_n + Bv_n`, storing every `S_in`) or `delta_reverse_scan` (reverse,
 * `G_{n-1} = K_n^T G_n + L_n`, storing every `G_n`): one workgroup per `(b, h)` and
 * {@linkcode SCAN_COLUMNS} value columns, the columns in workgroup memory, one invocation per key row (a
 * barrier per chunk, `Dk` products per column, each transition entry read once for all the columns).
 */
function scanKernel(s: ChunkShape, reverse: boolean): string {
  const km = reverse
    ? "u.transitionMatrix + (base + i2) * DK + i"
    : "u.transitionMatrix + (base + i) * DK + i2";
  const SC = SCAN_COLUMNS;
  const Q = [...Array(SC).keys()];
  return `
var<workgroup> col: array<f32, ${SC * s.dk}>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wgid = gid.y * nwg.x + gid.x;
  let ncg = (DV + ${SC - 1}u) / ${SC}u;
  if (wgid >= u.B * H * ncg) { return; }
  // ${SC} value columns per workgroup (clamped at DV; only real ones are stored): each transition entry
  // read serves ${SC} columns
  let c0 = (wgid % ncg) * ${SC}u;
  let bh = wgid / ncg;
  ${Q.map((q) => `let cc${q} = min(c0 + ${q}u, DV - 1u);`).join("\n  ")}
  for (var i = lid; i < DK; i += WG) {
    ${
    Q.map((q) =>
      `col[${q}u * DK + i] = ${
        reverse ? "0.0" : `select(0.0, init[(bh * DK + i) * DV + cc${q}], u.hasInit != 0u)`
      };`
    ).join("\n    ")
  }
  }
  workgroupBarrier();
  var nx: array<f32, ${Math.ceil(s.dk / 64) * SC}>;
  for (var k = 0u; k < nck(); k++) {
    let n = ${reverse ? "nck() - 1u - k" : "k"};
    let base = (bh * nck() + n) * DK;
    for (var i = lid; i < DK; i += WG) {
      ${
    Q.map((q) =>
      `if (c0 + ${q}u < DV) { cw[u.${
        reverse ? "dExitState" : "entryState"
      } + (base + i) * DV + cc${q}] = col[${q}u * DK + i]; }
      var v${q} = cw[u.${reverse ? "reverseScanLink" : "chunkStateIncrement"} + (base + i) * DV + cc${q}];`
    ).join("\n      ")
  }
      for (var i2 = 0u; i2 < DK; i2++) {
        let m = cw[${km}];
        ${Q.map((q) => `v${q} += m * col[${q}u * DK + i2];`).join("\n        ")}
      }
      ${Q.map((q) => `nx[(i / WG) * ${SC}u + ${q}u] = v${q};`).join("\n      ")}
    }
    workgroupBarrier();
    for (var i = lid; i < DK; i += WG) {
      ${Q.map((q) => `col[${q}u * DK + i] = nx[(i / WG) * ${SC}u + ${q}u];`).join("\n      ")}
    }
    workgroupBarrier();
  }
  for (var i = lid; i < DK; i += WG) {
    ${
    Q.map((q) =>
      `if (c0 + ${q}u < DV) { ${
        reverse
          ? `out[u.gDC + (bh * DK + i) * DV + cc${q}]`
          : `cw[u.finalState + (bh * DK + i) * DV + cc${q}]`
      } = col[${q}u * DK + i]; }`
    ).join("\n    ")
  }
  }
}`;
}
