/**
 * WGSL of the chunk-parallel kernels of the REGRESSION WINDOW rule falcon3, forward and backward,
 * float32 (SPEC section 4; the CPU derivation is `assembly/fw_chunk_window_delta.ts`).
 *
 * Recurrence: `S_t = gamma_t S_{t-1} + sum_{j in I_t} x_j w_(t,j)^T`, `w_(t,j) = g_t (y_j - S_{t-1}^T x_j)`,
 * `g_t = eta_t / |I_t|` (the `a = b` of `coef()`, whose statistic is the top eigenvalue of the window's
 * Gram matrix, computed by the recurrent kernels' `stat_of`). This is a delta rule over the chunk's
 * INSTANCE ROWS `r = (t, o)`, `o = 0..W-1`, `W` per step, with feature `x_j`, target `y_j`, `j = t - o`
 * (row `r = (t - a) W + o` of the chunk at `a`; a row is valid where `j >= lo_t`: the other rows are
 * zero, and rows of the chunk's first steps reach the `W-1` pairs before the chunk). With `P_t`,
 * `Pp_t`, `seg(t)`, `base_t` as in `fast_weight_chunk_delta.ts`:
 * - `(I + A) W = R`, `A[r, r'] = g_t Gp[t, t'] x_j.x_j'` for `t' < t` (rows of one step do not see
 *   each other), `R_r = g_t y_j - g_t exp(Pp_t) base_t^T x_j`, split as `W = U0 - V S_in`;
 * - `o_t = exp(P_t) base_t^T q_t + sum_{r'} Gam[t, t'] (q_t.x_j') w_r'`;
 * - `S_exit = K S_in + Bv`, `K = [no start] exp(P_e) I - sum_r Gam[e, t] x_j V_r^T`,
 *   `Bv = [start] exp(P_e) S0 + sum_r Gam[e, t] x_j U0_r^T`.
 * So the delta rules' passes carry over with `C W` rows instead of `C`: the solve is `W^2` times wider.
 *
 * Kernels (`fastweight_chunk_<pass>_f32`): forward `coef` (shared: also the top eigenvector, `topEigenvector`),
 * `window_pair_gram` (per `(b, h, chunk, 64 blocks)`: the Gram matrix `pairGram` of the chunk's pairs and the `W-1`
 * before it, from which `A` is formed where it is read: `(C + W - 1)^2` dot products instead of
 * `(C W)^2`, and no `C W x C W` matrix in memory; 4 x 4 tiles of its lower triangle, mirrored), `window_solve`
 * (`WINDOW_SOLVE`: the sweep, per `(b, h, chunk, WS columns)` of `U0 | V` with 256 invocations, the columns
 * in registers (`registerSweepKernel`; `"sweep_prefetch"`, the default, up to `WINDOW_SOLVE_PREFETCH_COLUMNS` = 16 columns per workgroup and each pivot
 * pair's Gram column loaded a step ahead) or workgroup memory (`sharedSweepKernel`), each solved step updating
 * every later row from its decay factor and the pivots' pair Gram columns; or the serial form, per `(b, h, chunk, 64 columns)`, one invocation per column,
 * forward substitution step by step re-reading the solved rows from the workspace, where `WINDOW_SOLVE =
 * "serial"` or the sweep's arrays do not fit, `ChunkShape.WS = 0`), `window_transition` (`K`, `Bv`, 4 x 4 tiles; `WINDOW_TRANSITION_STAGED`, the default: per `(b, h, chunk, K | Bv)` a staged register-tile product of the chunk's pair keys and folded rows, `stagedTransitionKernel`; else `WINDOW_TRANSITION_PAIRS`: summed over the chunk's pairs, each pair's `W` rows folded first, `pairTransitionKernel`), the shared `delta_state_scan` (`S_in` of every chunk), `window_pseudo_values` (`W`,
 * per `(b, h, chunk)`, 4 x 4 tiles of rows x value columns; `WINDOW_PSEUDO_VALUES_STAGED`, the default: per panel of 64
 * instance rows, `stagedPseudoValuesKernel`), `window_readout` (per `(b, h, chunk, R rows)`: the
 * outputs; `WINDOW_READOUT_STAGED`, the default: its three products staged, `stagedReadoutKernel`; else
 * `WINDOW_READOUT_CAUSAL_PAIRS`: the scores of the pairs its steps read only).
 * Backward (after recomputing the forward): the shared `base_readout_grads`; `window_readout_dw` (the readout's `dW`: `dPseudoValuesReadout`);
 * `window_scan_link` (`L_n = U_n - V^T Qd`, 4 x 4 tiles of the state); the shared reverse scan `delta_reverse_scan`; `window_row_grads`
 * (per `(b, h, chunk, RC steps)`: every instance row's `dW` and readout/exit `dx`, the decay weights
 * `decayWeightsReadout`, `decayWeightsExit`); `window_solve_transposed` (`dR = (I + A)^-T dW`, per `(b, h, chunk, 16 value columns)`, 4 invocations
 * per column); `window_query_grads`; `window_solve_input_grads` (per `(b, h, chunk, RP steps)`: what `A` and `R` feed: `dx`, `da + db` (`dEraseGain`, `dDeltaWriteGain`), the decay shares `decayWeightsSolve`, `decayWeightsSolveBase`; the chunk's columns in panels of
 * `windowPanelSteps` steps); `window_row_grads`, `window_readout_dw` and `window_solve_input_grads` compute their products as 4 x 4 register
 * tiles (`tile4`), about `WINDOW_TILE_ROWS` instance rows per workgroup, and what depends on a row only
 * through its pair (`q.x`, `G^T x`, the `x` sums of `dx`) per pair; the shared `delta_decay_grads`, `delta_coef_grads`
 * (`d log gamma`, then `coef_back`), `window_s0_grad_parts` (4 x 4 tiles of the state, over the rows of the chunk's
 * segments that take `S0` only) and the shared `s0_grad_sum` (`dS0`; a backward without `dS0` skips both and runs
 * `base_readout_grads_no_s0`); `window_pair_gather` (per pair
 * and element: `dx_j`, `dy_j` summed over the instance rows of pair `j`, and the statistic's gradient
 * `d mu_s / d x_j = 2 u_o (X_s u) / n_s` through the top eigenvector `u` of step `s = j + o`).
 * Workspace sections (offsets in the uniform block, `NI = W` rows per step, rows of a `(b, h)` at
 * `(bh T + t) W + o`): `eraseGain, dEraseGain, dDeltaWriteGain, decayWeightsSolveBase [BH,T]`, `pairGram [BH,NCK,CP,CP]` (`CP = C + W - 1`),
 * `pseudoValuesConstant, pseudoValues, dPseudoValues, dRightHandSide [BH,T W,Dv]` (`dPseudoValuesReadout` shares `dRightHandSide`'s floats), `pseudoValuesStateFactor, dxInstanceRows [BH,T W,Dk]`, `topEigenvector [BH,T,W]`, `transitionMatrix [BH,NCK,Dk,Dk]`, `decayWeightsSolve [BH,NCK,C,C]`,
 * with `entryState`, `finalState`, `chunkStateIncrement` (= `Bv`), `dExitState`, `dBaseReadout`, `reverseScanLink`, `dS0Parts`, `dLogDecay`, `dStatistic`, `decayWeightsReadout`, `decayWeightsExit`, `dqBase` as the
 * delta rules use them (`decayWeightsReadout`, `decayWeightsExit`, `decayWeightsSolve`, `decayWeightsSolveBase` per STEP, so `decayGradKernel` serves unchanged).
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import type { HeadConstants } from "./fast_weight_coef.ts";
import { windowSlots } from "./fast_weight_recurrent.ts";
import {
  component,
  declareAccumulators,
  eachTileRow,
  gridBlocks,
  roundUp4,
  STAGED_WG,
  stagedFloats,
  stagedLoop,
  type StagedOperand,
  type TileGrid,
  type TileProduct,
} from "./chunk_staged_tiles.ts";
import { packWorkgroupArrays } from "./workgroup_packing.ts";
import {
  CHUNK_WG,
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  flatEntry,
  maskedVec4,
  pairGramTiles,
  prelude,
  SOLVE_TRANSPOSED_COLUMNS,
  stateTileBlock,
  stateTiles,
  tile4,
  tile4Each,
  transitionTiles,
  vec4Tile,
  WINDOW_DELTA_PASSES,
  WINDOW_READOUT_CAUSAL_PAIRS,
  WINDOW_READOUT_STAGED,
  WINDOW_SOLVE,
  WINDOW_SOLVE_STEP_FACTORS,
  WINDOW_SOLVE_WG,
  WINDOW_STAGED_FLOATS,
  WINDOW_TRANSITION_PAIRS,
  windowPanelSteps,
  windowPseudoValuePanelRows,
  windowPseudoValuesStaged,
  type WindowSolveForm,
  windowSweepRegisterRows,
  windowTransitionStaged,
} from "./chunk_wgsl.ts";

/** One falcon3-only pass. */
export type WindowDeltaPass = typeof WINDOW_DELTA_PASSES[number];

/** Whether a pass is falcon3-only. */
export function isWindowDeltaPass(pass: ChunkPass): pass is WindowDeltaPass {
  return (WINDOW_DELTA_PASSES as readonly string[]).includes(pass);
}

// instance-row addressing (global rows of a (b, h): (bh T + t) W + o)
const ADDR = `
fn instance_row(bh: u32, a: u32, r: u32) -> u32 { return (bh * u.T + a) * NW + r; }
// the chunk's pair Gram matrix pairGram [CP, CP] (pair j at a - PAD + p)
fn pair_gram_at(bh: u32, n: u32, p: u32, p2: u32) -> u32 { return u.pairGram + ((bh * nck() + n) * CP + p) * CP + p2; }
`;

// instance rows of the chunk at a (needs the chunk's step arrays)
const ROWS = `
// pair j of chunk row r
fn row_pair(a: u32, r: u32) -> i32 { return i32(a + r / NW) - i32(r % NW); }
// whether chunk row r is a real pair of its step's window
fn is_real_row(a: u32, len: u32, r: u32) -> bool {
  let t = r / NW;
  return t < len && row_pair(a, r) >= clo[t];
}
// x_r . x_r2 of chunk rows r, r2 (from the pair Gram matrix)
fn xx(bh: u32, n: u32, r: u32, r2: u32) -> f32 {
  return cw[pair_gram_at(bh, n, r / NW + PAD - r % NW, r2 / NW + PAD - r2 % NW)];
}
// A[r, r2] = g_t Gp[t, t2] x_r.x_r2 for rows of earlier steps t2 < t of t's segment
fn solve_matrix(bh: u32, n: u32, a: u32, len: u32, r: u32, r2: u32) -> f32 {
  let t = r / NW;
  let t2 = r2 / NW;
  if (t2 >= t || cseg[t2] != cseg[t] || !is_real_row(a, len, r) || !is_real_row(a, len, r2)) { return 0.0; }
  return cga[t] * exp(cpp[t] - cp[t2]) * xx(bh, n, r, r2);
}
// Gam[t, t2] (t2 <= t, same segment; masked before exp)
fn gam(t: u32, t2: u32) -> f32 {
  if (t2 > t || cseg[t2] != cseg[t]) { return 0.0; }
  return exp(cp[t] - cp[t2]);
}
`;

