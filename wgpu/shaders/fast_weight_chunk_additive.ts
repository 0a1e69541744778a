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
 * - `coef`: one invocation per `(b, h, t)`: `log gamma_t` (`log eps_gamma` where clamped) and `g_t` (falcon3a's window
 *   mean statistic from pair norms its workgroup sums once each, `stepCoefEntry` of `chunk_wgsl.ts`; `coef_grads` too);
 * - `state_increment`: per `(b, h, chunk, 64 state elements)`: `dS_n = sum_j M[e,j] x_j y_j^T`, the chunk decay
 *   `exp(P_e)` and which base the exit state has (`exitBaseKind`: 0 `S_in`, 1 `S0`, 2 zero);
 * - `state_scan`: per `(b, h, state element)`, sequential over chunks: the entering state of every chunk;
 * - `readout`: per `(b, h, chunk, R rows)` (`rowsKernelForm` of `chunk_wgsl.ts`: without a window's pad the whole chunk
 *   where it fits, in `STAGED_WG` invocations; with one up to 16 rows in `CHUNK_WG`): the outputs;
 * - backward: `base_readout_grads` (per-chunk `sum exp(P_t) q_t dO_t^T`, split by the base: `S_in` or `S0`), `reverse_scan`
 *   (reverse scan: the gradient `G_n` of every chunk's exit state, `dS0`, `dCarryState`; a backward without `dS0` runs
 *   `base_readout_grads_no_s0` and `reverse_scan_no_s0`, the same without the `S0` half and `dS0`), `query_grads` (rows as
 *   `readout`: `dq_t = S_t dO_t`, and its base part `dqBase`), `pair_column_grads` (per `(b, h, chunk, RC pair columns)`: `dx_j`,
 *   `dy_j`, the terms of `d g_s` (`dWriteGainTerms`) and the readout and exit weights `decayWeightsReadout`, `decayWeightsExit`;
 *   `pair_column_grads_tail` the same for the columns past its whole tiles, where there are any), `decay_grads` (per
 *   `(b, h, chunk)`: `d g_t` and `d log gamma_t` by `decayGradKernel` of `chunk_wgsl.ts`: the sum
 *   over the decay factors whose chain holds step `t`, as a reverse cumulative sum of the chains' weights), `coef_grads` (per step:
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
  bindsVec4Output,
  bindsVec4Workspace,
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  chunkStepsKernel,
  clampedVec4,
  coefBackKernel,
  decayGradKernel,
  flatEntry,
  isDeltaChunkRule,
  isPairColumnTail,
  isSolveChunkRule,
  maskedVec4,
  pairColumnInvocations,
  pairColumnLayout,
  type PairColumnPass,
  pairColumnTiling,
  type PairColumnVariant,
  pairRowEntries,
  prelude,
  rowsKernelForm,
  rowsLayout,
  sharesWindowDots,
  stateTileBlock,
  stateTiles,
  stepCoefEntry,
  stepCoefWgsl,
  tile4Each,
  vec4Tile,
} from "./chunk_wgsl.ts";
import {
  component,
  declareAccumulators,
  eachTileRow,
  gridBlocks,
  roundUp4,
  STAGE_DEPTH,
  stagedFloats,
  stagedLoop,
  type StagedOperand,
  type TileGrid,
  type TileProduct,
} from "./chunk_staged_tiles.ts";
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
  // a tail pipeline's RC is its tile's (ChunkShape.RT)
  const head = prelude(pass, config, isPairColumnTail(pass) ? { ...s, RC: s.RT } : s, heads);
  const kind = statKind(config.rule);
  const delta = isDeltaChunkRule(config);
  const solve = isSolveChunkRule(config);
  switch (pass) {
    case "coef":
      return head + stepCoefWgsl(config) + `
${stepCoefEntry(config)}
  let t = idx % u.T;
  let bh = idx / u.T;
  let co = step_co(bh, bh / H, bh % H, t);
  cw[u.logDecay + idx] = log_gamma(co);
  cw[u.writeGain + idx] = co.b;
  ${solve ? "cw[u.eraseGain + idx] = co.a;" : ""}
  ${
        kind === "mu" && !sharesWindowDots(config)
          ? `// the top eigenvector of the window's Gram matrix, for the statistic's gradient
  var st = step_stat(bh, t, pairs_at(bh / H, t));
  for (var o = 0u; o < NW; o++) { cw[u.topEigenvector + idx * NW + o] = st.u[o]; }`
          : ""
      }
}`;
    case "chunk_steps":
      return head + chunkStepsKernel(solve);
    case "state_increment":
      return head + chunkSteps(false) + `
var<workgroup> me: array<f32, CP>;
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let j0 = i32(a) - i32(PAD);
  for (var k = lid; k < len + PAD; k += WG) { me[k] = m_of(len - 1u, j0 + i32(k), a); }
  workgroupBarrier();
  // a 4 x 4 block of the state per invocation
  ${
        stateTileBlock(`// sum_k me[k] x_k[i0..] y_k[cb0..]^T: a vec4 of each per pair
    ${
          vec4Tile(
            [{ acc: "e", a: "xp4(bh, j0 + i32(k), i0) * me[k]" }],
            "len + PAD",
            "yp4(bh, j0 + i32(k), cb0)",
          )
        }
    ${
          tile4Each((r, c) =>
            `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) { cw[u.chunkStateIncrement + (bh * nck() + n) * DK * DV + (i0 + ${r}u) * DV + cb0 + ${c}u] = e${r}[${c}]; }`
          )
        }`)
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
    case "base_readout_grads_no_s0":
      return head + chunkSteps(delta) + baseReadoutGradsKernel(s, pass === "base_readout_grads");
    case "reverse_scan":
    case "reverse_scan_no_s0":
      return head + reverseScanKernel(pass === "reverse_scan");
    case "pair_column_grads":
    case "pair_column_grads_tail":
      return head + chunkSteps(delta) +
        colsKernel(pass, s, windowSlots(config) - 1, delta ? "delta" : "additive");
    case "readout_dw":
    case "readout_dw_tail":
      return head + chunkSteps(true) + colsKernel(pass, s, 0, "deltaNoExit");
    case "decay_grads":
      return head + chunkSteps(false) + decayGradKernel(false, s.C);
    case "coef_grads":
      return head + coefBackKernel(config, "0.0", "cw[u.dWriteGain + idx]");
    case "pair_row_grads":
      return head + `
const ROW_ENTRIES = ${pairRowEntries(s, windowSlots(config) - 1)}u;
${flatEntry("u.B * H * (PAD + u.T + 1u) * ROW_ENTRIES")}
  // one invocation per entry of a pair's dx row (e < DK) or dy row (e >= DK, only with a pad: pairRowEntries):
  // neighbours touch neighbouring floats
  let e = idx % ROW_ENTRIES;
  let r = (idx / ROW_ENTRIES) % (PAD + u.T + 1u);
  let bh = idx / (ROW_ENTRIES * (PAD + u.T + 1u));
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
 * WGSL of `base_readout_grads` (per `(b, h, chunk)` and 4 x 4 blocks of the state: `sum_t exp(P_t) q_t dO_t^T` over
 * the chunk's steps on each base, `S_in` and `S0`, into the two halves of `dBaseReadout`), or, without `withS0`, of
 * `base_readout_grads_no_s0`: the `S_in` half alone (the `S0` half feeds only `dS0`), the same floats.
 */
function baseReadoutGradsKernel(s: ChunkShape, withS0: boolean): string {
  const kinds = withS0 ? [0, 1] : [0];
  const accumulator = (kind: number) => ["uu", "vv"][kind];
  return `
${chunkEntry(`${stateTiles(s.dk, s.dv)}u`)}
  let h = bh % H;
  // a 4 x 4 block of the state per invocation, split by the base of each step (S_in or S0)
  ${
    stateTileBlock(`// sum_k exp(P_k) q_k[i0..] dO_k[cb0..]^T, split by base kind: a vec4 of each per step
    ${
      vec4Tile(
        kinds.map((kind) => ({
          acc: accumulator(kind),
          a: `qn4(bh, a + k, i0) * select(0.0, exp(cp[k]), base_kind(k) == ${kind}u)`,
        })),
        "len",
        "do4(((b * u.T + a + k) * H + h) * DV, cb0)",
      )
    }
    let k0 = ((bh * nck() + n) * 2u) * DK * DV;
    ${
      tile4Each((r, c) =>
        `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) {
      ${
          kinds.map((kind) =>
            `cw[u.dBaseReadout + k0 + ${kind ? "DK * DV + " : ""}(i0 + ${r}u) * DV + cb0 + ${c}u] = ${
              accumulator(kind)
            }${r}[${c}];`
          ).join("\n      ")
        }
    }`
      )
    }`)
  }
}`;
}

/**
 * WGSL of `reverse_scan` (per `(b, h, state element)`, over the chunks in reverse: the exit-state gradient `G_n` of
 * every chunk into `dExitState`, then `dCarryState` and `dS0`, the sum of the `S0` halves of `dBaseReadout` and of
 * the exit gradients of the chunks whose exit base is `S0`), or, without `withS0`, of `reverse_scan_no_s0` (no `dS0`).
 */
function reverseScanKernel(withS0: boolean): string {
  const s0 = (wgsl: string) => withS0 ? wgsl : "";
  return `
${flatEntry("u.B * H * DK * DV")}
  let e = idx % (DK * DV);
  let bh = idx / (DK * DV);
  var gs = 0.0;
  ${s0("var acc = 0.0;")}
  for (var nn = i32(nck()) - 1; nn >= 0; nn--) {
    let n = u32(nn);
    let k = (bh * nck() + n) * DK * DV + e;
    cw[u.dExitState + k] = gs;
    let dec = cw[u.chunkDecay + bh * nck() + n];
    let ku = ((bh * nck() + n) * 2u) * DK * DV + e;
    ${s0("acc += cw[u.dBaseReadout + ku + DK * DV];")}
    let zk = cw[u.exitBaseKind + bh * nck() + n];
    if (zk == 0.0) {
      // an explicit fma: a compiler contracts dec * gs into the add only where the product has no other use
      // (as in reverse_scan_no_s0, not in reverse_scan, which also adds it to dS0): the NVIDIA H200 rounded
      // the two kernels' G_n 1 ulp apart (2026-12-04)
      gs = fma(dec, gs, cw[u.dBaseReadout + ku]);
    } else {
      ${s0("if (zk == 1.0) { acc += dec * gs; }")}
      gs = cw[u.dBaseReadout + ku];
    }
  }
  ${s0("out[u.gDS0 + idx] = acc;")}
  out[u.gDC + idx] = gs;
}`;
}

/**
 * `readout`: `o_t = exp(P_t) base_t^T q_t + sum_j (M[t,j] q_t.x_j) v_j`;
 * `query_grads`: `dq_t = exp(P_t) base_t dO_t + sum_j (M[t,j] dO_t.v_j) x_j` (= `S_t dO_t`), and its base part
 * `dqBase`; `v_j` the targets `y_j` (additive) or the pseudo-values `w_j` (delta). In the form
 * `rowsKernelForm` of `chunk_wgsl.ts` picks by the window's pad: {@linkcode stagedRowsKernel} without one,
 * {@linkcode directRowsKernel} with one (falcon3a).
 */
function rowsKernel(pass: "readout" | "query_grads", s: ChunkShape, pad: number, delta: boolean): string {
  return rowsKernelForm(pad) === "staged"
    ? stagedRowsKernel(pass, s, delta)
    : directRowsKernel(pass, s, pad, delta);
}

/**
 * {@linkcode rowsKernel} of a pad-free rule (the pair columns are the chunk's steps): one workgroup per
 * `(b, h, chunk, R rows)` (the whole chunk where the workgroup memory holds it, `rowsLayout` of `chunk_wgsl.ts`).
 * Every product is a register tile fed from workgroup memory (`chunk_staged_tiles.ts`), its operands staged slice
 * by slice with coalesced loads:
 * 1. over the key (readout) / value (query_grads) entries, one staged slice of the rows `q_t` / `dO_t` serving
 *    both products: the scores `q_t.x_j` / `dO_t.v_j` (pair columns x rows), masked by `M[t, j]` into `scT`, and
 *    the part against `S_in` (rows x output entries), kept for the rows that meet `S_in`;
 * 2. with `S0`, the part against it (the rows that meet `S0`; none without one), then the sum scaled by
 *    `exp(P_t)` (`dqBase`);
 * 3. the intra part `sum_j scT[j, t] v_j` / `x_j` (over the pair columns) added to it, stored (a block of the
 *    whole chunk's rows skips the slices of pair columns past them: `M[t, j] = 0` for `j > t`).
 */
function stagedRowsKernel(pass: "readout" | "query_grads", s: ChunkShape, delta: boolean): string {
  const fwd = pass === "readout";
  const layout = rowsLayout(s);
  const wg = layout.invocations;
  const [R4, DK4, DV4] = [s.R, s.dk, s.dv].map(roundUp4);
  const W4 = R4 / 4;
  // the depth of loops 1 and 2 (K), the outputs' entries (NC)
  const [K, NC, NC4] = fwd ? ["DK", "DV", DV4] : ["DV", "DK", DK4];
  const pairStep: TileGrid = { name: "pairStep", rows: layout.scoreColumns, cols: R4, invocations: wg };
  const stepOut: TileGrid = { name: "stepOut", rows: R4, cols: NC4, invocations: wg };
  // operands, entry (k, i): the depth index k and the width index i
  const pairColumnsT: StagedOperand = {
    width: layout.scoreColumns,
    along: "depth",
    value: `${fwd ? "xp" : "vp"}(bh, i32(a + i), k)`,
    valid: `i < len && k < ${K}`,
  };
  const rowsT = (value: string, K: string): StagedOperand => ({
    width: R4,
    along: "depth",
    value,
    valid: `i < R && r0 + i < len && k < ${K}`,
  });
  // a base: readout's base[k, i] (its rows, along the width), query_grads' base[i, k] (across them, along the depth)
  const base = (entry: (q: string, c: string) => string): StagedOperand =>
    fwd
      ? { width: DV4, along: "width", value: entry("k", "i"), valid: "i < DV && k < DK" }
      : { width: DK4, along: "depth", value: entry("i", "k"), valid: "i < DK && k < DV" };
  const entering = base((q, c) => `cwf(bin + ${q} * DV + ${c})`);
  const s0 = base((q, c) => `s0f((bh * DK + ${q}) * DV + ${c})`);
  const mixed: StagedOperand = {
    width: NC4,
    along: "width",
    value: `${fwd ? "vp" : "xp"}(bh, i32(a + k), i)`,
    valid: `k < len && i < ${NC}`,
  };
  const scores: TileProduct = { acc: "sc", grid: pairStep, a: 0, b: 1 };
  const inter: TileProduct = { acc: "o", grid: stepOut, a: 1, b: 2 };
  const fromS0: TileProduct = { acc: "o", grid: stepOut, a: 0, b: 1 };
  // scT[j, t] = 0 past t: with the whole chunk in one tile (r0 = 0) a lower triangular A^T
  const tiles = Math.ceil(s.C / s.R);
  const intra: TileProduct = {
    acc: "o",
    grid: stepOut,
    a: { array: "scT", width4: W4 },
    b: 0,
    lowerA: tiles === 1,
  };
  const rowEntry = fwd ? "qn(bh, a + r0 + i, k)" : "doutf(((b * u.T + a + r0 + i) * H + h) * DV + k)";
  const loops = [
    [pairColumnsT, rowsT(rowEntry, K), entering],
    [rowsT(`select(0.0, ${rowEntry}, base_kind(r0 + i) == 1u)`, "s0Depth"), s0],
    [mixed],
  ];
  for (const operands of loops) {
    if (stagedFloats(operands) > layout.stage) {
      throw new RangeError(
        `${pass}: ${stagedFloats(operands)} staged floats, above its layout's ${layout.stage}`,
      );
    }
  }
  // per row r of block p of the outputs
  const eachRow = (f: (p: number, r: number) => string) =>
    eachTileRow(stepOut, (p, r) =>
      `{
    let tr = stepOutRow${p} * 4u + ${r}u;
    let tt = r0 + tr;
    ${f(p, r)}
  }`);
  const entries = (p: number, r: number, N: string, store: (col: string, v: string) => string) =>
    `if (stepOutOn${p} && tr < R && tt < len) {
      ${
      [0, 1, 2, 3].map((c) =>
        `{ let col = stepOutCol${p} * 4u + ${c}u; if (col < ${N}) { ${
          store("col", `o${p}_${r}.${component(c)}`)
        } } }`
      ).join("\n      ")
    }
    }`;
  return `${valueWgsl4(delta, bindsVec4Workspace(pass, s))}
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices
var<workgroup> scT: array<vec4<f32>, ${layout.scoreRows * W4}>; // [pair column][row / 4]: M[t,j] (score)
${chunkEntry(`${tiles}u`, true, wg)}
  let h = bh % H;
  let r0 = tile * R;
  let bin = u.entryState + (bh * nck() + n) * DK * DV;
  ${
    layout.scoreColumns < layout.scoreRows
      ? `// the score rows past the blocks' (read by the last slice of loop 3 against staged zeros) hold 0
  for (var k = ${layout.scoreColumns * W4}u + lid; k < ${
        layout.scoreRows * W4
      }u; k += ${wg}u) { scT[k] = vec4<f32>(0.0); }`
      : ""
  }
  // 1. the scores (4 pair columns x 4 rows per block) and the part against S_in (4 rows x 4 entries per block)
  ${gridBlocks(pairStep)}
  ${declareAccumulators(scores)}
  ${gridBlocks(stepOut)}
  ${declareAccumulators(inter)}
  ${stagedLoop(K, loops[0], [scores, inter])}
  ${maskedScores(pairStep, W4)}
  ${eachRow((p, r) => `o${p}_${r} = select(vec4<f32>(0.0), o${p}_${r}, base_kind(min(tt, len - 1u)) == 0u);`)}
  // 2. the part against S0 (the barriers of its loop, or of loop 3's, publish scT)
  let s0Depth = select(0u, ${K}, u.hasS0 != 0u);
  ${stagedLoop("s0Depth", loops[1], [fromS0])}
  ${
    eachRow((p, r) =>
      `o${p}_${r} *= exp(cp[min(tt, len - 1u)]);${
        fwd
          ? ""
          : `\n    ${
            entries(p, r, "DK", (col, v) => `cwset(u.dqBase + (bh * u.T + a + tt) * DK + ${col}, ${v});`)
          }`
      }`
    )
  }
  // 3. the intra part
  ${stagedLoop("len", loops[2], [intra])}
  ${
    eachRow((p, r) =>
      entries(p, r, NC, (col, v) =>
        `out[${fwd ? "((b * u.T + a + tt) * H + h) * DV" : "(bh * u.T + a + tt) * DK"} + ${col}] = ${v};`)
    )
  }
}`;
}

/**
 * WGSL after loop 1 of the staged `readout` / `query_grads`: each block's scores masked by `M[t, j]` into `scT` (one
 * vec4 of 4 rows per pair column); rows past the tile or the chunk and pairs past a row's step are 0.
 */
function maskedScores(grid: TileGrid, W4: number): string {
  const g = grid.name;
  return eachTileRow(grid, (p, r) =>
    `{
    let jj = ${g}Row${p} * 4u + ${r}u;
    var v = vec4<f32>(0.0);
    ${
      [0, 1, 2, 3].map((c) =>
        `{
      let tr = ${g}Col${p} * 4u + ${c}u;
      let tt = r0 + tr;
      if (tr < R && tt < len && jj <= tt) { v.${component(c)} = m_of(tt, i32(a + jj), a) * sc${p}_${r}.${
          component(c)
        }; }
    }`
      ).join("\n    ")
    }
    if (${g}On${p}) { scT[jj * ${W4}u + ${g}Col${p}] = v; }
  }`);
}

/** Loop bounds of the direct-load readout's and dq's products with `S0`: none without one (the tile stays 0). */
const S0_DK = "select(0u, DK, u.hasS0 != 0u)";
const S0_DV = "select(0u, DV, u.hasS0 != 0u)";

/**
 * {@linkcode rowsKernel} of a rule with a window's pad (falcon3a, `rowsKernelForm` of `chunk_wgsl.ts`): one
 * workgroup of `CHUNK_WG` invocations per `(b, h, chunk, R rows)`, the tile's masked scores `sc` (`R x (C + pad)`)
 * in workgroup memory ({@linkcode scoreTile}), then the outputs. Every product is a 4 x 4 block per invocation
 * (4 rows x 4 columns, each value read serving 4 products), its row and column operands read from storage 4
 * entries at a time (`qn4`, `xp4`, `yp4`, `do4` of `chunk_wgsl.ts`: one 16-byte load each where `Dk` and `Dv` are
 * multiples of 4), the accumulators one vec4 per row.
 */
function directRowsKernel(
  pass: "readout" | "query_grads",
  s: ChunkShape,
  pad: number,
  delta: boolean,
): string {
  const fwd = pass === "readout";
  const R4 = [0, 1, 2, 3];
  // output columns: value entries (o) or key entries (dq)
  const NC = fwd ? "DV" : "DK";
  const rows = (f: (r: number) => string) => R4.map(f).join("\n    ");
  // the dO row of step t<r>, from float doutRow<r>
  const doutRows = fwd ? "" : rows((r) => `let doutRow${r} = ((b * u.T + t${r}) * H + h) * DV;`);
  // 4 state entries of row `i` from column `c`: one 16-byte load where cw and s0 are vec4 arrays, else clamped at
  // the row's end (the products they meet are 0 or unused)
  const vec4Workspace = bindsVec4Workspace(pass, s);
  const stateRow = (buf: string, at: string, i: string, c: string, n: string) =>
    vec4Workspace ? `${buf}4(${at} + ${i} + ${c})` : clampedVec4((e) => `${buf}f(${at} + ${i} + ${e})`, c, n);
  // the inter-chunk part against one base (the entering state in cw at `base`, or S0 at `s0Base`) up to bound K
  const inter = (acc: string, buf: string, at: string, K: string) =>
    fwd
      // o: sum_k q_t[k] base[k, c]: the q entries 4 at a time, each against a vec4 of a base row
      ? `for (var k = 0u; k < ${K}; k += 4u) {
      ${rows((r) => `let q${r} = qn4(bh, t${r}, k);`)}
      ${
        R4.map((kk) =>
          `{
        let sv = ${stateRow(buf, at, `min(k + ${kk}u, DK - 1u) * DV`, "cl0", "DV")};
        ${R4.map((r) => `${acc}${r} += q${r}[${kk}] * sv;`).join(" ")}
      }`
        ).join("\n      ")
      }
    }`
      // dq: sum_c base[k, c] dO_t[c]: dot products of 4 dO entries with 4 of each base row k = cl0 + c
      : `for (var k = 0u; k < ${K}; k += 4u) {
      ${rows((r) => `let d${r} = do4(doutRow${r}, k);`)}
      ${
        R4.map((c) => `let sv${c} = ${stateRow(buf, at, `min(cl0 + ${c}u, DK - 1u) * DV`, "k", "DV")};`).join(
          "\n      ",
        )
      }
      ${rows((r) => `${acc}${r} += vec4<f32>(${R4.map((c) => `dot(d${r}, sv${c})`).join(", ")});`)}
    }`;
  return `${valueWgsl4(delta, vec4Workspace)}
var<workgroup> sc: array<f32, ${s.R * (s.C + pad)}>;
${chunkEntry(`${Math.ceil(s.C / s.R)}u`)}
  let h = bh % H;
  let r0 = tile * R;
  let j0 = i32(a) - i32(PAD);
  // scores of the tile's rows, 4 rows x 4 pair columns per invocation
  ${
    scoreTile(
      s.C + pad,
      fwd ? "DK" : "DV",
      fwd ? (t) => `qn4(bh, ${t}, k)` : (t) => `do4(((b * u.T + ${t}) * H + h) * DV, k)`,
      fwd ? (j) => `xp4(bh, ${j}, k)` : (j) => `vp4(bh, ${j}, k)`,
    )
  }
  workgroupBarrier();
  let base = u.entryState + (bh * nck() + n) * DK * DV;
  let s0Base = bh * DK * DV;
  // 4 rows x 4 columns per invocation: the inter-chunk part against both bases (S_in and S0; each row
  // takes its own), then the intra-chunk part from the scores
  for (var bk = lid; bk < ((R + 3u) / 4u) * ((${NC} + 3u) / 4u); bk += WG) {
    let cl0 = (bk % ((${NC} + 3u) / 4u)) * 4u;
    let tr0 = (bk / ((${NC} + 3u) / 4u)) * 4u;
    ${rows((r) => `let t${r} = a + min(r0 + tr0 + ${r}u, len - 1u);`)}
    ${doutRows}
    ${rows((r) => `var ei${r} = vec4<f32>(0.0); var es${r} = vec4<f32>(0.0); var ea${r} = vec4<f32>(0.0);`)}
    ${inter("ei", "cw", "base", fwd ? "DK" : "DV")}
    ${inter("es", "s0", "s0Base", fwd ? S0_DK : S0_DV)}
    // intra: sum_j sc[t, j] (y_j or w_j) for o, (x_j) for dq: a vec4 of 4 columns per pair
    for (var k = 0u; k < len + PAD; k++) {
      let bv = ${fwd ? "vp4(bh, j0 + i32(k), cl0)" : "xp4(bh, j0 + i32(k), cl0)"};
      ${rows((r) => `ea${r} += sc[min(tr0 + ${r}u, R - 1u) * CP + k] * bv;`)}
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
        if (bk == 0u || (fromS0 && u.hasS0 != 0u)) { inter = select(ei${r}[${c}], es${r}[${c}], fromS0); }
        let acc = exp(cp[tt]) * inter;
        ${fwd ? "" : "cwset(u.dqBase + (bh * u.T + t) * DK + col, acc);"}
        ${
        fwd
          ? `out[((b * u.T + t) * H + h) * DV + col] = acc + ea${r}[${c}];`
          : `out[(bh * u.T + t) * DK + col] = acc + ea${r}[${c}];`
      }
      }
    }`
    )
  }
  }
}`;
}

/**
 * WGSL of the direct-load `readout` / `query_grads` scores as 4 x 4 register tiles: `sc[tr * CP + jj] = M[t, j]
 * sum_k A(t, k) B(j, k)` over `k < K` for the tile's rows `tr < R` (`t = a + r0 + tr`) and pair columns `jj < CP`
 * (`cp` of them), zero where the mask is; `a(t)` / `b(j)` give the WGSL vec4 of entries `k..k+3` of row `t` / pair
 * column `j` (WGSL names; the loop steps `k` by 4). Rows and columns past the tile's are read clamped and stored
 * nowhere.
 *
 * A window's pad leaves `cp % 4` pair columns past the whole column blocks where `C` is a multiple of 4 (falcon3a:
 * 67 = 16 x 4 + 3 at `C = 64`): as a 4 x 4 block per row block, those would take `R / 4` more blocks (68 for 64
 * invocations at `R = 16`), a second round that runs a whole `K` loop of 8 vec4 loads and 16 dot products in one
 * warp while the rest wait. So the blocks take the whole column blocks only, and the `R x (cp % 4)` scores past
 * them are one per invocation (`R * (cp % 4) <= 64` invocations: a `K` loop of 2 vec4 loads and one dot product;
 * the same sum in the same order as a block's entry).
 */
function scoreTile(
  cp: number,
  K: string,
  a: (t: string) => string,
  b: (j: string) => string,
): string {
  const R4 = [0, 1, 2, 3];
  const tail = cp % 4;
  // column blocks of the register tiles: the whole ones where the rest are single scores
  const colBlocks = tail ? "(CP / 4u)" : "((CP + 3u) / 4u)";
  const blocks = `for (var bk = lid; bk < ((R + 3u) / 4u) * ${colBlocks}; bk += WG) {
    let jj0 = (bk % ${colBlocks}) * 4u;
    let tr0 = (bk / ${colBlocks}) * 4u;
    ${R4.map((r) => `let t${r} = a + min(r0 + tr0 + ${r}u, len - 1u);`).join("\n    ")}
    ${R4.map((c) => `let jx${c} = j0 + i32(min(jj0 + ${c}u, CP - 1u));`).join("\n    ")}
    ${R4.map((r) => `var e${r} = vec4<f32>(0.0);`).join(" ")}
    for (var k = 0u; k < ${K}; k += 4u) {
      ${R4.map((r) => `let ea${r} = ${a(`t${r}`)};`).join("\n      ")}
      ${R4.map((c) => `let eb${c} = ${b(`jx${c}`)};`).join("\n      ")}
      ${
    R4.map((r) => `e${r} += vec4<f32>(${R4.map((c) => `dot(ea${r}, eb${c})`).join(", ")});`).join("\n      ")
  }
    }
    ${
    tile4Each((r, c) =>
      `{
      let tr = tr0 + ${r}u;
      let jj = jj0 + ${c}u;
      let tt = r0 + tr;
      if (tr < R && jj < CP) {
        var v = 0.0;
        if (tt < len && jj <= tt + PAD) { v = m_of(tt, jx${c}, a) * e${r}[${c}]; }
        sc[tr * CP + jj] = v;
      }
    }`
    )
  }
  }`;
  if (!tail) return blocks;
  return `${blocks}
  // the ${tail} pair columns past the whole column blocks: one score per invocation
  for (var e = lid; e < R * ${tail}u; e += WG) {
    let tr = e / ${tail}u;
    let jj = ${cp - tail}u + e % ${tail}u;
    let tt = r0 + tr;
    let te = a + min(tt, len - 1u);
    let je = j0 + i32(jj);
    var acc = 0.0;
    for (var k = 0u; k < ${K}; k += 4u) { acc += dot(${a("te")}, ${b("je")}); }
    var v = 0.0;
    if (tt < len && jj <= tt + PAD) { v = m_of(tt, je, a) * acc; }
    sc[tr * CP + jj] = v;
  }`;
}

/**
 * Whether the pair-column kernels (`pair_column_grads`, `readout_dw` and their tails) stage the workspace rows, dO
 * and G 4 entries per load (`StagedOperand.quad`): only with a window's pad (`pad > 0`, falcon3a), whose pair-column
 * work they came with. Measured on the H200 (8 x 4096 x 8 x 64, ms per kernel of one forward + backward), they cost
 * the pad-free rules' `pair_column_grads` 1.40 -> 1.61 and the delta rules' `readout_dw` 0.75 -> 0.83 (the window's
 * `dWriteGainTerms` recurrence alone was neutral there), so those stage one entry per load.
 */
function stagesQuads(pad: number): boolean {
  return pad > 0;
}

/**
 * `pair_column_grads`: for pair columns `j` of the chunk (`j = a-PAD .. e`), with `G` the exit-state gradient:
 * `dx_j = sum_t M[t,j] (y_j.dO_t) q_t + M[e,j] G y_j`, `dy_j = sum_t M[t,j] (q_t.x_j) dO_t + M[e,j] G^T x_j`,
 * and `dWriteGainTerms[j, o] = sum_{t >= s} [seg] exp(P_t - P_s) (q_t.x_j)(y_j.dO_t) + [seg] exp(P_e - P_s) x_j^T G y_j`
 * for `s = j + o` (the terms of `d g_s`); `readout_dw` (`deltaNoExit`) only `dy_j` without the exit term.
 *
 * One workgroup of `STAGED_WG` invocations per `(b, h, chunk, RC pair columns)`. Where `RC` does not divide the
 * `C + pad` columns (`ChunkShape.RT`, e.g. falcon3a's 67 at `C = 64`), the main pipeline takes the whole tiles and
 * a tail pipeline (`pair_column_grads_tail`, `readout_dw_tail`) the rest: compiled with `RC = RT` and its first
 * column a constant, one workgroup per chunk of the fewest invocations that hold a block each
 * (`pairColumnTiling`, `pairColumnInvocations` of `chunk_wgsl.ts`). A pair meets no step before its own, so a
 * tile from column `first` takes the steps from `first - pad` on (rounded down to a whole slice) in loops 1 and 3
 * and writes 0 for the earlier steps' `decayWeightsReadout`: the tail's columns are the chunk's last pairs (at
 * falcon3a's `C = 64`, its last 8 steps of 64). Every output is per pair column (`dx_j`, `dy_j`,
 * `dWriteGainTerms`, `decayWeightsReadout`, `decayWeightsExit` at the column's place), none a per-tile part that a
 * later pass sums, so the two pipelines' tiles need not agree. Every product is a register
 * tile fed from workgroup memory (`chunk_staged_tiles.ts`), its operands staged slice by slice with coalesced loads
 * (with a window's pad q, x, y, dO and G 4 entries per load, 16 bytes where `Dk` and `Dv` are multiples of 4,
 * {@linkcode stagesQuads}; one entry per load otherwise; the pair gradients are stored a block row at a time where
 * `Dk` and `Dv` are multiples of 4):
 * 1. `q_t.x_j` and `dO_t.y_j` (steps x pair columns, over the key and value entries): the readout weights
 *    `wq = M (y.dO)`, `wd = M (q.x)` into workgroup memory, `(q.x)(y.dO)` into `decayWeightsReadout`;
 * 2. `G y_j` and `G^T x_j` (pair columns x entries) into the registers of `dx_j`, `dy_j` (and `x_j^T G y_j`,
 *    `decayWeightsExit`, from the first), then scaled by `M[e, j]`;
 * 3. `dx_j += sum_t wq[t, j] q_t`, `dy_j += sum_t wd[t, j] dO_t` (over the chunk's steps), stored;
 * then the additive rules' `dWriteGainTerms` from `decayWeightsReadout` read back: per pair column one sum over the
 * chunk's steps split over invocations, the window's other terms from it by a recurrence ({@linkcode writeGainTerms}).
 * Skipping the products that causality makes 0 (loop 1 over the blocks on and below the diagonal, loop 3 from each
 * block row's first step) was measured slower on the H200 (2026-12-02 18:55 UTC, `pair_column_grads` of falcon1
 * 0.90 -> 1.01 ms with prefetched slices; at 18:38, without them, 1.46 -> 1.61): branch pcg-speed keeps it.
 */
function colsKernel(
  pass: PairColumnPass,
  shape: ChunkShape,
  pad: number,
  variant: PairColumnVariant,
): string {
  const delta = variant !== "additive";
  const exit = variant !== "deltaNoExit";
  const tiling = pairColumnTiling(pass, shape, pad);
  if (tiling.tiles === 0) {
    throw new RangeError(`${pass}: no pair columns to tile at RC = ${shape.RC}, RT = 0`);
  }
  // the tile's columns (a tail's RT), the invocations (fewer in a tail: a block each)
  const s = { ...shape, RC: tiling.RC };
  const wg = pairColumnInvocations(s, s.RC, isPairColumnTail(pass));
  const layout = pairColumnLayout(s, variant, wg);
  const [C4, RC4, DK4, DV4] = [s.C, s.RC, s.dk, s.dv].map(roundUp4);
  // the steps that can meet the tile's pair columns: t >= j, so from chunk step first - pad on (a tail's columns
  // are the chunk's last pairs: its last steps), rounded down to a whole slice (0 for the main pipelines)
  const t0 = Math.max(0, Math.floor((tiling.first - pad) / STAGE_DEPTH) * STAGE_DEPTH);
  const stepPair: TileGrid = { name: "stepPair", rows: C4 - t0, cols: RC4, invocations: wg };
  const pairKey: TileGrid = { name: "pairKey", rows: RC4, cols: DK4, invocations: wg };
  const pairValue: TileGrid = { name: "pairValue", rows: RC4, cols: DV4, invocations: wg };
  // operands, entry (k, i): the depth index k and the width index i; transposed ones (the products' A and B
  // of loops 1 and 2) hold 4 consecutive steps or pair columns in one vec4. The workspace rows, dO and G are
  // staged 4 entries per load with a window's pad (stagesQuads: `four`, 16 bytes where Dk and Dv are multiples
  // of 4), else one (`one`)
  const quads = stagesQuads(pad);
  const load = (four: string, one: string) => quads ? { value: four, quad: true } : { value: one };
  const pairColumns = (K: string, value: Pick<StagedOperand, "value" | "quad">): StagedOperand => ({
    width: RC4,
    along: "depth",
    ...value,
    valid: `i < RC && c0 + i < ncol && k < ${K}`,
  });
  const pair = "j0 + i32(c0 + i)";
  const keysT = pairColumns("DK", load(`xp4(bh, ${pair}, k)`, `xp(bh, ${pair}, k)`));
  // the delta rules' pseudo-values (in cw, bound as floats here) one entry at a time
  const valuesT = pairColumns(
    "DV",
    delta ? { value: `vp(bh, ${pair}, k)` } : load(`yp4(bh, ${pair}, k)`, `yp(bh, ${pair}, k)`),
  );
  // the steps from t0: chunk step tt = t0 + i
  const step = t0 ? `${t0}u + i` : "i";
  const doutRow = (t: string) => `((b * u.T + a + ${t}) * H + h) * DV`;
  const queriesT: StagedOperand = {
    width: C4 - t0,
    along: "depth",
    ...load(`qn4(bh, a + ${step}, k)`, `qn(bh, a + ${step}, k)`),
    valid: `${step} < len && k < DK`,
  };
  const doutT: StagedOperand = {
    width: C4 - t0,
    along: "depth",
    ...load(`do4(${doutRow(step)}, k)`, `doutf(${doutRow(step)} + k)`),
    valid: `${step} < len && k < DV`,
  };
  // G [Dk, Dv] as (k, i) = G[i, k] (for G y) and as its rows (for G^T x): entries m..m+3 of row r in one load
  // where cw is bound as vec4 (bindsVec4Workspace), else from 4 floats, 0 past the row's end
  const exitRow4 = (r: string, m: string) =>
    bindsVec4Workspace(pass, s)
      ? `cw4(gb + ${r} * DV + ${m})`
      : maskedVec4((e) => `cwf(gb + ${r} * DV + ${e})`, m, "DV");
  const exitT: StagedOperand = {
    width: DK4,
    along: "depth",
    ...load(exitRow4("i", "k"), "cwf(gb + i * DV + k)"),
    valid: "i < DK && k < DV",
  };
  const exitRows: StagedOperand = {
    width: DV4,
    along: "width",
    ...load(exitRow4("k", "i"), "cwf(gb + k * DV + i)"),
    valid: "k < DK && i < DV",
  };
  const queries: StagedOperand = {
    width: DK4,
    along: "width",
    ...load("qn4(bh, a + k, i)", "qn(bh, a + k, i)"),
    valid: "k < len && i < DK",
  };
  const douts: StagedOperand = {
    width: DV4,
    along: "width",
    ...load(`do4(${doutRow("k")}, i)`, `doutf(${doutRow("k")} + i)`),
    valid: "k < len && i < DV",
  };
  const qx: TileProduct = { acc: "qx", grid: stepPair, a: 0, b: 1 };
  const yd: TileProduct = { acc: "yd", grid: stepPair, a: 2, b: 3 };
  const dx = (a: TileProduct["a"], b: number): TileProduct => ({ acc: "dx", grid: pairKey, a, b });
  const dy = (a: TileProduct["a"], b: number): TileProduct => ({ acc: "dy", grid: pairValue, a, b });
  const weights = (array: string) => ({ array, width4: RC4 / 4 });
  // the staged operands of loops 1, 2 (exit variants) and 3
  const productOperands = [queriesT, keysT, doutT, valuesT];
  const exitOperands = [valuesT, exitT, keysT, exitRows];
  const sumOperands = exit ? [queries, douts] : [douts];
  for (const operands of [productOperands, ...(exit ? [exitOperands] : []), sumOperands]) {
    if (stagedFloats(operands) > layout.stage) {
      throw new RangeError(
        `pair_column_grads: ${stagedFloats(operands)} staged floats, above its layout's ${layout.stage}`,
      );
    }
  }
  // the pair gradients' stores: a block row's 4 entries at once where cw and out are vec4 arrays (the delta rules'
  // readout_dw binds no out, its cw as vec4 all the same)
  const quadStores = bindsVec4Workspace(pass, s);
  const cwStore = (at: string) => quadStores ? `cw[(${at}) >> 2u] = v;` : `cwset(${at}, v);`;
  const outStore = (at: string) => bindsVec4Output(pass, s) ? `out[(${at}) >> 2u] = v;` : `out[${at}] = v;`;
  const weightFloats4 = (layout.weightRows * RC4) / 4;
  const wide = Math.max(s.dk, s.dv);
  return `${valueWgsl(delta)}
${delta ? "" : windowWeights4(pad)}
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices, then partial sums
${
    exit
      ? `var<workgroup> wq: array<vec4<f32>, ${weightFloats4}>; // [step][pair column / 4]: M[t,j] (y_j.dO_t)`
      : ""
  }