/** WGSL of a falcon3-only pass (entry point `main`). */
export function windowDeltaShader(
  pass: WindowDeltaPass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
  const nw = windowSlots(config);
  const head = prelude(pass, config, s, heads) + `const CW = ${s.C * nw}u;\n` + ADDR;
  const steps = head + chunkSteps(true) + ROWS;
  switch (pass) {
    case "window_pair_gram":
      return steps + gramKernel(s, nw);
    case "window_solve":
      if (s.WS === 0) return steps + solveKernel(nw, s);
      return steps + SWEEP_COMMON +
        ((WINDOW_SOLVE as WindowSolveForm) === "sweep_shared"
          ? sharedSweepKernel(nw, s.WS)
          : registerSweepKernel(nw, s.C, s.WS, (WINDOW_SOLVE as WindowSolveForm) === "sweep_prefetch"));
    case "window_transition":
      if (windowTransitionStaged(s)) return steps + stagedTransitionKernel(s);
      return steps + (WINDOW_TRANSITION_PAIRS ? pairTransitionKernel(s) : `
var<workgroup> ge: array<f32, C>;
${chunkEntry(`${transitionTiles(s.dk, s.dv)}u`)}
  for (var k = lid; k < len; k += WG) { ge[k] = gam(len - 1u, k); }
  workgroupBarrier();
  let dec = exp(cp[len - 1u]);
  let bk = base_kind(len - 1u);
  let nr = len * NW;
  let cb = bh * nck() + n;
  // 4 x 4 blocks per invocation, first of K [Dk, Dk], then of Bv [Dk, Dv], summed over the chunk's
  // instance rows (the rows that are not real pairs hold V = U0 = 0)
  let blk = tile * WG + lid;
  let nb = (DK + 3u) / 4u;
  let nkm = nb * nb;
  if (blk < nkm) {
    let i0 = (blk / nb) * 4u;
    let i20 = (blk % nb) * 4u;
    ${
        tile4(
          "e",
          "nr",
          "xp(bh, row_pair(a, k), min(i0 + ${r}u, DK - 1u))",
          "cw[u.pseudoValuesStateFactor + instance_row(bh, a, k) * DK + min(i20 + ${c}u, DK - 1u)]",
          "ge[k / NW]",
        )
      }
    ${
        tile4Each((r, c) =>
          `if (i0 + ${r}u < DK && i20 + ${c}u < DK) { cw[u.transitionMatrix + (cb * DK + i0 + ${r}u) * DK + i20 + ${c}u] = select(0.0, dec, bk == 0u && i0 + ${r}u == i20 + ${c}u) - e${r}${c}; }`
        )
      }
  } else if (blk < nkm + nb * ((DV + 3u) / 4u)) {
    let nc = (DV + 3u) / 4u;
    let i0 = ((blk - nkm) / nc) * 4u;
    let c0 = ((blk - nkm) % nc) * 4u;
    ${
        tile4(
          "e",
          "nr",
          "xp(bh, row_pair(a, k), min(i0 + ${r}u, DK - 1u))",
          "cw[u.pseudoValuesConstant + instance_row(bh, a, k) * DV + min(c0 + ${c}u, DV - 1u)]",
          "ge[k / NW]",
        )
      }
    ${
        tile4Each((r, c) =>
          `if (i0 + ${r}u < DK && c0 + ${c}u < DV) {
      var v = 0.0;
      if (bk == 1u && u.hasS0 != 0u) { v = dec * s0[(bh * DK + i0 + ${r}u) * DV + c0 + ${c}u]; }
      cw[u.chunkStateIncrement + (cb * DK + i0 + ${r}u) * DV + c0 + ${c}u] = v + e${r}${c};
    }`
        )
      }
  }
}`);
    case "window_pseudo_values":
      if (windowPseudoValuesStaged(s, s.C * nw)) return head + stagedPseudoValuesKernel(s, nw);
      return head + `
// W = U0 - VV S_in over the chunk's instance rows: 4 rows x 4 value columns per invocation
${chunkEntry(`${stateTiles(s.C * nw, s.dv)}u`, false)}
  let nr = len * NW;
  let nbc = (DV + 3u) / 4u;
  let bk = tile * WG + lid;
  let r0 = (bk / nbc) * 4u;
  let c0 = (bk % nbc) * 4u;
  if (r0 < nr) {
    let sin = u.entryState + (bh * nck() + n) * DK * DV;
    ${lets4("gr", (i) => `instance_row(bh, a, min(r0 + ${i}u, nr - 1u))`)}
    ${
        tile4(
          "e",
          "DK",
          "cw[u.pseudoValuesStateFactor + gr${r} * DK + k]",
          "cw[sin + k * DV + min(c0 + ${c}u, DV - 1u)]",
        )
      }
    ${
        tile4Each((r, c) =>
          `if (r0 + ${r}u < nr && c0 + ${c}u < DV) {
      let o = gr${r} * DV + c0 + ${c}u;
      cw[u.pseudoValues + o] = cw[u.pseudoValuesConstant + o] - e${r}${c};
    }`
        )
      }
  }
}`;
    case "window_readout":
      // gm and sp packed as vec4 for llvmpipe's compile time (at C = 64 about 2100 floats)
      if (WINDOW_READOUT_STAGED && stagedReadoutFloats(s, nw) <= WINDOW_STAGED_FLOATS) {
        return packWorkgroupArrays(steps + stagedReadoutKernel(s, nw), ["gm", "sp"]);
      }
      return steps + rowsKernel(pass, s, nw);
    case "window_query_grads":
      return steps + rowsKernel(pass, s, nw);
    case "window_readout_dw":
    case "window_row_grads":
      return steps + colsKernel(pass === "window_row_grads", s, nw);
    case "window_scan_link":
      return steps + `
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let cb = bh * nck() + n;
  ${
        stateTile(
          "len * NW",
          "cw[u.pseudoValuesStateFactor + instance_row(bh, a, k) * DK + min(i0 + ${r}u, DK - 1u)]",
          "cw[u.dPseudoValuesReadout + instance_row(bh, a, k) * DV + min(c0 + ${c}u, DV - 1u)]",
          "",
          (e, v) =>
            `cw[u.reverseScanLink + cb * DK * DV + ${e}] = cw[u.dBaseReadout + cb * 2u * DK * DV + ${e}] - ${v};`,
        )
      }
}`;
    case "window_solve_transposed":
      return steps + solveTransposedKernel(nw);
    case "window_solve_input_grads":
      return steps + pairsKernel(s, nw);
    case "window_s0_grad_parts":
      return steps + `
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let cb = bh * nck() + n;
  let gexit = select(0.0, exp(cp[len - 1u]), base_kind(len - 1u) == 1u);
  // only the steps of segments begun in the chunk take S0 (segment numbers never decrease): skip the rest
  var t0 = 0u;
  while (t0 < len && cseg[t0] == 0u) { t0++; }
  let k0 = t0 * NW;
  ${
        stateTile(
          "len * NW - k0",
          "xp(bh, row_pair(a, k0 + k), min(i0 + ${r}u, DK - 1u))",
          "cw[u.dRightHandSide + instance_row(bh, a, k0 + k) * DV + min(c0 + ${c}u, DV - 1u)]",
          "select(0.0, cga[(k0 + k) / NW] * exp(cpp[(k0 + k) / NW]), base_kind((k0 + k) / NW) == 1u && is_real_row(a, len, k0 + k))",
          (e, v) =>
            `cw[u.dS0Parts + cb * DK * DV + ${e}] = cw[u.dBaseReadout + (cb * 2u + 1u) * DK * DV + ${e}] + gexit * cw[u.dExitState + cb * DK * DV + ${e}] - ${v};`,
        )
      }
}`;
    case "window_pair_gather":
      return head + `
${flatEntry("u.B * H * (PAD + u.T) * (DK + DV)")}
  let e = idx % (DK + DV);
  let pr = idx / (DK + DV);
  let row = pr % (PAD + u.T);
  let bh = pr / (PAD + u.T);
  let b = bh / H;
  let p = i32(row) - i32(PAD);
  var v = 0.0;
  // the instance rows (s, o) of pair p: s = p + o, where p is in the window of s
  for (var o = 0u; o < NW; o++) {
    let s = p + i32(o);
    if (s < 0 || s >= i32(u.T)) { continue; }
    let lo = stepinfo[(b * u.T + u32(s)) * 2u];
    if (lo > p) { continue; }
    let st = bh * u.T + u32(s);
    let gr = st * NW + o;
    if (e < DK) {
      v += cw[u.dxInstanceRows + gr * DK + e];
      // d mu_s / d x_p = 2 u_o (X_s u) / n_s (u: top eigenvector of step s's window Gram matrix)
      var xu = 0.0;
      for (var c2 = 0u; c2 < NW; c2++) {
        if (s - i32(c2) >= lo) { xu += cw[u.topEigenvector + st * NW + c2] * xp(bh, s - i32(c2), e); }
      }
      v += cw[u.dStatistic + st] * 2.0 * cw[u.topEigenvector + st * NW + o] * xu / f32(s - lo + 1);
    } else {
      v += cw[u.writeGain + st] * cw[u.dRightHandSide + gr * DV + e - DK];
    }
  }
  if (e < DK) {
    out[u.gDX + (bh * (PAD + u.T + 1u) + row) * DK + e] = v;
  } else {
    out[u.gDY + (bh * (PAD + u.T) + row) * DV + e - DK] = v;
  }
}`;
  }
}

/** `n` copies of `f(o)` joined by `sep` (the `W` rows of a step, unrolled). */
function unroll(n: number, f: (o: number) => string, sep = "\n"): string {
  return Array.from({ length: n }, (_, o) => f(o)).join(sep);
}

/**
 * A `Dk x Dv` state matrix as 4 x 4 register blocks, one per invocation (`stateTiles(Dk, Dv)` per chunk):
 * `v = sum_{k < K} [w(k)] a(k, i) b(k, c)` (templates as `tile4`'s), stored by `assign(e, v)` for the
 * block's entries inside the matrix (`e` the entry's offset in it).
 */
function stateTile(
  K: string,
  a: string,
  b: string,
  w: string,
  assign: (e: string, v: string) => string,
): string {
  return stateTileBlock(
    `${tile4("e", K, a, b, w || undefined)}
    ${
      tile4Each((r, c) =>
        `if (i0 + ${r}u < DK && c0 + ${c}u < DV) { ${assign(`(i0 + ${r}u) * DV + c0 + ${c}u`, `e${r}${c}`)} }`
      )
    }`,
    "c0",
  );
}

/**
 * `window_pair_gram`: the pair Gram matrix `pairGram [CP, CP]` of the chunk (pair `p` is `j = a - PAD + p`; entries of
 * pairs past the chunk's `len + PAD` are 0). It is symmetric: the 4 x 4 blocks on and below the diagonal,
 * one per invocation (block `k` of the triangle is row `bi` with `bi (bi + 1) / 2 <= k`, column
 * `bj = k - bi (bi + 1) / 2`), each stored at its place and mirrored.
 */
function gramKernel(s: ChunkShape, nw: number): string {
  return `
const NGB = ${Math.ceil((s.C + nw - 1) / 4)}u;
${chunkEntry(`${pairGramTiles(s.C, nw - 1)}u`)}
  let bk = tile * WG + lid;
  if (bk < NGB * (NGB + 1u) / 2u) {
    // the triangle row from the float square root, corrected by one either way
    var bi = u32((sqrt(f32(8u * bk + 1u)) - 1.0) * 0.5);
    if (bi * (bi + 1u) / 2u > bk) { bi -= 1u; }
    if ((bi + 1u) * (bi + 2u) / 2u <= bk) { bi += 1u; }
    let p0 = bi * 4u;
    let q0 = (bk - bi * (bi + 1u) / 2u) * 4u;
    let np = len + PAD;
    let j0 = i32(a) - i32(PAD);
    ${lets4("jr", (i) => `j0 + i32(min(p0 + ${i}u, np - 1u))`)}
    ${lets4("jc", (i) => `j0 + i32(min(q0 + ${i}u, np - 1u))`)}
    ${tile4("e", "DK", "xp(bh, jr${r}, k)", "xp(bh, jc${c}, k)")}
    ${
    tile4Each((r, c) =>
      `{
      let p = p0 + ${r}u;
      let q = q0 + ${c}u;
      if (p < CP && q < CP) {
        let v = select(0.0, e${r}${c}, p < np && q < np);
        cw[pair_gram_at(bh, n, p, q)] = v;
        cw[pair_gram_at(bh, n, q, p)] = v;
      }
    }`
    )
  }
  }
}`;
}

/**
 * `window_solve` in its serial form (`s.WS = 0`): `(I + A) [U0 | V] = [R_y | R_x]` by forward substitution, one step (its `W` rows, which do
 * not see each other) at a time: the step's rows of `A` are staged in workgroup memory, and every
 * invocation owns a column of `U0 | V`, so each earlier row it reads serves the step's `W` rows. The
 * `Dv + Dk` columns spread over `ceil((Dv + Dk) / 64)` workgroups per chunk (each stages `A` itself):
 * one column per invocation, not a serial walk over several.
 */
function solveKernel(nw: number, s: ChunkShape): string {
  const rows = (body: (o: number) => string) => unroll(nw, body, "\n        ");
  return `
var<workgroup> arow: array<f32, NW * CW>;
${chunkEntry(`${Math.ceil((s.dv + s.dk) / CHUNK_WG)}u`)}
  for (var t = 0u; t < len; t++) {
    let r0 = t * NW;
    workgroupBarrier();
    for (var k = lid; k < r0 * NW; k += WG) {
      let q = k / NW;
      let o = k % NW;
      arow[o * CW + q] = solve_matrix(bh, n, a, len, r0 + o, q);
    }
    workgroupBarrier();
    let ex = exp(cpp[t]);
    let bk = base_kind(t);
    ${
    unroll(
      nw,
      (o) => `let ok${o} = is_real_row(a, len, r0 + ${o}u);\n    let j${o} = row_pair(a, r0 + ${o}u);`,
      "\n    ",
    )
  }
    for (var col = tile * WG + lid; col < min(DV + DK, tile * WG + WG); col += WG) {
      ${unroll(nw, (o) => `var v${o} = 0.0;`, "\n      ")}
      if (col < DV) {
        ${
    rows((o) =>
      `if (ok${o}) {
          v${o} = cg[t] * yp(bh, j${o}, col);
          if (bk == 1u && u.hasS0 != 0u) {
            var sx = 0.0;
            for (var i = 0u; i < DK; i++) { sx += s0[(bh * DK + i) * DV + col] * xp(bh, j${o}, i); }
            v${o} -= cga[t] * ex * sx;
          }
        }`
    )
  }
        for (var q = 0u; q < r0; q++) {
          let x = cw[u.pseudoValuesConstant + instance_row(bh, a, q) * DV + col];
          ${unroll(nw, (o) => `v${o} -= arow[${o}u * CW + q] * x;`, "\n          ")}
        }
        ${
    rows((o) =>
      `cw[u.pseudoValuesConstant + instance_row(bh, a, r0 + ${o}u) * DV + col] = select(0.0, v${o}, ok${o});`
    )
  }
      } else {
        let i = col - DV;
        ${rows((o) => `if (ok${o} && bk == 0u) { v${o} = cga[t] * ex * xp(bh, j${o}, i); }`)}
        for (var q = 0u; q < r0; q++) {
          let x = cw[u.pseudoValuesStateFactor + instance_row(bh, a, q) * DK + i];
          ${unroll(nw, (o) => `v${o} -= arow[${o}u * CW + q] * x;`, "\n          ")}
        }
        ${
    rows((o) =>
      `cw[u.pseudoValuesStateFactor + instance_row(bh, a, r0 + ${o}u) * DK + i] = select(0.0, v${o}, ok${o});`
    )
  }
      }
    }
  }
}`;
}

/**
 * `window_transition` over the chunk's pairs (`WINDOW_TRANSITION_PAIRS`): 4 x 4 blocks of `K [Dk, Dk]`, then of
 * `Bv [Dk, Dv]`, per invocation, as `sum_p x_(j_p) z_p^T` over the pairs `p < len + PAD` (`j_p = a - PAD + p`) with
 * `z_p = sum_o Gam[e, t] F_(t, o)`, `t = p - PAD + o` in the chunk (`fold_rows4`: 4 columns of the rows of pair `p`;
 * `F` the state factor `V` or `U0`; the rows that are not real pairs hold 0).
 */
function pairTransitionKernel(s: ChunkShape): string {
  const rows4 = (r0: string) =>
    `vec4<f32>(${[0, 1, 2, 3].map((r) => `xp(bh, jp, min(${r0} + ${r}u, DK - 1u))`).join(", ")})`;
  return `
var<workgroup> ge: array<f32, C>;
// sum over the rows (t, o) of pair p in the chunk (t = p - PAD + o < len) of ge[t] times columns c0 .. c0 + 3 (clamped
// to nc - 1) of the section at sec, rows of nc floats
fn fold_rows4(bh: u32, a: u32, len: u32, p: u32, sec: u32, nc: u32, c0: u32) -> vec4<f32> {
  var z = vec4<f32>(0.0);
  for (var o = 0u; o < NW; o++) {
    let t = i32(p + o) - i32(PAD);
    if (t >= 0 && t < i32(len)) {
      let row = sec + instance_row(bh, a, u32(t) * NW + o) * nc;
      z += ge[t] * vec4<f32>(cw[row + min(c0, nc - 1u)], cw[row + min(c0 + 1u, nc - 1u)], cw[row + min(c0 + 2u, nc - 1u)], cw[row + min(c0 + 3u, nc - 1u)]);
    }
  }
  return z;
}
${chunkEntry(`${transitionTiles(s.dk, s.dv)}u`)}
  for (var k = lid; k < len; k += WG) { ge[k] = gam(len - 1u, k); }
  workgroupBarrier();
  let dec = exp(cp[len - 1u]);
  let bk = base_kind(len - 1u);
  let np = len + PAD;
  let j0 = i32(a) - i32(PAD);
  let cb = bh * nck() + n;
  let blk = tile * WG + lid;
  let nb = (DK + 3u) / 4u;
  let nkm = nb * nb;
  if (blk < nkm) {
    let i0 = (blk / nb) * 4u;
    let i20 = (blk % nb) * 4u;
    ${
    vec4Tile(
      [{ acc: "e", a: `${rows4("i0")}` }],
      "np",
      "fold_rows4(bh, a, len, k, u.pseudoValuesStateFactor, DK, i20)",
    ).replace("let vb = ", "let jp = j0 + i32(k);\n      let vb = ")
  }
    ${
    tile4Each((r, c) =>
      `if (i0 + ${r}u < DK && i20 + ${c}u < DK) { cw[u.transitionMatrix + (cb * DK + i0 + ${r}u) * DK + i20 + ${c}u] = select(0.0, dec, bk == 0u && i0 + ${r}u == i20 + ${c}u) - e${r}[${c}]; }`
    )
  }
  } else if (blk < nkm + nb * ((DV + 3u) / 4u)) {
    let nc = (DV + 3u) / 4u;
    let i0 = ((blk - nkm) / nc) * 4u;
    let c0 = ((blk - nkm) % nc) * 4u;
    ${
    vec4Tile(
      [{ acc: "e", a: `${rows4("i0")}` }],
      "np",
      "fold_rows4(bh, a, len, k, u.pseudoValuesConstant, DV, c0)",
    ).replace("let vb = ", "let jp = j0 + i32(k);\n      let vb = ")
  }
    ${
    tile4Each((r, c) =>
      `if (i0 + ${r}u < DK && c0 + ${c}u < DV) {
      var v = 0.0;
      if (bk == 1u && u.hasS0 != 0u) { v = dec * s0[(bh * DK + i0 + ${r}u) * DV + c0 + ${c}u]; }
      cw[u.chunkStateIncrement + (cb * DK + i0 + ${r}u) * DV + c0 + ${c}u] = v + e${r}[${c}];
    }`
    )
  }
  }
}`;
}

/**
 * The staged `window_transition` ({@linkcode windowTransitionStaged}): workgroup `tile` 0 computes `K [Dk, Dk]`, 1
 * `Bv [Dk, Dv]`, each as the register-tile product `sum_p x_(j_p) z_p^T` over the chunk's pairs `p < len + PAD`
 * (`j_p = a - PAD + p`), `z_p = sum_o Gam[e, t] F_(t, o)` (`t = p - PAD + o` in the chunk; `F` the state factor `V`
 * for `K`, `U0` for `Bv`; rows that are not real pairs hold 0), slices of `STAGE_DEPTH` pairs of `x` and `z` staged
 * in workgroup memory (`stagedLoop`: each `z` entry folded once per workgroup, from 4 consecutive columns of its `W`
 * rows). The grid has `max(Dk, Dv)` columns for both (the columns past `Dk` of `K` stage 0 and store nothing).
 */
function stagedTransitionKernel(s: ChunkShape): string {
  const DK4 = roundUp4(s.dk);
  const NC4 = Math.max(DK4, roundUp4(s.dv));
  const keys: StagedOperand = {
    width: DK4,
    along: "width",
    value: maskedVec4((e) => `xp(bh, j0 + i32(k), ${e})`, "i", "DK"),
    valid: "k < np",
    quad: true,
  };
  const folded: StagedOperand = {
    width: NC4,
    along: "width",
    value: "fold_rows4(bh, a, len, k, sec, nc, i)",
    valid: "k < np && i < nc",
    quad: true,
  };
  const grid: TileGrid = { name: "tr", rows: DK4, cols: NC4 };
  const product: TileProduct = { acc: "e", grid, a: 0, b: 1 };
  const floats = stagedFloats([keys, folded]);
  return `
var<workgroup> ge: array<f32, C>;
var<workgroup> stage: array<vec4<f32>, ${floats / 4}>;
// sum over the rows (t, o) of pair p in the chunk (t = p - PAD + o < len) of ge[t] times columns c0 .. c0 + 3 of the
// section at sec, rows of nc floats (0 past nc)
fn fold_rows4(bh: u32, a: u32, len: u32, p: u32, sec: u32, nc: u32, c0: u32) -> vec4<f32> {
  var z = vec4<f32>(0.0);
  for (var o = 0u; o < NW; o++) {
    let t = i32(p + o) - i32(PAD);
    if (t >= 0 && t < i32(len)) {
      let row = sec + instance_row(bh, a, u32(t) * NW + o) * nc;
      z += ge[t] * ${maskedVec4((e) => `cw[row + ${e}]`, "c0", "nc")};
    }
  }
  return z;
}
${chunkEntry("2u", true, STAGED_WG)}
  for (var k = lid; k < len; k += ${STAGED_WG}u) { ge[k] = gam(len - 1u, k); }
  workgroupBarrier();
  let dec = exp(cp[len - 1u]);
  let bk = base_kind(len - 1u);
  let np = len + PAD;
  let j0 = i32(a) - i32(PAD);
  let cb = bh * nck() + n;
  let sec = select(u.pseudoValuesConstant, u.pseudoValuesStateFactor, tile == 0u);
  let nc = select(DV, DK, tile == 0u);
  ${gridBlocks(grid)}
  ${declareAccumulators(product)}
  ${stagedLoop("np", [keys, folded], [product])}
  ${
    eachTileRow(grid, (p, r) =>
      `if (trOn${p}) {
    let i = trRow${p} * 4u + ${r}u;
    ${
        [0, 1, 2, 3].map((c) =>
          `{
      let col = trCol${p} * 4u + ${c}u;
      let v = e${p}_${r}.${component(c)};
      if (i < DK && col < nc) {
        if (tile == 0u) {
          cw[u.transitionMatrix + (cb * DK + i) * DK + col] = select(0.0, dec, bk == 0u && i == col) - v;
        } else {
          var v0 = 0.0;
          if (bk == 1u && u.hasS0 != 0u) { v0 = dec * s0[(bh * DK + i) * DV + col]; }
          cw[u.chunkStateIncrement + (cb * DK + i) * DV + col] = v0 + v;
        }
      }
    }`
        ).join("\n    ")
      }
  }`)
  }
}`;
}