var<workgroup> wd: array<vec4<f32>, ${weightFloats4}>; // [step][pair column / 4]: M[t,j] (q_t.x_j)
${
    exit
      ? `var<workgroup> exitWeight: array<f32, RC>; // M[e,j]
var<workgroup> exitProduct: array<f32, RC>; // x_j^T G y_j`
      : ""
  }
${chunkEntry(`${tiling.tiles}u`, true, wg)}
  let h = bh % H;
  let c0 = ${tiling.first ? `${tiling.first}u + ` : ""}tile * RC;
  let j0 = i32(a) - i32(PAD);
  let ncol = len + PAD;
  let chunkId = bh * nck() + n;
  ${
    exit
      ? `let gb = u.dExitState + chunkId * DK * DV;
  for (var jr = lid; jr < RC; jr += ${wg}u) {
    var m = 0.0;
    if (c0 + jr < ncol) { m = m_of(len - 1u, j0 + i32(c0 + jr), a); }
    exitWeight[jr] = m;
  }`
      : ""
  }
  ${
    layout.weightRows > C4
      ? `// the weight rows past the products' (read by the last slice of loop 3 against staged zeros) hold 0
  for (var k = ${(C4 * RC4) / 4}u + lid; k < ${weightFloats4}u; k += ${wg}u) {
    ${exit ? "wq[k] = vec4<f32>(0.0);" : ""}
    wd[k] = vec4<f32>(0.0);
  }`
      : ""
  }
  ${
    exit && t0
      ? `// the steps before t0 meet none of the tile's pair columns: their decayWeightsReadout entries hold 0
  for (var k = lid; k < ${t0}u * RC; k += ${wg}u) {
    let tt = k / RC;
    let jj = c0 + k % RC;
    if (tt < len && jj < ncol) { cwset(u.decayWeightsReadout + (chunkId * C + tt) * CP + jj, 0.0); }
  }`
      : ""
  }
  // 1. q_t.x_j and dO_t.y_j: 4 steps x 4 pair columns per block
  ${gridBlocks(stepPair)}
  ${declareAccumulators(qx)}
  ${declareAccumulators(yd)}
  ${stagedLoop(`${wide}u`, productOperands, [qx, yd])}
  ${readoutWeights(stepPair, exit, RC4 / 4, !delta, t0)}
  ${gridBlocks(pairValue)}
  ${declareAccumulators(dy(0, 0))}
  ${exit ? `${gridBlocks(pairKey)}\n  ${declareAccumulators(dx(0, 0))}` : ""}
  ${
    exit
      ? `// 2. G y_j and G^T x_j: 4 pair columns x 4 entries per block
  ${stagedLoop(`${wide}u`, exitOperands, [dx(0, 1), dy(2, 3)])}
  ${exitProducts(pairKey, DK4 / 4, wg)}
  ${eachTileRow(pairKey, (p, r) => `dx${p}_${r} *= exitWeight[min(pairKeyRow${p} * 4u + ${r}u, RC - 1u)];`)}
  ${
        eachTileRow(pairValue, (p, r) =>
          `dy${p}_${r} *= exitWeight[min(pairValueRow${p} * 4u + ${r}u, RC - 1u)];`)
      }`
      : ""
  }
  // 3. the sums over the chunk's steps
  ${
    exit
      ? stagedLoop("len", sumOperands, [dx(weights("wq"), 0), dy(weights("wd"), 1)], `${t0}u`)
      : stagedLoop("len", sumOperands, [dy(weights("wd"), 0)], `${t0}u`)
  }
  ${
    exit
      ? pairColumnStores(pairKey, "dx", "DK", quadStores, (o) =>
        `if (jj >= PAD) {
          ${outStore(`u.gDX + (bh * (PAD + u.T + 1u) + u32(j + i32(PAD))) * DK + ${o}`)}
        } else {
          ${cwStore(`u.dxPrecedingPairs + (chunkId * PAD + jj) * DK + ${o}`)}
        }`)
      : ""
  }
  ${
    pairColumnStores(pairValue, "dy", "DV", quadStores, (o) =>
      delta
        ? cwStore(`u.${exit ? "dPseudoValues" : "dPseudoValuesReadout"} + (bh * u.T + u32(j)) * DV + ${o}`)
        : `if (jj >= PAD) {
          ${outStore(`u.gDY + (bh * (PAD + u.T) + u32(j + i32(PAD))) * DV + ${o}`)}
        } else {
          ${cwStore(`u.dyPrecedingPairs + (chunkId * PAD + jj) * DV + ${o}`)}
        }`)
  }
  ${delta ? "" : writeGainTerms(RC4 / 4, layout.gainParts, wg)}
}`;
}

/**
 * WGSL `m_of4(tt, j, a)`: `M[t, j + c]` for `c = 0..3` (chunk step `tt`, pairs `j..j+3`), the sums `m_of` gives in
 * the same order, from the masked terms `exp(P_t - P_s) g_s` of the steps `s = j .. j+3+PAD` computed once each
 * (`4 + PAD` exps where 4 calls of `m_of` take `4 W`); a step past `t`, before the chunk or in another segment
 * adds nothing, and one whose window starts past a pair (`lo_s > j + c`) nothing to that pair.
 */
function windowWeights4(pad: number): string {
  const steps = Array.from({ length: pad + 4 }, (_, q) => q);
  const terms = steps.map((q) =>
    `var w${q} = 0.0;
  var lo${q} = j + 4;
  {
    let s = j + ${q};
    if (s >= i32(a) && s <= i32(a + tt)) {
      let ss = u32(s) - a;
      if (cseg[ss] == cseg[tt]) {
        w${q} = exp(cp[tt] - cp[ss]) * cg[ss];
        lo${q} = clo[ss];
      }
    }
  }`
  );
  const sums = [0, 1, 2, 3].map((c) =>
    Array.from(
      { length: pad + 1 },
      (_, o) => `if (lo${c + o} <= j + ${c}) { m.${component(c)} += w${c + o}; }`,
    )
      .join(" ")
  );
  return `fn m_of4(tt: u32, j: i32, a: u32) -> vec4<f32> {
  ${terms.join("\n  ")}
  var m = vec4<f32>(0.0);
  ${sums.join("\n  ")}
  return m;
}`;
}

/**
 * WGSL after loop 1 of `pair_column_grads`: each block's masked readout weights into `wq` / `wd` (one vec4 per
 * step row) and, with the exit term, `(q_t.x_j)(y_j.dO_t)` into `decayWeightsReadout`. Steps past the chunk and
 * pair columns past the tile or the chunk are 0 in the weights and not stored. The additive rules (`window`) take
 * `M` for a block row's 4 pair columns at once ({@linkcode windowWeights4}), the delta rules one `m_of` each.
 */
function readoutWeights(grid: TileGrid, exit: boolean, rowVec4: number, window: boolean, t0: number): string {
  const g = grid.name;
  return eachTileRow(grid, (p, r) => {
    const columns = [0, 1, 2, 3].map((c) => {
      const x = component(c);
      return `{
      let jr = ${g}Col${p} * 4u + ${c}u;
      let jj = c0 + jr;
      if (jr < RC && jj < ncol && tt < len) {
        var vm = 0.0;
        if (jj <= tt + PAD) {
          let m = ${window ? `mw.${x}` : "m_of(tt, j0 + i32(jj), a)"};
          ${exit ? `vq.${x} = m * yd${p}_${r}.${x};` : ""}
          vd.${x} = m * qx${p}_${r}.${x};
          vm = qx${p}_${r}.${x} * yd${p}_${r}.${x};
        }
        ${exit ? `if (${g}On${p}) { cwset(u.decayWeightsReadout + (chunkId * C + tt) * CP + jj, vm); }` : ""}
      }
    }`;
    });
    return `{
    let tt = ${t0 ? `${t0}u + ` : ""}${g}Row${p} * 4u + ${r}u;
    var vq = vec4<f32>(0.0);
    var vd = vec4<f32>(0.0);
    ${window ? `let mw = m_of4(min(tt, len - 1u), j0 + i32(c0 + ${g}Col${p} * 4u), a);` : ""}
    ${columns.join("\n    ")}
    if (${g}On${p}) {
      ${exit ? `wq[tt * ${rowVec4}u + ${g}Col${p}] = vq;` : ""}
      wd[tt * ${rowVec4}u + ${g}Col${p}] = vd;
    }
  }`;
  });
}

/**
 * WGSL after loop 2 of `pair_column_grads`: `x_j^T G y_j` from the `dx` blocks (which hold `G y_j`), each
 * block's part over its 4 entries into `stage` (`parts` per pair column), then one sum per pair column
 * into `exitProduct` and `decayWeightsExit`.
 */
function exitProducts(grid: TileGrid, parts: number, wg: number): string {
  const g = grid.name;
  const rows = eachTileRow(grid, (p, r) =>
    `{
    let jr = ${g}Row${p} * 4u + ${r}u;
    let jj = c0 + jr;
    if (${g}On${p} && jr < RC) {
      var part = 0.0;
      // x_j entries o..o+3 in one load (0 past the row's end, as G y_j is)
      if (jj < ncol) { part = dot(xp4(bh, j0 + i32(jj), ${g}Col${p} * 4u), dx${p}_${r}); }
      let e = jr * ${parts}u + ${g}Col${p};
      stage[e / 4u][e % 4u] = part;
    }
  }`);
  return `// x_j^T G y_j: the parts of the blocks of G y_j, then a sum per pair column
  ${rows}
  workgroupBarrier();
  for (var jr = lid; jr < RC; jr += ${wg}u) {
    var ex = 0.0;
    for (var o = 0u; o < ${parts}u; o++) { let e = jr * ${parts}u + o; ex += stage[e / 4u][e % 4u]; }
    exitProduct[jr] = ex;
    if (c0 + jr < ncol) { cwset(u.decayWeightsExit + chunkId * CP + c0 + jr, ex); }
  }
  workgroupBarrier();`;
}

/**
 * WGSL of the stores of a pair-column gradient (`dx` over `DK` entries or `dy` over `DV`) for the blocks' entries
 * inside the tile and the chunk, pair `j` (tile column `jr`, chunk column `jj`): with `quad` (`Dk` and `Dv`
 * multiples of 4, `cw` and `out` bound as vec4 arrays) `store(o)` writes the vec4 `v` of entries `o..o+3` (a block
 * row), else each entry `o` (inside the row) as the float `v`.
 */
function pairColumnStores(
  grid: TileGrid,
  acc: string,
  N: string,
  quad: boolean,
  store: (o: string) => string,
): string {
  const g = grid.name;
  const entries = (p: number, r: number) =>
    quad
      ? `{
        let o = ${g}Col${p} * 4u;
        let v = ${acc}${p}_${r};
        ${store("o")}
      }`
      : [0, 1, 2, 3].map((c) =>
        `{
        let o = ${g}Col${p} * 4u + ${c}u;
        let v = ${acc}${p}_${r}.${component(c)};
        if (o < ${N}) {
          ${store("o")}
        }
      }`
      ).join("\n      ");
  return eachTileRow(grid, (p, r) =>
    `{
    let jr = ${g}Row${p} * 4u + ${r}u;
    let jj = c0 + jr;
    if (${g}On${p} && jr < RC && jj < ncol) {
      let j = j0 + i32(jj);
      ${entries(p, r)}
    }
  }`);
}

/**
 * WGSL of the additive rules' `dWriteGainTerms[j, o]` (`s = j + o`): `decayWeightsReadout` of the tile read back into
 * `wq` (its weights are spent), then per pair column `j` its sum `Z(s) = sum_{t >= s} [seg] exp(P_t - P_s) V[t, j]
 * + [seg] exp(P_e - P_s) x_j^T G y_j` (`V` the readout weights) for the last step `s` of its window in the chunk,
 * split over `parts` invocations (partial sums in `stage`) and added up with the exit term, and from it the earlier
 * steps of the window by `Z(s) = V[s, j] + [seg(s+1) = seg(s)] exp(P_{s+1} - P_s) Z(s+1)` (the window's `W - 1`
 * other terms without a sum over the chunk each; a rule without a window has none).
 */
function writeGainTerms(rowVec4: number, parts: number, wg: number): string {
  const weight = (tt: string) => `wq[${tt} * ${rowVec4}u + jr / 4u][jr % 4u]`;
  return `// the terms of d g_s: (q_t.x_j)(y_j.dO_t) read back from decayWeightsReadout
  storageBarrier();
  for (var k = lid; k < C * RC; k += ${wg}u) {
    let tt = k / RC;
    let jr = k % RC;
    var v = 0.0;
    if (tt < len && c0 + jr < ncol) { v = cwf(u.decayWeightsReadout + (chunkId * C + tt) * CP + c0 + jr); }
    wq[tt * ${rowVec4}u + jr / 4u][jr % 4u] = v;
  }
  workgroupBarrier();
  // the last step of column jj's window in the chunk: s - a = jj (past the chunk's end: its last step)
  for (var it = lid; it < RC * ${parts}u; it += ${wg}u) {
    let jr = it / ${parts}u;
    let part = it % ${parts}u;
    let jj = c0 + jr;
    var v = 0.0;
    if (jj < ncol) {
      let ss = min(jj, len - 1u);
      for (var tt = ss + part; tt < len; tt += ${parts}u) {
        if (cseg[tt] == cseg[ss]) { v += exp(cp[tt] - cp[ss]) * ${weight("tt")}; }
      }
    }
    stage[it / 4u][it % 4u] = v;
  }
  workgroupBarrier();
  for (var jr = lid; jr < RC; jr += ${wg}u) {
    let jj = c0 + jr;
    if (jj >= ncol) { continue; }
    let top = min(jj, len - 1u);
    var z = 0.0;
    for (var p = 0u; p < ${parts}u; p++) { let e = jr * ${parts}u + p; z += stage[e / 4u][e % 4u]; }
    if (cseg[len - 1u] == cseg[top]) { z += exp(cp[len - 1u] - cp[top]) * exitProduct[jr]; }
    let row = u.dWriteGainTerms + (chunkId * CP + jj) * NW;
    // step s - a = ss is slot o = ss + PAD - jj of the column's window
    cwset(row + top + PAD - jj, z);
    for (var ss = i32(top) - 1; ss >= max(i32(jj) - i32(PAD), 0); ss--) {
      let s = u32(ss);
      var next = 0.0;
      if (cseg[s + 1u] == cseg[s]) { next = exp(cp[s + 1u] - cp[s]) * z; }
      z = ${weight("s")} + next;
      cwset(row + s + PAD - jj, z);
    }
  }`;
}

/** WGSL `vp(bh, j, c)`: the values the readout mixes: targets `y_j` (additive) or pseudo-values `w_j` (delta). */
function valueWgsl(delta: boolean): string {
  return delta
    ? "fn vp(bh: u32, j: i32, c: u32) -> f32 { return cwf(u.pseudoValues + (bh * u.T + u32(j)) * DV + c); }"
    : "fn vp(bh: u32, j: i32, c: u32) -> f32 { return yp(bh, j, c); }";
}

/**
 * {@linkcode valueWgsl} and `vp4(bh, j, c)`: entries `c..c+3` (the pseudo-values as one 16-byte load in the
 * kernels that bind `cw` as vec4, else clamped at the row's end).
 */
function valueWgsl4(delta: boolean, vec4Workspace: boolean): string {
  const at = "u.pseudoValues + (bh * u.T + u32(j)) * DV";
  const scalar = clampedVec4((e) => `cw[${at} + ${e}]`, "c", "DV");
  return valueWgsl(delta) + "\n" + (delta
    ? `fn vp4(bh: u32, j: i32, c: u32) -> vec4<f32> {
  return ${vec4Workspace ? `cw4(${at} + c)` : scalar};
}`
    : "fn vp4(bh: u32, j: i32, c: u32) -> vec4<f32> { return yp4(bh, j, c); }");
}