/** WGSL sum of the `W` pivot terms `term(o)`, pairs of them first (independent products). */
function pivotSum(nw: number, term: (o: number) => string): string {
  const pairs: string[] = [];
  for (let o = 0; o < nw; o += 2) pairs.push(o + 1 < nw ? `(${term(o)} + ${term(o + 1)})` : term(o));
  return pairs.join(" + ");
}

// the right-hand sides of both sweep forms of window_solve
const SWEEP_COMMON = `
// S0[:, col] . x_j (4 partial sums)
fn s0_dot(bh: u32, j: i32, col: u32) -> f32 {
  var p0 = 0.0;
  var p1 = 0.0;
  var p2 = 0.0;
  var p3 = 0.0;
  var i = 0u;
  for (; i + 3u < DK; i += 4u) {
    p0 += s0[(bh * DK + i) * DV + col] * xp(bh, j, i);
    p1 += s0[(bh * DK + i + 1u) * DV + col] * xp(bh, j, i + 1u);
    p2 += s0[(bh * DK + i + 2u) * DV + col] * xp(bh, j, i + 2u);
    p3 += s0[(bh * DK + i + 3u) * DV + col] * xp(bh, j, i + 3u);
  }
  for (; i < DK; i++) { p0 += s0[(bh * DK + i) * DV + col] * xp(bh, j, i); }
  return (p0 + p1) + (p2 + p3);
}
// the right-hand side of chunk row r, column col of U0 | V
fn sweep_rhs(bh: u32, a: u32, len: u32, r: u32, col: u32) -> f32 {
  if (col >= DV + DK || !is_real_row(a, len, r)) { return 0.0; }
  let t = r / NW;
  let j = row_pair(a, r);
  let bk = base_kind(t);
  if (col < DV) {
    var x = cg[t] * yp(bh, j, col);
    if (bk == 1u && u.hasS0 != 0u) { x -= cga[t] * exp(cpp[t]) * s0_dot(bh, j, col); }
    return x;
  }
  if (bk == 0u) { return cga[t] * exp(cpp[t]) * xp(bh, j, col - DV); }
  return 0.0;
}
`;

/**
 * `window_solve` in its register sweep form (`WINDOW_SOLVE = "sweep"`, `s.WS = SC > 0`): per `(b, h, chunk, SC
 * columns of U0 | V)` {@linkcode WINDOW_SOLVE_WG} invocations, `SC / 4` per row: invocation `lid` holds 4 columns
 * (`c0 = tile SC + 4 (lid % LPR)`) of the rows `lid / LPR + i RPP` in registers (`v0, v1, ...`, from their
 * right-hand sides). At step `t` (one barrier each) it reads the step's `W` final rows (`piv`, 4 vec4), and each
 * of its later rows of `t`'s segment takes `v -= f sum_o xx(r, (t, o)) piv_o`, `f = a_(t_r) exp(Pp_(t_r) - P_t)`
 * (computed only under the mask: a real row of a later step of the segment); the rows of step `t + 1`, then
 * final, go to the other half of `piv`, and the pair Gram column of the next step's new pivot pair to `gwin`
 * (`W + 1` rolling columns, loaded from the workspace before the step's updates). Last every row is stored, a
 * row's `SC` columns by adjacent invocations. With `prefetch` (`WINDOW_SOLVE = "sweep_prefetch"`) the column of
 * step `t + 1`'s new pivot pair was loaded at step `t - 1` (`gn`; step `t` loads that of step `t + 2`, `gl`), so no
 * step's barrier waits on a load from storage, and a row's 4 right-hand sides come from one loop (`sweep_rhs4`).
 */
function registerSweepKernel(nw: number, C: number, sc: number, prefetch = false): string {
  const lanes = sc / 4;
  const rows = windowSweepRegisterRows(nw, C, sc);
  // the rows' decay factors from a workgroup array of the chunk's steps (WINDOW_SOLVE_STEP_FACTORS)
  const factors = prefetch && WINDOW_SOLVE_STEP_FACTORS;
  const each = (body: (i: number) => string, sep = "\n    ") => unroll(rows, body, sep);
  return `${
    prefetch
      ? `
// columns c0 .. c0 + 3 of chunk row r's right-hand side, in a loop the compiler does not unroll (1 = min(B, 1), unknown
// to it): one copy of sweep_rhs per register row, not four (llvmpipe's compile time grows with the copies)
fn sweep_rhs4(bh: u32, a: u32, len: u32, r: u32, c0: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  for (var m = 0u; m < 4u * min(u.B, 1u); m++) { v[m] = sweep_rhs(bh, a, len, r, c0 + m); }
  return v;
}`
      : ""
  }
const SC = ${sc}u;
const SWG = ${WINDOW_SOLVE_WG}u;
const LPR = ${lanes}u;     // invocations per row (4 columns each)
const RPP = SWG / LPR;  // rows per pass of the workgroup
const NSLOT = NW + 1u;
var<workgroup> piv: array<vec4<f32>, 2u * NW * LPR>; // the final rows of a step (pivots), two steps
var<workgroup> gwin: array<f32, NSLOT * CP>;         // pair Gram columns of the pivot pairs (pair p in slot p % NSLOT)${
    factors
      ? `
var<workgroup> fac: array<f32, 2u * C>;              // the rows' decay factors of a step by row step, two steps
// a_s exp(Pp_s - P_t) for rows of step s of a later step of t's segment, else 0 (masked before the exp)
fn step_factor(s: u32, t: u32, len: u32) -> f32 {
  if (s <= t || s >= len || cseg[s] != cseg[t]) { return 0.0; }
  return cga[s] * exp(cpp[s] - cp[t]);
}`
      : ""
  }
${chunkEntry("(DV + DK + SC - 1u) / SC", true, WINDOW_SOLVE_WG)}
  let nr = len * NW;
  let q = lid % LPR;
  let c0 = tile * SC + q * 4u;
  let rl = lid / LPR;
  ${
    each((i) =>
      `let r${i} = rl + ${i}u * RPP;
    let ts${i} = min(r${i} / NW, C - 1u);
    let ok${i} = is_real_row(a, len, r${i});${
        factors ? "" : `
    let seg${i} = cseg[ts${i}];
    let ga${i} = cga[ts${i}];
    let pp${i} = cpp[ts${i}];`
      }
    let p${i} = ts${i} + PAD - r${i} % NW;
    var v${i} = ${
        prefetch
          ? `sweep_rhs4(bh, a, len, r${i}, c0);`
          : `vec4<f32>(${[0, 1, 2, 3].map((m) => `sweep_rhs(bh, a, len, r${i}, c0 + ${m}u)`).join(", ")});`
      }
    if (r${i} < NW) { piv[r${i} * LPR + q] = v${i}; }`
    )
  }
  for (var k = lid; k < NW * CP; k += SWG) { gwin[k] = cw[pair_gram_at(bh, n, k / CP, k % CP)]; }${
    prefetch
      ? `
  // the pair Gram column of step 1's new pivot pair NW, stored at step 0's end
  var gn = 0.0;
  if (lid < CP && NW < CP) { gn = cw[pair_gram_at(bh, n, NW, lid)]; }${
        factors ? "\n  if (lid < C) { fac[lid] = step_factor(lid, 0u, len); }" : ""
      }`
      : ""
  }
  workgroupBarrier();
  for (var t = 0u; t + 1u < len; t++) {
    let cur = (t & 1u) * NW * LPR;
${
    prefetch
      ? `    // the new pivot pair t + 1 + PAD of the next step (its column in gn since the step before) and that of the step
    // after (t + 2 + PAD): its column loaded now, stored at the next step's end, so no step waits on its load
    let np = t + NW;
    var gl = 0.0;
    if (lid < CP && np + 1u < CP) { gl = cw[pair_gram_at(bh, n, np + 1u, lid)]; }
`
      : `    // the next step's new pivot pair t + 1 + PAD: its pair Gram column, loaded before this step's updates
    let np = t + NW;
    var gn = 0.0;
    if (lid < CP) { gn = cw[pair_gram_at(bh, n, np, lid)]; }
`
  }${
    factors
      ? `    // the next step's factors into the other half of fac (read after this step's barrier)
    let fs = (t & 1u) * C;
    if (lid < C) { fac[C - fs + lid] = step_factor(lid, t + 1u, len); }`
      : `    let cpt = cp[t];
    let segt = cseg[t];`
  }
    ${unroll(nw, (o) => `let pv${o} = piv[cur + ${o}u * LPR + q];`, "\n    ")}
    ${unroll(nw, (o) => `let gs${o} = ((t + ${nw - 1 - o}u) % NSLOT) * CP;`, "\n    ")}
    ${
    each((i) =>
      `${
        factors
          ? `if (ok${i} && ts${i} > t) {
      let f${i} = fac[fs + ts${i}];
      if (f${i} != 0.0) { v${i} -= f${i} * (${pivotSum(nw, (o) => `gwin[gs${o} + p${i}] * pv${o}`)}); }
    }`
          : `if (ok${i} && ts${i} > t && seg${i} == segt) {
      v${i} -= (ga${i} * exp(pp${i} - cpt)) * (${pivotSum(nw, (o) => `gwin[gs${o} + p${i}] * pv${o}`)});
    }`
      }
    if (r${i} / NW == t + 1u) { piv[NW * LPR - cur + (r${i} % NW) * LPR + q] = v${i}; }`
    )
  }
    if (lid < CP) { gwin[(np % NSLOT) * CP + lid] = gn; }${prefetch ? "\n    gn = gl;" : ""}
    workgroupBarrier();
  }
  ${
    each(
      (i) =>
        `if (r${i} < nr) {
    let gr = instance_row(bh, a, r${i});
    ${
          [0, 1, 2, 3].map((m) =>
            `if (c0 + ${m}u < DV) {
      cw[u.pseudoValuesConstant + gr * DV + c0 + ${m}u] = v${i}[${m}];
    } else if (c0 + ${m}u < DV + DK) {
      cw[u.pseudoValuesStateFactor + gr * DK + c0 + ${m}u - DV] = v${i}[${m}];
    }`
          ).join("\n    ")
        }
  }`,
      "\n  ",
    )
  }
}`;
}

/**
 * `window_solve` in its shared sweep form (`WINDOW_SOLVE = "sweep_shared"`, `s.WS = SC > 0`): per `(b, h, chunk, SC columns of
 * U0 | V)` ({@linkcode WINDOW_SOLVE_WG} invocations, the column the fastest index of `lid`, `SR` rows at a time) the
 * workgroup holds its columns of every instance row in `v [CW, SC]`: first the right-hand sides (`g_t y_j - a_t
 * exp(Pp_t) S0^T x_j` for the value columns, the `S0` dot product per row and column; `a_t exp(Pp_t) x_j` for
 * the state-factor columns of a segment on the entering state; 0 for the rows that are not real pairs), then a
 * right-looking sweep: once step `t`'s rows are final (their pivots in registers), every later row `r` of its
 * segment takes `v[r] -= f_t[r] sum_o xx(r, (t, o)) v[(t, o)]`, `f_t[r] = a_(t_r) exp(Pp_(t_r) - P_t)` masked before
 * the exp (`sweep_factor`: a later step of the same segment, `r` a real row; the pivots that are not real are 0).
 * Per step the next step's factors (`rowf`, two steps) and the pair Gram column of its new pivot pair (`gwin`,
 * `W + 1` rolling columns of `CP`) are staged while the current step's updates run: one barrier per step.
 * Last the columns are stored, a row's `SC` columns side by side.
 */
function sharedSweepKernel(nw: number, sc: number): string {
  return `
const SC = ${sc}u;
const SWG = ${WINDOW_SOLVE_WG}u;
const SR = SWG / SC;
const NSLOT = NW + 1u;
var<workgroup> v: array<f32, CW * SC>;       // the workgroup's columns of U0 | V, row by row
var<workgroup> rowf: array<f32, 2u * CW>;    // the later rows' decay factors f_t[r] of two steps
var<workgroup> gwin: array<f32, NSLOT * CP>; // pair Gram columns of the pivot pairs (pair p in slot p % NSLOT)
// f_t[r] = a_(t_r) exp(Pp_(t_r) - P_t) for a real row r of a later step of t's segment (masked before exp)
fn sweep_factor(a: u32, len: u32, t: u32, r: u32) -> f32 {
  let tr = r / NW;
  if (tr <= t || tr >= len || cseg[tr] != cseg[t] || !is_real_row(a, len, r)) { return 0.0; }
  return cga[tr] * exp(cpp[tr] - cp[t]);
}
${chunkEntry("(DV + DK + SC - 1u) / SC", true, WINDOW_SOLVE_WG)}
  let nr = len * NW;
  let c = lid % SC;
  let rl = lid / SC;
  let col = tile * SC + c;
  if (rl < SR) {
    for (var r = rl; r < nr; r += SR) { v[r * SC + c] = sweep_rhs(bh, a, len, r, col); }
  }
  for (var r = lid; r < nr; r += SWG) { rowf[r] = sweep_factor(a, len, 0u, r); }
  for (var k = lid; k < NW * CP; k += SWG) { gwin[k] = cw[pair_gram_at(bh, n, k / CP, k % CP)]; }
  workgroupBarrier();
  for (var t = 0u; t + 1u < len; t++) {
    let cur = (t & 1u) * CW;
    let r0 = t * NW;
    // the next step's new pivot pair t + 1 + PAD: its pair Gram column, loaded before this step's updates
    let np = t + NW;
    var gn = 0.0;
    if (lid < CP) { gn = cw[pair_gram_at(bh, n, np, lid)]; }
    ${unroll(nw, (o) => `let pv${o} = v[(r0 + ${o}u) * SC + c];`, "\n    ")}
    ${unroll(nw, (o) => `let gs${o} = ((t + ${nw - 1 - o}u) % NSLOT) * CP;`, "\n    ")}
    if (rl < SR) {
      for (var r = r0 + NW + rl; r < nr; r += SR) {
        let p = r / NW + PAD - r % NW;
        v[r * SC + c] -= rowf[cur + r] * (${pivotSum(nw, (o) => `gwin[gs${o} + p] * pv${o}`)});
      }
    }
    for (var r = lid; r < nr; r += SWG) { rowf[CW - cur + r] = sweep_factor(a, len, t + 1u, r); }
    if (lid < CP) { gwin[(np % NSLOT) * CP + lid] = gn; }
    workgroupBarrier();
  }
  if (rl < SR && col < DV + DK) {
    for (var r = rl; r < nr; r += SR) {
      let x = select(0.0, v[r * SC + c], is_real_row(a, len, r));
      let gr = instance_row(bh, a, r);
      if (col < DV) {
        cw[u.pseudoValuesConstant + gr * DV + col] = x;
      } else {
        cw[u.pseudoValuesStateFactor + gr * DK + col - DV] = x;
      }
    }
  }
}`;
}

/**
 * `window_solve_transposed`: `dR = (I + A)^-T dW` by back substitution, one step at a time from the last: the
 * columns of `A` under the step's rows are staged in workgroup memory. `SOLVE_TRANSPOSED_COLUMNS` value columns
 * per workgroup (`ceil(Dv / SOLVE_TRANSPOSED_COLUMNS)` per chunk), `SL` invocations per column: each sums every
 * `SL`-th later row into partial sums (`part`), and the step's rows are finished from them. The rows
 * solved at one step are read by the other invocations of their column at the next: a storage barrier
 * orders them.
 */
function solveTransposedKernel(nw: number): string {
  const lanes = CHUNK_WG / SOLVE_TRANSPOSED_COLUMNS;
  return `
const SCOL = ${SOLVE_TRANSPOSED_COLUMNS}u;
const SL = ${lanes}u;
var<workgroup> acol: array<f32, NW * CW>;
var<workgroup> part: array<f32, NW * WG>; // [o, lane, column]
${chunkEntry("(DV + SCOL - 1u) / SCOL")}
  let nr = len * NW;
  let cl = lid % SCOL;
  let lane = lid / SCOL;
  let c = tile * SCOL + cl;
  let cr = min(c, DV - 1u);
  for (var tr = i32(len) - 1; tr >= 0; tr--) {
    let r0 = u32(tr) * NW;
    let r1 = r0 + NW;
    storageBarrier();
    workgroupBarrier();
    for (var k = lid; k < (nr - r1) * NW; k += WG) {
      let q = r1 + k / NW;
      let o = k % NW;
      acol[o * CW + q] = solve_matrix(bh, n, a, len, q, r0 + o);
    }
    workgroupBarrier();
    ${unroll(nw, (o) => `var v${o} = 0.0;`, "\n    ")}
    for (var q = r1 + lane; q < nr; q += SL) {
      let d = cw[u.dRightHandSide + instance_row(bh, a, q) * DV + cr];
      ${unroll(nw, (o) => `v${o} -= acol[${o}u * CW + q] * d;`, "\n      ")}
    }
    ${unroll(nw, (o) => `part[(${o}u * SL + lane) * SCOL + cl] = v${o};`, "\n    ")}
    workgroupBarrier();
    // row o of the step by the invocation of lane o % SL
    for (var o = lane; o < NW; o += SL) {
      if (c < DV) {
        let gr = instance_row(bh, a, r0 + o) * DV + c;
        cw[u.dRightHandSide + gr] = cw[u.dPseudoValues + gr] + ${
    Array.from({ length: lanes }, (_, l) => `part[(o * SL + ${l}u) * SCOL + cl]`).join(" + ")
  };
      }
    }
  }
}`;
}

/**
 * The opening of `window_readout`'s kernels: the entry of a `(b, h, chunk, tile of R steps)` workgroup (an empty tile
 * returns), `j0` (the chunk's first pair) and `gm`, the decay `Gam[t, t']` of the tile's steps `t` from every step
 * `t'` of the chunk (0 across a sequence start or after `t`).
 */
function readoutTileDecay(s: ChunkShape): string {
  return `${chunkEntry(`${Math.ceil(s.C / s.R)}u`)}
  let h = bh % H;
  let r0 = tile * R;
  if (r0 >= len) { return; }
  let j0 = i32(a) - i32(PAD);
  for (var k = lid; k < R * C; k += WG) {
    let tt = r0 + k / C;
    let t2 = k % C;
    var v = 0.0;
    if (tt < len && t2 <= tt && cseg[t2] == cseg[tt]) { v = exp(cp[tt] - cp[t2]); }
    gm[k] = v;
  }`;
}

/**
 * `window_readout`: `o_t = exp(P_t) base_t^T q_t + sum_r (Gam[t, t_r] q_t.x_r) w_r`;
 * `window_query_grads`: `dq_t = exp(P_t) base_t dO_t + sum_r (Gam[t, t_r] dO_t.w_r) x_r` (its base part into `dqBase`).
 * Per workgroup `R` steps; every product is a 4 x 4 register tile. The scores live per tile row and
 * PAIR (`sp`, `CP` of them): `window_readout`'s `q_t.x_j` depends on a row only through its pair, and `window_query_grads`
 * sums its row scores `Gam dO_t.w_r` over the `W` rows of each pair before the product with `x_j`.
 */
function rowsKernel(pass: "window_readout" | "window_query_grads", s: ChunkShape, nw: number): string {
  const fwd = pass === "window_readout";
  // the forward's scores only for the pairs its steps read (WINDOW_READOUT_CAUSAL_PAIRS)
  const causal = fwd && WINDOW_READOUT_CAUSAL_PAIRS;
  const NC = fwd ? "DV" : "DK";
  const doutAt = "dout[((b * u.T + t${r}) * H + h) * DV";
  const steps4 = lets4("t", (i) => `a + min(r0 + tr0 + ${i}u, len - 1u)`);
  const rows4 = lets4("ro", (i) => `min(tr0 + ${i}u, R - 1u)`);
  const scores = fwd
    ? `${lets4("jx", (i) => `j0 + i32(min(jj0 + ${i}u, len + PAD - 1u))`)}
    ${tile4("e", "DK", "qn(bh, t${r}, k)", "xp(bh, jx${c}, k)")}`
    : `${tile4Each((r, c) => `var e${r}${c} = 0.0;`)}
    // the W rows (j + o, o) of pair j: step ts = pair column + o - PAD of the chunk
    for (var o = 0u; o < NW; o++) {
      ${lets4("ts", (i) => `i32(jj0 + ${i}u + o) - i32(PAD)`)}
      ${lets4("sc", (i) => `u32(clamp(ts${i}, 0, i32(len) - 1))`)}
      ${lets4("gw", (i) => `instance_row(bh, a, sc${i} * NW + o) * DV`)}
      ${tile4("p", "DV", `${doutAt} + k]`, "cw[u.pseudoValues + gw${c} + k]")}
      ${
      tile4Each((r, c) =>
        `e${r}${c} += select(0.0, gm[ro${r} * C + sc${c}] * p${r}${c}, ts${c} >= 0 && ts${c} < i32(len));`
      )
    }
    }`;
  const product = fwd
    ? tile4(
      "ea",
      "min(len, r0 + R) * NW",
      "sp[ro${r} * CP + k / NW + PAD - k % NW] * gm[ro${r} * C + k / NW]",
      "cw[u.pseudoValues + instance_row(bh, a, k) * DV + min(cl0 + ${c}u, DV - 1u)]",
    )
    : tile4(
      "ea",
      "min(CP, len + PAD)",
      "sp[ro${r} * CP + k]",
      "xp(bh, j0 + i32(k), min(cl0 + ${c}u, DK - 1u))",
    );
  const inter = fwd
    ? tile4(
      "ei",
      "select(0u, DK, kin)",
      "qn(bh, t${r}, k)",
      "cw[base + k * DV + min(cl0 + ${c}u, DV - 1u)]",
    ) +
      "\n    " +
      tile4(
        "es",
        "select(0u, DK, ks0)",
        "qn(bh, t${r}, k)",
        "s0[bh * DK * DV + k * DV + min(cl0 + ${c}u, DV - 1u)]",
      )
    : tile4("ei", "select(0u, DV, kin)", `${doutAt} + k]`, "cw[base + min(cl0 + ${c}u, DK - 1u) * DV + k]") +
      "\n    " +
      tile4(
        "es",
        "select(0u, DV, ks0)",
        `${doutAt} + k]`,
        "s0[bh * DK * DV + min(cl0 + ${c}u, DK - 1u) * DV + k]",
      );
  return `
var<workgroup> gm: array<f32, ${s.R * s.C}>; // Gam[t, t'] for the tile's steps t
var<workgroup> sp: array<f32, ${s.R * (s.C + nw - 1)}>; // per tile step and pair
${readoutTileDecay(s)}
  ${fwd ? "" : "workgroupBarrier();"}
  // scores, 4 steps x 4 pairs per invocation${
    causal
      ? ` (the tile's steps read the pairs up to the window of its last step: ${"`"}npt${"`"} blocks of 4)
  let npt = (min(len, r0 + R) + PAD + 3u) / 4u;
  for (var bk = lid; bk < ((R + 3u) / 4u) * npt; bk += WG) {
    let jj0 = (bk % npt) * 4u;
    let tr0 = (bk / npt) * 4u;
`
      : `
  for (var bk = lid; bk < ((R + 3u) / 4u) * ((CP + 3u) / 4u); bk += WG) {
    let jj0 = (bk % ((CP + 3u) / 4u)) * 4u;
    let tr0 = (bk / ((CP + 3u) / 4u)) * 4u;
`
  }    ${steps4}
    ${rows4}
    ${scores}
    ${
    tile4Each((r, c) =>
      `if (tr0 + ${r}u < R && jj0 + ${c}u < CP) { sp[(tr0 + ${r}u) * CP + jj0 + ${c}u] = e${r}${c}; }`
    )
  }
  }
  workgroupBarrier();
  let base = u.entryState + (bh * nck() + n) * DK * DV;
  // 4 steps x 4 columns per invocation: the inter-chunk part against the bases the steps take (S_in,
  // S0), then the intra-chunk part from the scores
  for (var bk = lid; bk < ((R + 3u) / 4u) * ((${NC} + 3u) / 4u); bk += WG) {
    let cl0 = (bk % ((${NC} + 3u) / 4u)) * 4u;
    let tr0 = (bk / ((${NC} + 3u) / 4u)) * 4u;
    ${steps4}
    ${rows4}
    let kin = ${[0, 1, 2, 3].map((i) => `base_kind(t${i} - a) == 0u`).join(" || ")};
    let ks0 = u.hasS0 != 0u && (${[0, 1, 2, 3].map((i) => `base_kind(t${i} - a) == 1u`).join(" || ")});
    ${inter}
    ${product}
    ${
    tile4Each((r, c) =>
      `{
      let tt = r0 + tr0 + ${r}u;
      let col = cl0 + ${c}u;
      if (tr0 + ${r}u < R && col < ${NC} && tt < len) {
        let t = a + tt;
        let kind = base_kind(tt);
        let fromS0 = kind == 1u;
        var inter = 0.0;
        if (kind == 0u || (fromS0 && u.hasS0 != 0u)) { inter = select(ei${r}${c}, es${r}${c}, fromS0); }
        let acc = exp(cp[tt]) * inter;
        ${
        fwd
          ? "out[((b * u.T + t) * H + h) * DV + col] = acc + ea" + `${r}${c};`
          : "cw[u.dqBase + (bh * u.T + t) * DK + col] = acc;\n        out[(bh * u.T + t) * DK + col] = acc + ea" +
            `${r}${c};`
      }
      }
    }`
    )
  }
  }
}`;
}

/**
 * The staged `window_pseudo_values` (`WINDOW_PSEUDO_VALUES_STAGED`): per `(b, h, chunk, panel)` the `PR`
 * instance rows from `p0 = panel PR` on, `W = U0 - V S_in` with `V`'s rows (along the keys) and `S_in`'s (along the
 * value columns) staged 8 keys at a time; rows at or past `len W` store nothing.
 */
function stagedPseudoValuesKernel(s: ChunkShape, nw: number): string {
  const rows = s.C * nw;
  const PR = windowPseudoValuePanelRows(rows);
  const DV4 = roundUp4(s.dv);
  const stateFactors: StagedOperand = {
    width: PR,
    along: "depth",
    value: maskedVec4(
      (e) => `cw[u.pseudoValuesStateFactor + instance_row(bh, a, p0 + i) * DK + ${e}]`,
      "k",
      "DK",
    ),
    valid: "k < DK && p0 + i < nr",
    quad: true,
  };
  const entryRows: StagedOperand = {
    width: DV4,
    along: "width",
    value: maskedVec4((e) => `cw[sin + k * DV + ${e}]`, "i", "DV"),
    valid: "k < DK",
    quad: true,
  };
  const grid: TileGrid = { name: "pv", rows: PR, cols: DV4 };
  const product: TileProduct = { acc: "e", grid, a: 0, b: 1 };
  return `
var<workgroup> stage: array<vec4<f32>, ${stagedFloats([stateFactors, entryRows]) / 4}>;
// W = U0 - V S_in over a panel of the chunk's instance rows: 4 rows x 4 value columns per block
${chunkEntry(`${Math.ceil(rows / PR)}u`, false, STAGED_WG)}
  let nr = len * NW;
  let p0 = tile * ${PR}u;
  let sin = u.entryState + (bh * nck() + n) * DK * DV;
  ${gridBlocks(grid)}
  ${declareAccumulators(product)}
  ${stagedLoop("DK", [stateFactors, entryRows], [product])}
  ${
    eachTileRow(grid, (p, r) =>
      `if (pvOn${p}) {
    let r = p0 + pvRow${p} * 4u + ${r}u;
    if (r < nr) {
      let gr = instance_row(bh, a, r);
      ${
        [0, 1, 2, 3].map((c) =>
          `{
        let col = pvCol${p} * 4u + ${c}u;
        if (col < DV) { cw[u.pseudoValues + gr * DV + col] = cw[u.pseudoValuesConstant + gr * DV + col] - e${p}_${r}.${
            component(c)
          }; }
      }`
        ).join("\n      ")
      }
    }
  }`)
  }
}`;
}

/** Widths of the staged `window_readout`'s operands and the floats of its `stage` (the most of its three loops). */
function stagedReadoutLayout(s: ChunkShape, nw: number) {
  const R4 = roundUp4(s.R);
  const CP4 = roundUp4(s.C + nw - 1);
  const DV4 = roundUp4(s.dv);
  const rows = (width: number) => ({ width, along: "width" as const });
  const depth = (width: number) => ({ width, along: "depth" as const });
  const floats = Math.max(
    stagedFloats([depth(R4), depth(CP4)]),
    stagedFloats([depth(R4), rows(DV4), rows(DV4)]),
    stagedFloats([rows(R4), rows(DV4)]),
  );
  return { R4, CP4, DV4, floats };
}

/** Workgroup floats of the staged `window_readout`: the step arrays (6 C), `gm`, `sp` and `stage`. */
function stagedReadoutFloats(s: ChunkShape, nw: number): number {
  return 6 * s.C + s.R * s.C + s.R * (s.C + nw - 1) + stagedReadoutLayout(s, nw).floats;
}

/**
 * The staged `window_readout` ({@linkcode WINDOW_READOUT_STAGED}; where {@linkcode stagedReadoutFloats} is within
 * `WINDOW_STAGED_FLOATS`, 16 KiB, else the earlier form), per `(b, h, chunk, R steps)` in `CHUNK_WG`
 * invocations: the scores `sp[t, p] = q_t . x_(j0 + p)` (a staged product over the keys), then per 4 x 4 block of
 * steps x value columns `exp(P_t) base_t^T q_t` (`S_in` or `S0`, both staged over the keys) plus
 * `sum_r (Gam[t, t_r] sp[t, p_r]) W_r` over the instance rows up to the tile's last step (`score_rows4` from `sp` and `gm`
 * staged as `A`, the pseudo-values as `B`).
 */
function stagedReadoutKernel(s: ChunkShape, nw: number): string {
  const { R4, CP4, DV4, floats } = stagedReadoutLayout(s, nw);
  const invocations = CHUNK_WG;
  const queries: StagedOperand = {
    width: R4,
    along: "depth",
    value: maskedVec4((e) => `qn(bh, a + r0 + i, ${e})`, "k", "DK"),
    valid: "k < DK && i < R && r0 + i < len",
    quad: true,
  };
  const keys: StagedOperand = {
    width: CP4,
    along: "depth",
    value: maskedVec4((e) => `xp(bh, j0 + i32(i), ${e})`, "k", "DK"),
    valid: "k < DK && i < CP",
    quad: true,
  };
  const entryRows: StagedOperand = {
    width: DV4,
    along: "width",
    value: maskedVec4((e) => `cw[base + k * DV + ${e}]`, "i", "DV"),
    valid: "k < DK",
    quad: true,
  };
  const startRows: StagedOperand = {
    width: DV4,
    along: "width",
    value: maskedVec4((e) => `s0[bh * DK * DV + k * DV + ${e}]`, "i", "DV"),
    valid: "k < DK && u.hasS0 != 0u",
    quad: true,
  };
  const pseudoValueRows: StagedOperand = {
    width: DV4,
    along: "width",
    value: maskedVec4((e) => `cw[u.pseudoValues + instance_row(bh, a, k) * DV + ${e}]`, "i", "DV"),
    valid: "k < nr",
    quad: true,
  };
  const scoreGrid: TileGrid = { name: "sc", rows: R4, cols: CP4, invocations };
  const outGrid: TileGrid = { name: "ro", rows: R4, cols: DV4, invocations };
  const scores: TileProduct = { acc: "e", grid: scoreGrid, a: 0, b: 1 };
  const fromEntry: TileProduct = { acc: "ei", grid: outGrid, a: 0, b: 1 };
  const fromStart: TileProduct = { acc: "es", grid: outGrid, a: 0, b: 2 };
  // Gam[t, t_k] sp[t, p_k] of instance row k for the tile's steps, staged (computed once per workgroup, not per block)
  const weightedScores: StagedOperand = {
    width: R4,
    along: "width",
    value: "score_rows4(k, i / 4u)",
    valid: "k < nr",
    quad: true,
  };
  const intra: TileProduct = { acc: "ea", grid: outGrid, a: 0, b: 1 };
  for (
    const operands of [[queries, keys], [queries, entryRows, startRows], [weightedScores, pseudoValueRows]]
  ) {
    if (stagedFloats(operands) > floats) {
      throw new RangeError(
        `window_readout: ${stagedFloats(operands)} staged floats, above its layout's ${floats}`,
      );
    }
  }
  return `
var<workgroup> gm: array<f32, ${s.R * s.C}>; // Gam[t, t'] for the tile's steps t
var<workgroup> sp: array<f32, ${s.R * (s.C + nw - 1)}>; // per tile step and pair
var<workgroup> stage: array<vec4<f32>, ${floats / 4}>;
// Gam[t, t_k] sp[t, p_k] for instance row k and the tile's steps t = 4 rb .. 4 rb + 3 (clamped to R - 1: those past R
// are not stored)
fn score_rows4(k: u32, rb: u32) -> vec4<f32> {
  let p = k / NW + PAD - k % NW;
  let tk = k / NW;
  var v = vec4<f32>(0.0);
  for (var m = 0u; m < 4u; m++) {
    let ro = min(4u * rb + m, R - 1u);
    v[m] = sp[ro * CP + p] * gm[ro * C + tk];
  }
  return v;
}
${readoutTileDecay(s)}
  // the scores, 4 steps x 4 pairs per block
  {
  ${gridBlocks(scoreGrid)}
  ${declareAccumulators(scores)}
  ${stagedLoop("DK", [queries, keys], [scores])}
  ${
    eachTileRow(scoreGrid, (p, r) =>
      `if (scOn${p}) {
    let i = scRow${p} * 4u + ${r}u;
    ${
        [0, 1, 2, 3].map((c) =>
          `{ let pc = scCol${p} * 4u + ${c}u; if (i < R && pc < CP) { sp[i * CP + pc] = e${p}_${r}.${
            component(c)
          }; } }`
        ).join("\n    ")
      }
  }`)
  }
  }
  workgroupBarrier();
  let base = u.entryState + (bh * nck() + n) * DK * DV;
  let nr = min(len, r0 + R) * NW;
  // 4 steps x 4 value columns per block: the inter-chunk part against the bases the steps take (S_in, S0), then
  // the intra-chunk part from the scores
  ${gridBlocks(outGrid)}
  ${declareAccumulators(fromEntry)}
  ${declareAccumulators(fromStart)}
  ${declareAccumulators(intra)}
  ${stagedLoop("DK", [queries, entryRows, startRows], [fromEntry, fromStart])}
  ${stagedLoop("nr", [weightedScores, pseudoValueRows], [intra])}
  ${
    eachTileRow(outGrid, (p, r) =>
      `if (roOn${p}) {
    let i = roRow${p} * 4u + ${r}u;
    let tt = r0 + i;
    if (i < R && tt < len) {
      let kind = base_kind(tt);
      let fromS0 = kind == 1u;
      let dec = exp(cp[tt]);
      ${
        [0, 1, 2, 3].map((c) =>
          `{
        let col = roCol${p} * 4u + ${c}u;
        if (col < DV) {
          var inter = 0.0;
          if (kind == 0u || (fromS0 && u.hasS0 != 0u)) { inter = select(ei${p}_${r}.${
            component(c)
          }, es${p}_${r}.${component(c)}, fromS0); }
          out[((b * u.T + a + tt) * H + h) * DV + col] = dec * inter + ea${p}_${r}.${component(c)};
        }
      }`
        ).join("\n      ")
      }
    }
  }`)
  }
}`;
}

/** `let ${name}0 = ..;` .. `let ${name}3 = ..;` for the 4 rows or columns of a block (`f(i)` the value). */
function lets4(name: string, f: (i: number) => string): string {
  return [0, 1, 2, 3].map((i) => `let ${name}${i} = ${f(i)};`).join("\n      ");
}

/**
 * `window_row_grads` / `window_readout_dw`: for the instance rows `r = (t', o)` of `RC` steps, with `G` the exit-state
 * gradient and `ge = Gam[e, t']`: `dW_r = sum_t Gam[t, t'] (q_t.x_r) dO_t + ge G^T x_r` (`window_readout_dw`: the
 * readout part only, into `dPseudoValuesReadout`); `window_row_grads` also `dx_r = sum_t Gam[t, t'] (w_r.dO_t) q_t + ge G w_r`
 * (into `dxInstanceRows`), the readout decay weights `decayWeightsReadout[t, t'] = sum_o (q_t.x_r)(w_r.dO_t)` and the exit
 * weights `decayWeightsExit[t'] = sum_o x_r^T G w_r`.
 * Every product is a 4 x 4 register tile (each value read serves 4 products). `q_t.x_r` and `G^T x_r`
 * depend on the row only through its pair `j = t' - o`: the `RC W` rows have `RC + W - 1` pairs, so they
 * are computed per pair (`sq`, `gx`) and indexed per row. `dO_t.w_r` (`sd`) and `G w_r` (`gy`) are per
 * row; the decays `Gam[t, t']` of the tile's steps (`gm`) weight the scores where they are read.
 */
function colsKernel(exit: boolean, s: ChunkShape, nw: number): string {
  const rows = s.RC * nw;
  const pairs = s.RC + nw - 1;
  // block rows: the pair (pj) of pair blocks; the row (gr: its pseudoValues offset) of row blocks; the step (tq) of a column
  const pairRows = lets4("pj", (i) => `min(jbase + i32(min(p0 + ${i}u, NPC - 1u)), plast)`);
  const rowRows = lets4("gr", (i) => `instance_row(bh, a, min(rb + jr0 + ${i}u, nrow - 1u)) * DV`);
  const stepCols = lets4("tq", (i) => `a + min(tb0 + ${i}u, len - 1u)`);
  // a row block's rows for the products over the chunk's steps: its decay row (gq) and pair row (pq)
  const rowWeights = lets4("jq", (i) => `min(jr0 + ${i}u, RCW - 1u)`) + "\n      " +
    lets4("gq", (i) => `(jq${i} / NW) * C`) + "\n      " +
    lets4("pq", (i) => `(jq${i} / NW + PAD - jq${i} % NW) * C`);
  const dout = "dout[((b * u.T + tq${c}) * H + h) * DV + k]";
  const qxLoop = `if (bk < nqb) {
      let p0 = (bk % npb) * 4u;
      let tb0 = (bk / npb) * 4u;
      ${pairRows}
      ${stepCols}
      ${tile4("qx", "DK", "xp(bh, pj${r}, k)", "qn(bh, tq${c}, k)")}
      ${
    tile4Each((r, c) =>
      `if (p0 + ${r}u < NPC && tb0 + ${c}u < C) { sq[(p0 + ${r}u) * C + tb0 + ${c}u] = qx${r}${c}; }`
    )
  }
    }`;
  const gxLoop = `else {
      let p0 = ((bk - nqb) % npb) * 4u;
      let c0 = ((bk - nqb) / npb) * 4u;
      ${pairRows}
      ${tile4("gx", "DK", "xp(bh, pj${r}, k)", "cw[gb + k * DV + min(c0 + ${c}u, DV - 1u)]")}
      ${
    tile4Each((r, c) =>
      `if (p0 + ${r}u < NPC && c0 + ${c}u < DV) { gx[(p0 + ${r}u) * DV + c0 + ${c}u] = gx${r}${c}; }`
    )
  }
    }`;
  const rowLoop = `for (var bk = lid; bk < nyb + nxb; bk += WG) {
    if (bk < nyb) {
      let jr0 = (bk % nrb) * 4u;
      let tb0 = (bk / nrb) * 4u;
      ${rowRows}
      ${stepCols}
      ${tile4("yd", "DV", "cw[u.pseudoValues + gr${r} + k]", dout)}
      ${
    tile4Each((r, c) =>
      `if (jr0 + ${r}u < RCW && tb0 + ${c}u < C) { sd[(jr0 + ${r}u) * C + tb0 + ${c}u] = yd${r}${c}; }`
    )
  }
    } else {
      let jr0 = ((bk - nyb) % nrb) * 4u;
      let q0 = ((bk - nyb) / nrb) * 4u;
      ${rowRows}
      ${tile4("gy", "DV", "cw[u.pseudoValues + gr${r} + k]", "cw[gb + min(q0 + ${c}u, DK - 1u) * DV + k]")}
      ${
    tile4Each((r, c) =>
      `if (jr0 + ${r}u < RCW && q0 + ${c}u < DK) { gy[(jr0 + ${r}u) * DK + q0 + ${c}u] = gy${r}${c}; }`
    )
  }
    }
  }`;
  // the gradient rows: sum over the chunk's steps t of (decay x score)[row, t] times a row of q or dO
  const grad = (N: string, score: string, b: string, store: string) =>
    `for (var bk = lid; bk < nrb * ((${N} + 3u) / 4u); bk += WG) {
    let jr0 = (bk % nrb) * 4u;
    let o0 = (bk / nrb) * 4u;
    ${rowWeights}
    ${tile4("e", "len", `${score} * gm[gq\${r} + k]`, b)}
    ${
      tile4Each((r, c) =>
        `{
      let jr = jr0 + ${r}u;
      let o = o0 + ${c}u;
      let row = rb + jr;
      if (jr < RCW && o < ${N} && row < nrow) {
        let ok = is_real_row(a, len, row);
        ${store.replaceAll("${r}", `${r}`).replaceAll("${c}", `${c}`)}
      }
    }`
      )
    }
  }`;
  return `
const RCW = ${rows}u;
const NPC = ${pairs}u;
var<workgroup> sq: array<f32, ${pairs * s.C}>; // q_t . x_j per pair j of the tile's rows and step t
var<workgroup> gm: array<f32, ${s.RC * s.C}>; // Gam[t, t'] per step t' of the tile and step t
${
    exit
      ? `var<workgroup> sd: array<f32, ${rows * s.C}>; // dO_t . w_r per row and step t
var<workgroup> gy: array<f32, ${rows * s.dk}>; // G w_r per row
var<workgroup> gx: array<f32, ${pairs * s.dv}>; // G^T x_j per pair
var<workgroup> ge: array<f32, C>;
var<workgroup> exr: array<f32, RCW>; // x_r^T G w_r per row`
      : ""
  }
${chunkEntry(`${Math.ceil(s.C / s.RC)}u`)}
  let h = bh % H;
  let cb = bh * nck() + n;
  let st0 = tile * RC;
  if (st0 >= len) { return; }
  let rb = st0 * NW;
  let nrow = len * NW;
  // pair p = 0..NPC-1 of the tile is j = a + st0 - PAD + p (row (t', o) has p = t' - st0 + PAD - o);
  // reads are clamped to the chunk's last pair, what lies past it is never stored or is masked
  let jbase = i32(a + st0) - i32(PAD);
  let plast = i32(a + len) - 1;
  let npb = (NPC + 3u) / 4u;
  let nrb = (RCW + 3u) / 4u;
  let nqb = npb * ((C + 3u) / 4u);
  ${exit ? "let gb = u.dExitState + cb * DK * DV;" : ""}
  for (var k = lid; k < RC * C; k += WG) {
    let t2 = st0 + k / C;
    let tt = k % C;
    var v = 0.0;
    if (tt < len && t2 < len && tt >= t2 && cseg[tt] == cseg[t2]) { v = exp(cp[tt] - cp[t2]); }
    gm[k] = v;
  }
  ${exit ? "for (var k = lid; k < len; k += WG) { ge[k] = gam(len - 1u, k); }" : ""}
  // per pair: q_t.x_j (4 pairs x 4 steps per invocation)${
    exit ? " and G^T x_j (4 pairs x 4 value columns)" : ""
  }
  for (var bk = lid; bk < nqb${exit ? " + npb * ((DV + 3u) / 4u)" : ""}; bk += WG) {
    ${qxLoop}${exit ? ` ${gxLoop}` : ""}
  }
  ${
    exit
      ? `// per row: dO_t.w_r (4 rows x 4 steps) and G w_r (4 rows x 4 key entries)
  let nyb = nrb * ((C + 3u) / 4u);
  let nxb = nrb * ((DK + 3u) / 4u);
  ${rowLoop}`
      : ""
  }
  workgroupBarrier();
  ${
    exit
      ? `// decayWeightsReadout[t, t'] = sum_o (q_t.x_r)(w_r.dO_t) and x_r^T G w_r per row
  for (var k = lid; k < RC * C; k += WG) {
    let sl = k / C;
    let tt = k % C;
    let t2 = st0 + sl;
    if (t2 >= len || tt >= len) { continue; }
    var v = 0.0;
    if (tt >= t2) {
      for (var o = 0u; o < NW; o++) {
        if (is_real_row(a, len, t2 * NW + o)) { v += sq[(sl + PAD - o) * C + tt] * sd[(sl * NW + o) * C + tt]; }
      }
    }
    cw[u.decayWeightsReadout + (cb * C + tt) * CP + t2] = v;
  }
  for (var jr = lid; jr < RCW; jr += WG) {
    let row = rb + jr;
    var v = 0.0;
    if (row < nrow && is_real_row(a, len, row)) {
      let j = row_pair(a, row);
      for (var i = 0u; i < DK; i++) { v += xp(bh, j, i) * gy[jr * DK + i]; }
    }
    exr[jr] = v;
  }
  // dx_r (4 rows x 4 key entries)
  ${
        grad(
          "DK",
          "sd[jq${r} * C + k]",
          "qn(bh, a + k, min(o0 + ${c}u, DK - 1u))",
          "cw[u.dxInstanceRows + instance_row(bh, a, row) * DK + o] = select(0.0, ge[row / NW] * gy[jr * DK + o] + e${r}${c}, ok);",
        )
      }`
      : ""
  }
  // dW_r (4 rows x 4 value columns)
  ${
    grad(
      "DV",
      "sq[pq${r} + k]",
      "dout[((b * u.T + a + k) * H + h) * DV + min(o0 + ${c}u, DV - 1u)]",
      exit
        ? "cw[u.dPseudoValues + instance_row(bh, a, row) * DV + o] = select(0.0, ge[row / NW] * gx[(jr / NW + PAD - jr % NW) * DV + o] + e${r}${c}, ok);"
        : "cw[u.dPseudoValuesReadout + instance_row(bh, a, row) * DV + o] = select(0.0, e${r}${c}, ok);",
    )
  }
  ${
    exit
      ? `workgroupBarrier();
  for (var sl = lid; sl < RC; sl += WG) {
    let t2 = st0 + sl;
    if (t2 >= len) { continue; }
    var v = 0.0;
    for (var o = 0u; o < NW; o++) { v += exr[sl * NW + o]; }
    cw[u.decayWeightsExit + cb * CP + t2] = v;
  }`
      : ""
  }
}`;
}

/**
 * `window_solve_input_grads`: for the instance rows `r = (t, o)` of `RP` steps, with `F[r, r'] = -(dR_r.w_r') g_t Gp[t, t']`
 * (`t' < t`): `dx_r += sum_r' (F[r, r'] + F[r', r]) x_r' - g_t exp(Pp_t) base_t dR_r` (into `dxInstanceRows`);
 * per step `dEraseGain_t = sum_o [sum_r' -(dR_r.w_r') Gp[t, t'] x_r.x_r' - exp(Pp_t) dR_r.(base_t^T x_r)]`,
 * `dDeltaWriteGain_t = sum_o dR_r.y_r` (`da`, `db`); the decay shares `decayWeightsSolve[t, t'] = sum_{o, o'} F[r, r'] x_r.x_r'`
 * and `decayWeightsSolveBase_t = -g_t exp(Pp_t) sum_o dR_r.(base_t^T x_r)`.
 * The columns `r'` are walked in panels of `PS` steps (`PW = PS W` rows): per panel, 4 x 4 register
 * tiles of `dR_r.w_r'` (below the step diagonal) or `w_r.dR_r'` (above it: the `F[r', r]` side) give
 * `F` and the `decayWeightsSolve` terms (`sf`, `sv`); `F` summed over the rows of each pair (`sfp`, the panel's
 * `PS + W - 1` pairs) times `x_j` accumulates `dx` as 4 x 4 tiles (`acc`), so the `x` product runs over
 * pairs, not rows. The base term `base_t dR_r` is a 4 x 4 tile per base (`S_in`, `S0`), run only for the
 * blocks whose rows take that base.
 */
function pairsKernel(s: ChunkShape, nw: number): string {
  const rows = s.RP * nw;
  const ps = windowPanelSteps(nw, s.C);
  const R4 = [0, 1, 2, 3];
  const rowRows = lets4("rr", (i) => `min(rb + jr0 + ${i}u, nrow - 1u)`) + "\n      " +
    lets4("gr", (i) => `instance_row(bh, a, rr${i}) * DV`);
  return `
const RPW = ${rows}u;
const PS = ${ps}u;
const PW = ${ps * nw}u;
const NPP = ${ps + nw - 1}u;
var<workgroup> sf: array<f32, ${rows * ps * nw}>; // F[r, r'] + F[r', r] for the panel's rows r'
var<workgroup> sv: array<f32, ${rows * ps * nw}>; // -(dR_r.w_r') Gp[t, t'] x_r.x_r' (r' earlier)
var<workgroup> sfp: array<f32, ${rows * (ps + nw - 1)}>; // sf summed over the rows of each panel pair
var<workgroup> ymp: array<f32, ${s.RP * ps}>; // sv summed per (step, panel step)
var<workgroup> acc: array<f32, ${rows * s.dk}>; // the dx rows' pair terms, then x_r * (base_t dR_r)
var<workgroup> s1: array<f32, RP>;
var<workgroup> rdb: array<f32, RPW>;
var<workgroup> rxb: array<f32, RPW>;
${chunkEntry(`${Math.ceil(s.C / s.RP)}u`)}
  let cb = bh * nck() + n;
  let st0 = tile * RP;
  if (st0 >= len) { return; }
  let rb = st0 * NW;
  let nrow = len * NW;
  let nrb = (RPW + 3u) / 4u;
  let nqb = (DK + 3u) / 4u;
  for (var k = lid; k < RPW * DK; k += WG) { acc[k] = 0.0; }
  for (var k = lid; k < RP; k += WG) { s1[k] = 0.0; }
  for (var p0 = 0u; p0 < len; p0 += PS) {
    let pr0 = p0 * NW;
    // 4 rows x 4 panel rows per invocation: (later, earlier) = (r, r') below the step diagonal, (r', r)
    // above it; a block on neither side of it computes nothing, one across it (W not 1, 2 or 4) both
    for (var bk = lid; bk < nrb * ((PW + 3u) / 4u); bk += WG) {
      let jr0 = (bk % nrb) * 4u;
      let cl0 = (bk / nrb) * 4u;
      ${rowRows}
      ${lets4("rc", (i) => `min(pr0 + cl0 + ${i}u, nrow - 1u)`)}
      ${lets4("gc", (i) => `instance_row(bh, a, rc${i}) * DV`)}
      let below = rc0 / NW < rr3 / NW;
      let above = rc3 / NW > rr0 / NW;
      ${
    tile4(
      "lo",
      "select(0u, DV, below)",
      "cw[u.dRightHandSide + gr${r} + k]",
      "cw[u.pseudoValues + gc${c} + k]",
    )
  }
      ${
    tile4(
      "hi",
      "select(0u, DV, above)",
      "cw[u.pseudoValues + gr${r} + k]",
      "cw[u.dRightHandSide + gc${c} + k]",
    )
  }
      // per row and column: kept (a real row of the tile or panel), step, segment
      ${lets4("okr", (i) => `jr0 + ${i}u < RPW && rb + jr0 + ${i}u < nrow && is_real_row(a, len, rr${i})`)}
      ${lets4("okc", (i) => `cl0 + ${i}u < PW && pr0 + cl0 + ${i}u < nrow && is_real_row(a, len, rc${i})`)}
      ${lets4("tr", (i) => `rr${i} / NW`)}
      ${lets4("tc", (i) => `rc${i} / NW`)}
      ${
    tile4Each((r, c) =>
      `if (jr0 + ${r}u < RPW && cl0 + ${c}u < PW) {
      let lower = tc${c} < tr${r};
      let tl = max(tr${r}, tc${c});
      let keep = okr${r} && okc${c} && tr${r} != tc${c} && cseg[tr${r}] == cseg[tc${c}];
      let dw = select(0.0, select(hi${r}${c}, lo${r}${c}, lower) * exp(cpp[tl] - cp[min(tr${r}, tc${c})]), keep);
      let e = (jr0 + ${r}u) * PW + cl0 + ${c}u;
      sf[e] = -dw * cga[tl];
      sv[e] = select(0.0, -dw * xx(bh, n, rr${r}, rc${c}), lower);
    }`
    )
  }
    }
    workgroupBarrier();
    // F summed per pair of the panel (pair p0 - PAD + pl holds rows (p0 + ls, o') with ls = pl - PAD + o')
    for (var k = lid; k < RPW * NPP; k += WG) {
      let jr = k / NPP;
      let pl = k % NPP;
      var v = 0.0;
      for (var o2 = 0u; o2 < NW; o2++) {
        let ls = pl + o2;
        if (ls >= PAD && ls < PS + PAD) { v += sf[jr * PW + (ls - PAD) * NW + o2]; }
      }
      sfp[k] = v;
    }
    // decayWeightsSolve[t, t'] for the panel's steps t'
    for (var k = lid; k < RP * PS; k += WG) {
      let sl = k / PS;
      let ls = k % PS;
      var v = 0.0;
      for (var o = 0u; o < NW; o++) {
        for (var o2 = 0u; o2 < NW; o2++) { v += sv[(sl * NW + o) * PW + ls * NW + o2]; }
      }
      ymp[k] = v;
      let t = st0 + sl;
      if (t < len && p0 + ls < len) { cw[u.decayWeightsSolve + (cb * C + t) * C + p0 + ls] = cga[t] * v; }
    }
    workgroupBarrier();
    for (var sl = lid; sl < RP; sl += WG) {
      var v = s1[sl];
      for (var ls = 0u; ls < PS; ls++) { v += ymp[sl * PS + ls]; }
      s1[sl] = v;
    }
    // dx rows += (F per pair) x_j, 4 rows x 4 key entries per invocation (each block keeps its invocation)
    let pj = i32(a + p0) - i32(PAD);
    let np = min(NPP, len + PAD - p0);
    for (var bk = lid; bk < nrb * nqb; bk += WG) {
      let jr0 = (bk % nrb) * 4u;
      let q0 = (bk / nrb) * 4u;
      ${
    tile4(
      "px",
      "np",
      "sfp[min(jr0 + ${r}u, RPW - 1u) * NPP + k]",
      "xp(bh, pj + i32(k), min(q0 + ${c}u, DK - 1u))",
    )
  }
      ${
    tile4Each((r, c) =>
      `if (jr0 + ${r}u < RPW && q0 + ${c}u < DK) { acc[(jr0 + ${r}u) * DK + q0 + ${c}u] += px${r}${c}; }`
    )
  }
    }
  }
  // the right-hand side's -g_t exp(Pp_t) base_t^T x_j: base_t dR_r against S_in and S0 (4 rows x 4 key
  // entries, each base only for blocks with a row that takes it); the dx rows are complete
  let bin = u.entryState + cb * DK * DV;
  let sbase = bh * DK * DV;
  for (var bk = lid; bk < nrb * nqb; bk += WG) {
    let jr0 = (bk % nrb) * 4u;
    let q0 = (bk / nrb) * 4u;
    ${rowRows}
    let kin = ${R4.map((i) => `base_kind(rr${i} / NW) == 0u`).join(" || ")};
    let ks0 = u.hasS0 != 0u && (${R4.map((i) => `base_kind(rr${i} / NW) == 1u`).join(" || ")});
    ${
    tile4(
      "bi",
      "select(0u, DV, kin)",
      "cw[u.dRightHandSide + gr${r} + k]",
      "cw[bin + min(q0 + ${c}u, DK - 1u) * DV + k]",
    )
  }
    ${
    tile4(
      "bs",
      "select(0u, DV, ks0)",
      "cw[u.dRightHandSide + gr${r} + k]",
      "s0[sbase + min(q0 + ${c}u, DK - 1u) * DV + k]",
    )
  }
    // per row: kept, the base's factor -g_t exp(Pp_t), which base (S_in, S0 or none) and the pair
    ${lets4("okr", (i) => `jr0 + ${i}u < RPW && rb + jr0 + ${i}u < nrow && is_real_row(a, len, rr${i})`)}
    ${lets4("kr", (i) => `base_kind(rr${i} / NW)`)}
    ${lets4("fr", (i) => `-cga[rr${i} / NW] * exp(cpp[rr${i} / NW])`)}
    ${lets4("jp", (i) => `row_pair(a, rr${i})`)}
    ${
    tile4Each((r, c) =>
      `if (jr0 + ${r}u < RPW && q0 + ${c}u < DK) {
      let q = q0 + ${c}u;
      let e = (jr0 + ${r}u) * DK + q;
      let bd = select(select(0.0, bs${r}${c}, kr${r} == 1u && u.hasS0 != 0u), bi${r}${c}, kr${r} == 0u);
      if (okr${r}) {
        let kx = u.dxInstanceRows + instance_row(bh, a, rr${r}) * DK + q;
        cw[kx] = cw[kx] + acc[e] + fr${r} * bd;
      }
      acc[e] = select(0.0, xp(bh, jp${r}, q) * bd, okr${r});
    }`
    )
  }
  }
  // dR_r.y_j per row
  for (var jr = lid; jr < RPW; jr += WG) {
    let row = rb + jr;
    var db = 0.0;
    if (is_real_row(a, len, row)) {
      let gr = instance_row(bh, a, row) * DV;
      let j = row_pair(a, row);
      for (var c = 0u; c < DV; c++) { db += cw[u.dRightHandSide + gr + c] * yp(bh, j, c); }
    }
    rdb[jr] = db;
  }
  workgroupBarrier();
  for (var jr = lid; jr < RPW; jr += WG) {
    var v = 0.0;
    for (var q = 0u; q < DK; q++) { v += acc[jr * DK + q]; }
    rxb[jr] = v;
  }
  workgroupBarrier();
  for (var sl = lid; sl < RP; sl += WG) {
    let t = st0 + sl;
    if (t >= len) { continue; }
    var xbd = 0.0;
    var db = 0.0;
    for (var o = 0u; o < NW; o++) {
      xbd += rxb[sl * NW + o];
      db += rdb[sl * NW + o];
    }
    let ex = exp(cpp[t]);
    let k = bh * u.T + a + t;
    cw[u.dEraseGain + k] = s1[sl] - ex * xbd;
    cw[u.dDeltaWriteGain + k] = db;
    cw[u.decayWeightsSolveBase + k] = -cga[t] * ex * xbd;
  }
}`;
}
