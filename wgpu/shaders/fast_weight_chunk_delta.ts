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
 * Kernels (`fastweight_chunk_<pass>_f32`): `solve` (per `(b, h, chunk)`, 256 invocations: `A` from the chunk's keys
 * and `T = (I + A)^-1` from 16 x 16 diagonal block inverses, as fla's `solve_tril`, both in workgroup memory, `T`
 * stored; then `[U0 | V] = T R`, and the exit-weighted keys `Xe = diag(Gam[e,:]) X` with `exp(P_e)` and the exit's
 * base kind), then `delta_value_scan` (`chunk_delta_scans.ts`: per `(b, h)` and 16 value columns, sequential over
 * chunks, as fla's state scan: `S_in` of every chunk and `W = U0 - V S_in`, then `S_exit = [no start] exp(P_e) S_in
 * + [start] exp(P_e) S0 + Xe^T W`; the transition `K` is never formed). The readout runs the shared `readout`
 * kernel with values `w`. `solve_transposed` is a staged product ({@linkcode stagedProduct}): operand slices
 * loaded coalesced into workgroup memory, 4 x 4 register tiles read from it as vec4.
 * Backward: `base_readout_grads`, `readout_dw` (the readout's `dW` without the exit term, `Qd`) and `scan_link`
 * (`L_n = U_n - V^T Qd`) give the reverse scan `delta_value_reverse_scan` (`G_{n-1} = K_n^T G_n + L_n` with `K_n^T G_n =
 * [no start] exp(P_e) G_n - V^T (Xe G_n)`); then `pair_column_grads`
 * (`dx` of the readout and exit, `dW`), `solve_transposed` (per `(b, h, chunk)` and 32 x 32 block:
 * `dR = (I + A)^-T dW = T^T dW`), `query_grads`, `solve_input_grads` (per `(b, h, chunk, RP rows)`: everything `A` and `R` feed: `dx`, `dy = b dR`,
 * `da`, `db`, the log-decay terms), `delta_decay_grads`/`delta_coef_grads` (`d log gamma`, then `coef_back`), `s0_grad_parts`/
 * `s0_grad_sum` (`dS0`; a backward without `dS0` skips them and runs `base_readout_grads_no_s0`) and `pair_row_grads`
 * (the statistic's `dx`).
 * Log-decay gradient (`delta_decay_grads`, `decayGradKernel` of `chunk_wgsl.ts`): per step `r`, the sum over the
 * decay factors whose chain holds `r`, readout and exit as for the additive rules (values `w`), plus
 * the solve's `Gp[t,s]` (`decayWeightsSolve[t,s] = dA[t,s] A[t,s]`) and `exp(Pp_t)` (`decayWeightsSolveBase_t`) factors.
 * Workspace sections `[BH, ...]` (offsets in the uniform block): `eraseGain [T]`, `solveInverse [NCK, C, C]` (`T`),
 * `pseudoValuesConstant [NCK, C, Dv]`, `pseudoValuesStateFactor, exitKeys [NCK, C, Dk]`, `chunkDecay, exitBaseKind [NCK]`, `pseudoValues, dPseudoValuesReadout, dPseudoValues, dRightHandSide [T, Dv]`,
 * `reverseScanLink, dS0Parts [NCK, Dk, Dv]`, `dEraseGain, dDeltaWriteGain, decayWeightsSolveBase [T]`, `decayWeightsSolve [NCK, C, C]`, with `entryState`, `finalState`, `dExitState`, `dBaseReadout`, `dLogDecay`,
 * `dStatistic`, `decayWeightsReadout`, `decayWeightsExit`, `dqBase` shared.
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import type { HeadConstants } from "./fast_weight_coef.ts";
import {
  bindsVec4,
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  coefBackKernel,
  decayGradKernel,
  flatEntry,
  maskedVec4,
  prelude,
  SOLVE_BLOCK,
  solveInputGradsLayout,
  solveLayout,
  STAGED_BLOCK,
  stagedBlocks,
  stateTileBlock,
  stateTiles,
  tile4,
  tile4Each,
} from "./chunk_wgsl.ts";
import {
  deltaReverseScanKernel,
  deltaStateScanKernel,
  deltaValueReverseScanKernel,
  deltaValueScanKernel,
} from "./chunk_delta_scans.ts";
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
  tilesPerInvocation,
} from "./chunk_staged_tiles.ts";

/** Passes of the delta family (falcon3 runs the transition scans, `delta_state_scan` and `delta_reverse_scan`). */
export const DELTA_ONLY_PASSES = [
  "solve",
  "delta_value_scan",
  "delta_state_scan",
  "scan_link",
  "delta_value_reverse_scan",
  "delta_reverse_scan",
  "solve_transposed",
  "solve_input_grads",
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
fn solve_inverse_at(bh: u32, n: u32, t: u32, s: u32) -> u32 { return u.solveInverse + ((bh * nck() + n) * C + t) * C + s; }
fn pseudo_values_constant_at(bh: u32, n: u32, t: u32, c: u32) -> u32 { return u.pseudoValuesConstant + ((bh * nck() + n) * C + t) * DV + c; }
fn pseudo_values_state_factor_at(bh: u32, n: u32, t: u32, i: u32) -> u32 { return u.pseudoValuesStateFactor + ((bh * nck() + n) * C + t) * DK + i; }
fn exit_keys_at(bh: u32, n: u32, t: u32, i: u32) -> u32 { return u.exitKeys + ((bh * nck() + n) * C + t) * DK + i; }
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
    case "solve":
      return head + chunkSteps(true) + solveKernel(s);
    case "delta_state_scan":
      return head + deltaStateScanKernel(s);
    case "delta_reverse_scan":
      return head + deltaReverseScanKernel(s);
    case "delta_value_scan":
      return head + deltaValueScanKernel(s);
    case "delta_value_reverse_scan":
      return head + deltaValueReverseScanKernel(s);
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
    case "solve_transposed":
      return head + stagedProductArrays("st") + `
${chunkEntry(`${stagedBlocks(s.C, s.dv)}u`, false)}
  // one 32 x 32 block of dR [C, Dv] = T^T dW per workgroup (T[s, t] = 0 for s < t: from the block's first row)
  let nbc = ${Math.ceil(s.dv / STAGED_BLOCK)}u;
  let row0 = (tile / nbc) * ${STAGED_BLOCK}u;
  ${
        stagedProduct({
          name: "st",
          row0: "row0",
          col0: `(tile % nbc) * ${STAGED_BLOCK}u`,
          rows: "len",
          cols: "DV",
          depth: "len",
          depthFrom: "row0",
          a: "cw[solve_inverse_at(bh, n, k, i)]",
          aAlong: "row",
          b: "cw[u.dPseudoValues + row(bh, a + k, j)]",
          bAlong: "col",
          store: "if (i < len && j < DV) { cw[u.dRightHandSide + row(bh, a + i, j)] = v; }",
        })
      }
}`;
    case "solve_input_grads":
      return head + chunkSteps(true) + pairsKernel(s);
    case "delta_decay_grads":
      return head + chunkSteps(true) + decayGradKernel(true, s.C);
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

/**
 * `solve`: per `(b, h, chunk)`, one workgroup of `STAGED_WG` invocations (workgroup arrays: `solveLayout`):
 * 1. `A[t,s] = a_t Gp[t,s] x_t.x_s` (`s < t`) into `triangle`: the Gram of the chunk's keys as register tiles over
 *    the 4 x 4 blocks on and below the diagonal (the keys staged slice by slice), masked and scaled at the store;
 * 2. `T = (I + A)^-1` over `A` in `triangle`, as fla's `solve_tril`: the `SOLVE_BLOCK`-step diagonal blocks
 *    `T_ii = (I + A_ii)^-1` by forward substitution (one invocation per column, `A_ii` staged), then block row by
 *    block row `i = 1, 2, ..`, `T_ij = -T_ii M_ij` with `M_ij = sum_{j <= q < i} A_iq T_qj` (`M_ij` staged; `T`'s
 *    block row `i` then overwrites `A`'s, which no later row reads); the chunk padded to whole blocks (`A` is 0
 *    there, `T` the identity). Stored as `solveInverse`. Written out: {@linkcode inverseUnrolled};
 * 3. with `S0`, the rows after a start: `a_t exp(Pp_t) S0^T x_t` (a product over the keys), held in
 *    `pseudoValuesConstant` until 4. reads it;
 * 4. `[U0 | V] = T R` (`R` as in the module doc: `U0`'s columns `b_t y_t` less 3.'s term, `V`'s `a_t exp(Pp_t) x_t`
 *    on the rows before any start), `T` read from workgroup memory, `R` staged slice by slice.
 */
function solveKernel(s: ChunkShape): string {
  const layout = solveLayout(s);
  const [C4, DK4, DV4] = [s.C, s.dk, s.dv].map(roundUp4);
  const keysByStep: StagedOperand = {
    width: C4,
    along: "depth",
    value: "xp4(bh, i32(a + i), k)",
    valid: "i < len && k < DK",
    quad: true,
  };
  const initialState: StagedOperand = {
    width: DV4,
    along: "width",
    value: "s0[(bh * DK + k) * DV + i]",
    valid: "i < DV && k < DK",
  };
  const rightHandSides: StagedOperand = {
    width: DV4 + DK4,
    along: "width",
    value: "right_hand_sides4(bh, n, a, k, i)",
    valid: "k < len",
    quad: true,
  };
  // A's 4 x 4 blocks on and below the diagonal (those above it are 0)
  const matrixGrid: TileGrid = { name: "gram", rows: C4, cols: C4, lower: true };
  const keyGram: TileProduct = { acc: "xx", grid: matrixGrid, a: 0, b: 0 };
  const startGrid: TileGrid = { name: "start", rows: C4, cols: DV4 };
  const solveGrid: TileGrid = { name: "sol", rows: C4, cols: DV4 + DK4 };
  const startTerm: TileProduct = { acc: "sx", grid: startGrid, a: 0, b: 1 };
  const solved: TileProduct = {
    acc: "w",
    grid: solveGrid,
    a: { function: "inverse_column4" },
    b: 0,
    lowerA: true,
  };
  for (const operands of [[keysByStep], [keysByStep, initialState], [rightHandSides]]) {
    if (stagedFloats(operands) > layout.stage) {
      throw new RangeError(
        `solve: ${stagedFloats(operands)} staged floats, above its layout's ${layout.stage}`,
      );
    }
  }
  // store(v) for every entry (t, col) of the invocation's blocks of a product, v its value
  const eachEntry = (product: TileProduct, store: (v: string) => string) => {
    const g = product.grid.name;
    return eachTileRow(product.grid, (p, r) =>
      `if (${g}On${p}) {
    let t = ${g}Row${p} * 4u + ${r}u;
    ${
        [0, 1, 2, 3].map((c) =>
          `{
      let col = ${g}Col${p} * 4u + ${c}u;
      ${store(`${product.acc}${p}_${r}.${component(c)}`)}
    }`
        ).join("\n    ")
      }
  }`);
  };
  // v.<r> = A[t0 + r, s] from the Gram x_t.x_s: 0 unless s < t < len in one segment (masked before exp)
  const maskedEntry = (p: number, r: number, c: number) =>
    `{
        let t = t0 + ${r}u;
        if (t < len && s < t && cseg[s] == cseg[t]) { v.${
      component(r)
    } = cga[t] * exp(cpp[t] - cp[s]) * xx${p}_${r}.${component(c)}; }
      }`;
  // per block p and column s, the vec4 of its 4 rows (one entry of triangle)
  const matrixStores = Array.from({ length: tilesPerInvocation(matrixGrid) }, (_, p) =>
    `if (gramOn${p}) {
    let t0 = gramRow${p} * 4u;
    ${
      [0, 1, 2, 3].map((c) =>
        `{
      let s = gramCol${p} * 4u + ${c}u;
      var v = vec4<f32>(0.0);
      ${[0, 1, 2, 3].map((r) => maskedEntry(p, r, c)).join("\n      ")}
      triangle[triangle_column(s) + gramRow${p}] = v;
    }`
      ).join("\n    ")
    }
  }`).join("\n  ");
  const inverse = inverseUnrolled(layout.CT);
  const inverseStore = inverseStoreRounds(s.C);
  const exitKeys = exitKeysRounds(s.C, s.dk);
  return `
const CT = ${layout.CT}u; // C padded to whole diagonal blocks
const SB = ${SOLVE_BLOCK}u;
const NB = CT / SB;
const DV4 = ${DV4}u;
// A, then T: column k from row 4 floor(k / 4); T's block row i overwrites A's once the merges have read it
var<workgroup> triangle: array<vec4<f32>, ${layout.inverseVec4}>;
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>;
// entries (4 rb .. 4 rb + 3, k) at vec4 triangle_column(k) + rb of triangle, rb >= floor(k / 4)
fn triangle_column(k: u32) -> u32 {
  let q = k / 4u;
  return q * (CT + 1u - 2u * q) + (k % 4u) * (CT / 4u - q);
}
fn triangle_get(i: u32, k: u32) -> f32 { return triangle[triangle_column(k) + i / 4u][i % 4u]; }
fn triangle_set(i: u32, k: u32, v: f32) { triangle[triangle_column(k) + i / 4u][i % 4u] = v; }
// T[4 rb .. 4 rb + 3, k] (0 above the diagonal's vec4 row)
fn inverse_column4(k: u32, rb: u32) -> vec4<f32> {
  return select(triangle[triangle_column(k) + max(rb, k / 4u)], vec4<f32>(0.0), rb < k / 4u);
}
fn stage_get(e: u32) -> f32 { return stage[e / 4u][e % 4u]; }
fn stage_set(e: u32, v: f32) { stage[e / 4u][e % 4u] = v; }
// R[k, col .. col + 3] (col a multiple of 4): U0's columns below DV4, else V's from col - DV4 (0 past their ends)
fn right_hand_sides4(bh: u32, n: u32, a: u32, k: u32, col: u32) -> vec4<f32> {
  if (col < DV4) {
    var r = cg[k] * yp4(bh, i32(a + k), col);
    if (u.hasS0 != 0u && base_kind(k) == 1u) {
      r -= ${maskedVec4((e) => `cw[pseudo_values_constant_at(bh, n, k, ${e})]`, "col", "DV")};
    }
    return r;
  }
  if (base_kind(k) != 0u) { return vec4<f32>(0.0); }
  return cga[k] * exp(cpp[k]) * xp4(bh, i32(a + k), col - DV4);
}
${chunkEntry("1u", true, STAGED_WG)}
  // 0 where the stores of A do not reach (the steps past C4) and above the diagonal
  for (var e = lid; e < ${layout.inverseVec4}u; e += ${STAGED_WG}u) { triangle[e] = vec4<f32>(0.0); }
  // 1. A: x_t.x_s over the keys, 4 x 4 blocks on and below the diagonal
  ${gridBlocks(matrixGrid)}
  ${declareAccumulators(keyGram)}
  ${stagedLoop("DK", [keysByStep], [keyGram])}
  ${matrixStores}
  workgroupBarrier();
${inverse}
${inverseStore}
  // 3. the S0 term of the rows after a start
  if (u.hasS0 != 0u) {
    ${gridBlocks(startGrid)}
    ${declareAccumulators(startTerm)}
    ${stagedLoop("DK", [keysByStep, initialState], [startTerm])}
    ${
    eachEntry(
      startTerm,
      (v) =>
        `if (t < len && col < DV && base_kind(t) == 1u) { cw[pseudo_values_constant_at(bh, n, t, col)] = cga[t] * exp(cpp[t]) * ${v}; }`,
    )
  }
    storageBarrier();
  }
  // 4. [U0 | V] = T R
  ${gridBlocks(solveGrid)}
  ${declareAccumulators(solved)}
  ${stagedLoop("len", [rightHandSides], [solved])}
  ${
    eachEntry(
      solved,
      (v) =>
        `if (t < len) {
        if (col < DV4) {
          if (col < DV) { cw[pseudo_values_constant_at(bh, n, t, col)] = ${v}; }
        } else if (col - DV4 < DK) {
          cw[pseudo_values_state_factor_at(bh, n, t, col - DV4)] = ${v};
        }
      }`,
    )
  }
${exitKeys}
  if (lid == 0u) {
    cw[u.chunkDecay + bh * nck() + n] = exp(cp[len - 1u]);
    cw[u.exitBaseKind + bh * nck() + n] = f32(base_kind(len - 1u));
  }
}`;
}

/**
 * WGSL of `count` items spread over the workgroup in rounds, written out: round `r` runs `body(e)` for item
 * `e = lid + r * STAGED_WG` (guarded where `e` may reach `count`).
 */
function eachRound(count: number, body: (e: string, round: number) => string): string {
  return Array.from({ length: Math.ceil(count / STAGED_WG) }, (_, r) => {
    const e = `e${r}`;
    const inner = body(e, r);
    return `{
    let ${e} = lid + ${r * STAGED_WG}u;
    ${
      (r + 1) * STAGED_WG <= count ? inner : `if (${e} < ${count}u) {
    ${inner}
    }`
    }
  }`;
  }).join("\n  ");
}

/** Vec4 offset of column `k` of `solve`'s `triangle` (its vec4 row `rb` at this + `rb`): its WGSL `triangle_column`. */
function triangleColumn(k: number, CT: number): number {
  const q = Math.floor(k / 4);
  return q * (CT + 1 - 2 * q) + (k % 4) * (CT / 4 - q);
}

/**
 * WGSL of `solve`'s step 2, written out with compile-time bounds (`SOLVE_BLOCK` and the blocks per chunk are
 * compile-time sizes): the diagonal blocks' columns held in registers (4 vec4 per invocation, `A` read as vec4
 * columns where it lies, `T_ii` stored after a barrier), then the block rows below, 4 rows per invocation from vec4
 * columns of `A` and `T` into 4 independent partial sums, the entries past a triangle's column masked (`select`)
 * instead of skipped; the offsets of the columns a sum reads at a compile-time column are literals. On the H200
 * (8x4096x8x64, 2026-12-02 19:18 UTC, with the stores below written out too) `solve` took 0.64 -> 0.43 ms against
 * loops with bounds that depend on the invocation, every entry addressed through `triangle_column`.
 */
function inverseUnrolled(CT: number): string {
  const rows = Array.from({ length: CT / SOLVE_BLOCK - 1 }, (_, i) => blockRowMerge(i + 1, CT));
  return [diagonalInverses(), ...rows].join("\n");
}

/**
 * The diagonal blocks `T_ii = (I + A_ii)^-1`, invocation `lid < CT` column `c = lid % SOLVE_BLOCK` of its block by
 * forward substitution over the block's columns `q` (`T[t, c] -= A[t, q] T[q, c]`, every row `t` of the block at
 * once: `A_ii` is 0 on and above its diagonal, and `T[q, c] = 0` for `q < c`); the column's rows `4 j .. 4 j + 3` in
 * `diag<j>`, `A`'s columns read as vec4 where they lie, the column stored after a barrier (every invocation has
 * read `A_ii` then).
 */
function diagonalInverses(): string {
  const quads = SOLVE_BLOCK / 4;
  const regs = Array.from({ length: quads }, (_, j) => j);
  const columns = Array.from({ length: SOLVE_BLOCK - 1 }, (_, q) => {
    const j0 = Math.floor(q / 4);
    return `{
      let x = diag${j0}.${component(q % 4)};
      let aq = triangle_column(r0 + ${q}u) + d;
      ${regs.slice(j0).map((j) => `diag${j} -= triangle[aq${j ? ` + ${j}u` : ""}] * x;`).join(" ")}
    }`;
  });
  return `  // 2. T: the diagonal blocks, column lid of T_ii by forward substitution (rows 4 j .. 4 j + 3 of the block in diag<j>)
  ${regs.map((j) => `var diag${j} = vec4<f32>(0.0);`).join(" ")}
  if (lid < CT) {
    let c = lid % SB;
    let r0 = lid - c;
    let d = r0 / 4u;
    ${
    regs.map((j) =>
      `diag${j} = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<u32>(${
        [0, 1, 2, 3].map((m) => `${4 * j + m}u`).join(", ")
      }) == vec4<u32>(c));`
    ).join("\n    ")
  }
    ${columns.join("\n    ")}
  }
  workgroupBarrier();
  if (lid < CT) {
    let c = lid % SB;
    let tc = triangle_column(lid) + (lid - c) / 4u;
    ${
    regs.map((j) => {
      const store = `triangle[tc${j ? ` + ${j}u` : ""}] = diag${j};`;
      return j === quads - 1 ? store : `if (c < ${4 * j + 4}u) { ${store} }`;
    }).join("\n    ")
  }
  }
  workgroupBarrier();`;
}

/**
 * Block row `i` of `T` (its diagonal block already inverted): `T_ij = -T_ii M_ij` with `M_ij = sum_{q < i SB} A_iq T_qj`
 * (`T_qj = 0` for `q < j SB`), for every `j < i` at once. Invocation `e` takes the block row's vec4 row `rq = e % 4`
 * (rows `i SB + 4 rq ..`) of column `col = e / 4`: `M`'s sum over `T`'s column `col` read as vec4 (0 above its first
 * vec4 row) and `A`'s columns at compile-time offsets, 4 partial sums, into `stage[col * 4 + rq]`; after a barrier
 * `T_ii M` over `T_ii`'s columns (0 above the diagonal's vec4 row) and `M`'s column from `stage`, then stored over
 * `A`'s block row `i` (no later row reads it).
 */
function blockRowMerge(i: number, CT: number): string {
  const quads = SOLVE_BLOCK / 4;
  const rb = i * quads; // the block row's first vec4 row
  const outputs = quads * i * SOLVE_BLOCK;
  const sums = [0, 1, 2, 3];
  const partial = (name: string) => `(${name}0 + ${name}1) + (${name}2 + ${name}3)`;
  const mTerms = Array.from({ length: rb }, (_, q4) => {
    const tq = `select(vec4<f32>(0.0), triangle[tc${q4 ? ` + ${q4}u` : ""}], first <= ${q4}u)`;
    const terms = sums.map((m) =>
      `m${m} += triangle[${triangleColumn(4 * q4 + m, CT) + rb}u + rq] * tq.${component(m)};`
    );
    return `{
      let tq = ${tq};
      ${terms.join(" ")}
    }`;
  });
  const tTerms = Array.from({ length: SOLVE_BLOCK }, (_, m) => {
    const m4 = Math.floor(m / 4);
    const column = triangleColumn(i * SOLVE_BLOCK + m, CT) + rb;
    const tii = m4
      ? `select(triangle[${column}u + max(rq, ${m4}u)], vec4<f32>(0.0), rq < ${m4}u)`
      : `triangle[${column}u + rq]`;
    return `s${m % 4} += ${tii} * mv${m4}.${component(m % 4)};`;
  });
  return `  // block row ${i}: M_ij = sum_q A_iq T_qj (j < ${i}), 4 rows of a column per invocation, at stage[col * ${quads} + rq]
  ${
    eachRound(outputs, (e) =>
      `let rq = ${e} % ${quads}u;
    let col = ${e} / ${quads}u;
    let tc = triangle_column(col);
    let first = col / 4u;
    ${sums.map((m) => `var m${m} = vec4<f32>(0.0);`).join(" ")}
    ${mTerms.join("\n    ")}
    stage[col * ${quads}u + rq] = ${partial("m")};`)
  }
  workgroupBarrier();
  // T_ij = -T_ii M_ij
  ${
    eachRound(outputs, (e) =>
      `let rq = ${e} % ${quads}u;
    let col = ${e} / ${quads}u;
    ${Array.from({ length: quads }, (_, j) => `let mv${j} = stage[col * ${quads}u + ${j}u];`).join(" ")}
    ${sums.map((m) => `var s${m} = vec4<f32>(0.0);`).join(" ")}
    ${tTerms.join("\n    ")}
    triangle[triangle_column(col) + ${rb}u + rq] = -(${partial("s")});`)
  }
  workgroupBarrier();`;
}

/**
 * WGSL of `solve`'s store of `T` written out: per round, invocation `e` reads rows `4 rb .. 4 rb + 3`
 * (`rb = e / C`) of column `q = e % C` as one vec4 (0 above the diagonal) and stores them (consecutive invocations,
 * consecutive columns).
 */
function inverseStoreRounds(C: number): string {
  const count = C * (roundUp4(C) / 4);
  return `  // T's entries, rows 4 rb .. 4 rb + 3 of column q per invocation and round
  ${
    eachRound(count, (e) =>
      `let q = ${e} % C;
    let rb = ${e} / C;
    let v = inverse_column4(q, rb);
    ${
        [0, 1, 2, 3].map((m) => {
          const store = `cw[solve_inverse_at(bh, n, 4u * rb + ${m}u, q)] = v.${component(m)};`;
          return C % 4 ? `if (4u * rb + ${m}u < C) { ${store} }` : store;
        }).join("\n    ")
      }`)
  }`;
}

/** The comment of `solve`'s step 5. */
const EXIT_KEYS_NOTE =
  "  // 5. for the factored scans: Xe = Gam[e, :] x (0 past len), exp(P_e) and the exit's base kind";

/** WGSL of `solve`'s step 5 written out: every round's loads (4 keys each), then every round's stores. */
function exitKeysRounds(C: number, dk: number): string {
  const quads = roundUp4(dk) / 4;
  const count = C * quads;
  const rounds = Array.from({ length: Math.ceil(count / STAGED_WG) }, (_, r) => r);
  const guard = (r: number) => ((r + 1) * STAGED_WG <= count ? [] : [`exitE${r} < ${count}u`]);
  const loads = rounds.map((r) =>
    `let exitE${r} = lid + ${r * STAGED_WG}u;
  let exitT${r} = exitE${r} / ${quads}u;
  let exitI${r} = (exitE${r} % ${quads}u) * 4u;
  var exitV${r} = vec4<f32>(0.0);
  if (${[...guard(r), `exitT${r} < len`, `cseg[exitT${r}] == exitSeg`].join(" && ")}) {
    exitV${r} = exp(cp[len - 1u] - cp[exitT${r}]) * xp4(bh, i32(a + exitT${r}), exitI${r});
  }`
  );
  const stores = rounds.map((r) => {
    const body = [0, 1, 2, 3].map((m) => {
      const store = `cw[exit_keys_at(bh, n, exitT${r}, exitI${r} + ${m}u)] = exitV${r}.${component(m)};`;
      return dk % 4 ? `if (exitI${r} + ${m}u < DK) { ${store} }` : store;
    }).join("\n    ");
    return guard(r).length ? `if (${guard(r)[0]}) {\n    ${body}\n  }` : body.replaceAll("\n    ", "\n  ");
  });
  return `${EXIT_KEYS_NOTE}
  let exitSeg = cseg[len - 1u];
  ${loads.join("\n  ")}
  ${stores.join("\n  ")}`;
}

/** Depth of the operand slices a staged product holds in workgroup memory at a time. */
const STAGED_SLICE = 16;

/** Invocations along each side of a staged product's workgroup (each holds a 4 x 4 register tile). */
const STAGED_SIDE = STAGED_BLOCK / 4;

/** One staged product `P[i, j] = sum_{k < depth} A[i, k] B[k, j]` over a workgroup's output block. */
interface StagedProduct {
  /** Prefix of its workgroup arrays (declared by {@linkcode stagedProductArrays}) and registers. */
  name: string;
  /** WGSL: the block's first row and first column (uniform across the workgroup). */
  row0: string;
  col0: string;
  /** WGSL bounds of `i`, `j` and `k` for the loads (operands outside them read as 0); `depth` uniform. */
  rows: string;
  cols: string;
  depth: string;
  /** WGSL of the first `k` whose products are not all 0 (uniform, a multiple of `STAGED_SLICE`); 0 when absent. */
  depthFrom?: string;
  /** WGSL of `A[i, k]`, and which of its indices is contiguous in memory (the loads run along it). */
  a: string;
  aAlong: "row" | "depth";
  /** WGSL of `B[k, j]`, and which of its indices is contiguous in memory. */
  b: string;
  bAlong: "col" | "depth";
  /** WGSL statement storing `v = P[i, j]` (every `i`, `j` of the block: it checks its own bounds). */
  store: string;
}

/** The workgroup arrays of a staged product: `STAGED_SLICE`-deep slices of `A` as `[k][i / 4]` and `B` as `[k][j / 4]` vec4. */
function stagedProductArrays(name: string): string {
  const n = STAGED_SLICE * STAGED_SIDE;
  return `
var<workgroup> ${name}A: array<vec4<f32>, ${n}>;
var<workgroup> ${name}B: array<vec4<f32>, ${n}>;
`;
}

/**
 * WGSL of a staged product over one {@linkcode STAGED_BLOCK}-square output block per workgroup (the GEMM of
 * `matmul.ts` over a chunk's operands): every `STAGED_SLICE`-deep slice of `A` and `B` is loaded once,
 * consecutive invocations reading consecutive floats, into workgroup memory; each invocation then
 * accumulates a 4 x 4 register tile from two vec4 reads per `k` (16 products). Must run in uniform
 * control flow (barriers).
 */
function stagedProduct(p: StagedProduct): string {
  const { name } = p;
  const B = STAGED_BLOCK;
  const S = STAGED_SLICE;
  const side = STAGED_SIDE;
  const R = [0, 1, 2, 3];
  const stage = (
    op: "A" | "B",
    along: string,
    expr: string,
    index: "i" | "j",
    first: string,
    bound: string,
  ) => {
    const contiguous = along !== "depth";
    return `{
          let si = ${contiguous ? `e % ${B}u` : `e / ${S}u`};
          let sk = ${contiguous ? `e / ${B}u` : `e % ${S}u`};
          let ${index} = ${first} + si;
          let k = k0 + sk;
          var v = 0.0;
          if (${index} < ${bound} && k < ${p.depth}) { v = ${expr}; }
          ${name}${op}[sk * ${side}u + si / 4u][si % 4u] = v;
        }`;
  };
  return `{
    let ${name}Row = lid / ${side}u;
    let ${name}Col = lid % ${side}u;
    ${R.map((r) => `var ${name}${r} = vec4<f32>(0.0);`).join("\n    ")}
    for (var k0 = ${p.depthFrom ?? "0u"}; k0 < ${p.depth}; k0 += ${S}u) {
      for (var e = lid; e < ${B * S}u; e += WG) {
        ${stage("A", p.aAlong, p.a, "i", p.row0, p.rows)}
        ${stage("B", p.bAlong, p.b, "j", p.col0, p.cols)}
      }
      workgroupBarrier();
      for (var kk = 0u; kk < ${S}u; kk++) {
        let av = ${name}A[kk * ${side}u + ${name}Row];
        let bv = ${name}B[kk * ${side}u + ${name}Col];
        ${R.map((r) => `${name}${r} += av[${r}] * bv;`).join("\n        ")}
      }
      workgroupBarrier();
    }
    let ${name}I0 = ${p.row0} + ${name}Row * 4u;
    let ${name}J0 = ${p.col0} + ${name}Col * 4u;
    ${
    R.map((r) =>
      `for (var c = 0u; c < 4u; c++) {
      let i = ${name}I0 + ${r}u;
      let j = ${name}J0 + c;
      let v = ${name}${r}[c];
      ${p.store}
    }`
    ).join("\n    ")
  }
  }`;
}

/**
 * WGSL of a state-shaped pass as 4 x 4 blocks per invocation: `assign(e)` + `sum_k [w(k)] a(k, i) b(k, c)`
 * for the block's entries `e = i * DV + c` (`a`, `b`, `w` as in {@linkcode tile4}, the block at `i0`,
 * `cb0`; `assign` ends with the operator that joins the sum).
 */
function stateBlock(a: string, b: string, w: string, assign: (e: string) => string): string {
  return stateTileBlock(`${tile4("e", "len", a, b, w || undefined)}
    ${
    tile4Each((r, c) =>
      `if (i0 + ${r}u < DK && cb0 + ${c}u < DV) { ${assign(`(i0 + ${r}u) * DV + cb0 + ${c}u`)}e${r}${c}; }`
    )
  }`);
}

/**
 * `solve_input_grads`: for rows `j` of the chunk, with `F[t,s] = -(dR_t.w_s) a_t Gp[t,s]` (`s < t`):
 * `dx_j += sum_k (F[j,k] + F[k,j]) x_k - a_j exp(Pp_j) base_j dR_j`, `dy_j = b_j dR_j`,
 * `da_j = sum_s -(dR_j.w_s) Gp[j,s] x_j.x_s - exp(Pp_j) dR_j.(base_j^T x_j)`, `db_j = dR_j.y_j`,
 * and the decay factors' shares for `delta_decay_grads`: `decayWeightsSolve[t,s] = F[t,s] x_t.x_s` (factor `Gp[t,s]`) and
 * `decayWeightsSolveBase_t = -a_t exp(Pp_t) dR_t.(base_t^T x_t)` (factor `exp(Pp_t)`).
 *
 * One workgroup of `STAGED_WG` invocations per `(b, h, chunk, RP rows)`; every product is a register tile fed
 * from workgroup memory (`chunk_staged_tiles.ts`), its operands staged slice by slice with coalesced loads, each
 * slice's loads pooled over the invocations (`stagedLoop`), 16 bytes at a time where `Dk` and `Dv` are
 * multiples of 4 (`ws`, `cw`, `s0` and `out` then vec4 arrays; also `F`'s stores, `decayWeightsSolve`, `dx`, `dy` and the
 * `dR.y` sums 4 floats per access). On the H200 (8x4096x8x64, 17:07 UTC A/B) 1.26 ms, against 1.73 before the
 * merged loop and vec4 `F` (1.68 with them alone, 1.37 with the vec4 bindings but not the pooled loads):
 * 1. `x_j.x_k`, `dR_j.W_k` (and, unless `RP = C`, `W_j.dR_k`) for the rows `j` x the chunk's columns `k`, over
 *    the key and value entries; from them `F` (both orders, `scxT`, a block's 4 x 4 entries as vec4), the rows'
 *    `d a` pair sums and `decayWeightsSolve`. With `RP = C` (`mirror`) the blocks on and below the diagonal give
 *    all (a `lower` grid: the invocations past them skip the products): entry `(t, s)`, `s < t`, stores `F[t,s]`
 *    at `(t, s)` and `(s, t)` of `scxT` (a diagonal block both at once); `decayWeightsSolve` is then not written
 *    above the diagonal blocks (`delta_decay_grads` reads only `s < t`);
 * 2. one staged loop over `max(C, Dv)` depth rows for two products: `dx_j += sum_k scx[j,k] x_k` (depth: the
 *    chunk's steps, `scxT` the left factor) and `S_in dR_j` for the rows `j` whose base is `S_in` (depth: the
 *    value entries); then, with `S0`, `S0 dR_j` for the rows after a start (a loop over `Dv`, empty without);
 * then `dx` stored, `dy`, and per row the sums over parts (`d a`, `d b`, `decayWeightsSolveBase`).
 */
function pairsKernel(s: ChunkShape): string {
  const layout = solveInputGradsLayout(s);
  const { mirror } = layout;
  // at Dk, Dv multiples of 4 the bindings are vec4 arrays: every operand and gradient row read 4 at a time
  const quads = bindsVec4("solve_input_grads", s);
  const [C4, RP4, DK4] = [s.C, s.RP, s.dk].map(roundUp4);
  // with RP = C only the blocks on and below the diagonal: they give F at both (t, s) and (s, t)
  const pair: TileGrid = { name: "pair", rows: RP4, cols: C4, lower: mirror };
  const rowKey: TileGrid = { name: "rowKey", rows: RP4, cols: DK4 };
  // one float, or with quads the 4 from it (a multiple of 4), of a workspace row or section
  const keyAt = (step: string, k: string) =>
    quads ? `xp4(bh, i32(${step}), ${k})` : `xp(bh, i32(${step}), ${k})`;
  const workspaceAt = (f: string) => quads ? `cw4(${f})` : `cwf(${f})`;
  const rhsGradAt = (step: string, k: string) => workspaceAt(`u.dRightHandSide + row(bh, ${step}, ${k})`);
  const valueAt = (step: string, k: string) => workspaceAt(`u.pseudoValues + row(bh, ${step}, ${k})`);
  // entry (k, i): k the key or value entry, i the chunk step (or the workgroup's row)
  const chunkOperand = (value: (step: string) => string, K: string): StagedOperand => ({
    width: C4,
    along: "depth",
    value: value("a + i"),
    valid: `i < len && k < ${K}`,
    quad: quads,
  });
  const rowOperand = (value: (step: string) => string, K: string): StagedOperand => ({
    width: RP4,
    along: "depth",
    value: value("a + r0 + i"),
    valid: `i < RP && r0 + i < len && k < ${K}`,
    quad: quads,
  });
  const keys = (step: string) => keyAt(step, "k");
  const rhsGrads = (step: string) => rhsGradAt(step, "k");
  const values = (step: string) => valueAt(step, "k");
  const pairOperands = [
    chunkOperand(keys, "DK"),
    chunkOperand(rhsGrads, "DV"),
    chunkOperand(values, "DV"),
    ...(mirror ? [] : [rowOperand(keys, "DK"), rowOperand(rhsGrads, "DV"), rowOperand(values, "DV")]),
  ];
  const rows = (n: number) => mirror ? n : n + 3;
  const xx: TileProduct = { acc: "xx", grid: pair, a: rows(0), b: 0 };
  const dl: TileProduct = { acc: "dl", grid: pair, a: rows(1), b: 2 };
  const du: TileProduct = { acc: "du", grid: pair, a: rows(2), b: 1 };
  const pairProducts = mirror ? [xx, dl] : [xx, dl, du];
  const keyRows: StagedOperand = {
    width: DK4,
    along: "width",
    value: keyAt("a + k", "i"),
    valid: "k < len && i < DK",
    quad: quads,
  };
  // dR_j of the rows whose base is S_in (kind 0) or S0 (kind 1), 0 for the others
  const rhsGradsOfBase = (kind: number): StagedOperand => ({
    ...rowOperand(rhsGrads, "DV"),
    valid: `i < RP && r0 + i < len && k < DV && base_kind(r0 + i) == ${kind}u`,
  });
  const entryStates: StagedOperand = {
    width: DK4,
    along: "depth",
    value: workspaceAt("bin + i * DV + k"),
    valid: "i < DK && k < DV",
    quad: quads,
  };
  const initialStates: StagedOperand = {
    ...entryStates,
    value: quads ? "s0[((bh * DK + i) * DV + k) >> 2u]" : "s0f((bh * DK + i) * DV + k)",
  };
  const stepKeyOperands = [keyRows, rhsGradsOfBase(0), entryStates];
  const initialOperands = [rhsGradsOfBase(1), initialStates];
  const px: TileProduct = { acc: "px", grid: rowKey, a: { array: "scxT", width4: RP4 / 4 }, b: 0 };
  const bdEntry: TileProduct = { acc: "bd", grid: rowKey, a: 1, b: 2 };
  const bdInitial: TileProduct = { acc: "bd", grid: rowKey, a: 0, b: 1 };
  for (const operands of [pairOperands, stepKeyOperands, initialOperands]) {
    if (stagedFloats(operands) > layout.stage) {
      throw new RangeError(
        `solve_input_grads: ${stagedFloats(operands)} staged floats, above its layout's ${layout.stage}`,
      );
    }
  }
  const W4 = RP4 / 4;
  const parts = layout.rowParts;
  const keyParts = DK4 / 4;
  const dbOffset = RP4 * keyParts;
  const partStore = (e: string, v: string) => `{ let e = ${e}; stage[e / 4u][e % 4u] = ${v}; }`;
  const partLoad = (e: string) => `stage[(${e}) / 4u][(${e}) % 4u]`;
  const R4 = [0, 1, 2, 3];
  const vec4Of = (f: (m: number) => string) => `vec4<f32>(${R4.map(f).join(", ")})`;
  // decayWeightsSolve of a block: a row's 4 entries in one store where cw is a vec4 array (and rows start at
  // multiples of 4 floats), else one by one
  const decayWeightStores = (p: number) =>
    R4.map((r) => {
      const at = (kk: string) => `u.decayWeightsSolve + (chunkId * C + r0 + jb + ${r}u) * C + ${kk}`;
      const stored = quads && s.C % 4 === 0
        ? `cw[(${at("kb")}) >> 2u] = ${vec4Of((c) => `v2_${r}${c}`)};`
        : R4.map((c) => `if (kb + ${c}u < len) { cwset(${at(`kb + ${c}u`)}, v2_${r}${c}); }`).join(" ");
      return `if (pairOn${p} && jb + ${r}u < RP && r0 + jb + ${r}u < len) { ${stored} }`;
    }).join("\n    ");
  // F of a block into scxT, vec4 per column kk (its 4 rows); with the mirror also per row jt (its 4 columns), a
  // diagonal block's two halves added (each holds 0 where the other holds F)
  const pairWeightStores = (p: number) => {
    const column = (c: number) => vec4Of((r) => `cx_${r}${c}`);
    const rowOf = (r: number) => vec4Of((c) => `cx_${r}${c}`);
    if (!mirror) {
      return `if (pairOn${p}) {
      ${R4.map((c) => `scxT[(kb + ${c}u) * ${W4}u + pairRow${p}] = ${column(c)};`).join("\n      ")}
    }`;
    }
    return `if (pairOn${p} && pairRow${p} == pairCol${p}) {
      ${
      R4.map((c) => `scxT[(kb + ${c}u) * ${W4}u + pairRow${p}] = ${column(c)} + ${rowOf(c)};`).join(
        "\n      ",
      )
    }
    } else if (pairOn${p}) {
      ${
      R4.map((c) =>
        `scxT[(kb + ${c}u) * ${W4}u + pairRow${p}] = ${column(c)};
      scxT[(jb + ${c}u) * ${W4}u + pairCol${p}] = ${rowOf(c)};`
      ).join("\n      ")
    }
    }`;
  };
  // per block of the pair grid: F (cx), the d a pair sums' parts, decayWeightsSolve (v2)
  const pairStores = Array.from({ length: tilesPerInvocation(pair) }, (_, p) => {
    const entries = R4.flatMap((c) =>
      R4.map((r) =>
        `var cx_${r}${c} = 0.0;
    var v2_${r}${c} = 0.0;
    {
      let kk = kb + ${c}u;
      let jr = jb + ${r}u;
      let jt = r0 + jr;
      if (jr < RP && jt < len && kk < len && kk != jt && cseg[kk] == cseg[jt]${mirror ? " && kk < jt" : ""}) {
        let tq = ${mirror ? "jt" : "max(jt, kk)"};
        let sq = ${mirror ? "kk" : "min(jt, kk)"};
        let dw = ${
          mirror
            ? `dl${p}_${r}.${component(c)}`
            : `select(du${p}_${r}.${component(c)}, dl${p}_${r}.${component(c)}, kk < jt)`
        };
        let gp = exp(cpp[tq] - cp[sq]);
        let f = -dw * cga[tq] * gp;
        cx_${r}${c} = f;
        if (kk < jt) {
          erase.${component(r)} += -dw * gp * xx${p}_${r}.${component(c)};
          v2_${r}${c} = f * xx${p}_${r}.${component(c)};
        }
      }
    }`
      )
    ).join("\n    ");
    return `{
    let jb = pairRow${p} * 4u;
    let kb = pairCol${p} * 4u;
    var erase = vec4<f32>(0.0);
    ${entries}
    ${pairWeightStores(p)}
    ${decayWeightStores(p)}
    if (pairOn${p}) {
      ${
      R4.map((r) => partStore(`(jb + ${r}u) * ${C4 / 4}u + pairCol${p}`, `erase.${component(r)}`)).join(
        "\n      ",
      )
    }
    }
  }`;
  }).join("\n  ");
  // per block row of the row x key grid: dx (read-modify-write: the pair passes add to it too), and the part of
  // x_j . (base_j^T dR_j); with quads a row's 4 entries in one access
  const dxAt = "u.gDX + (bh * (u.T + 1u) + t) * DK + q";
  const rowKeyStores = Array.from({ length: tilesPerInvocation(rowKey) }, (_, p) =>
    R4.map((r) => {
      const acc = (name: string) => `${name}${p}_${r}`;
      const update = quads
        ? `let q = rowKeyCol${p} * 4u;
      let based = ${acc("bd")};
      part = dot(${keyAt("t", "q")}, based);
      let kx = (${dxAt}) >> 2u;
      out[kx] = out[kx] + ${acc("px")} - gain * based;`
        : R4.map((c) =>
          `{
        let q = rowKeyCol${p} * 4u + ${c}u;
        if (q < DK) {
          let based = ${acc("bd")}.${component(c)};
          part += ${keyAt("t", "q")} * based;
          let kx = ${dxAt};
          out[kx] = out[kx] + ${acc("px")}.${component(c)} - gain * based;
        }
      }`
        ).join("\n      ");
      return `{
    let jr = rowKeyRow${p} * 4u + ${r}u;
    let jt = r0 + jr;
    var part = 0.0;
    if (rowKeyOn${p} && jr < RP && jt < len) {
      let t = a + jt;
      let gain = cga[jt] * exp(cpp[jt]);
      ${update}
    }
    if (rowKeyOn${p}) { ${partStore(`jr * ${keyParts}u + rowKeyCol${p}`, "part")} }
  }`;
    }).join("\n  ")).join("\n  ");
  // dy = b dR, and dR_j.y_j in parts per row (neighbouring invocations read neighbouring entries)
  const lanes = quads ? 4 : 1;
  const rowEntries = `DV / ${lanes}u`;
  const dyStores = `for (var k = lid; k < RP * ${rowEntries}; k += ${STAGED_WG}u) {
    let jt = r0 + k / (${rowEntries});
    let c = ${lanes}u * (k % (${rowEntries}));
    if (jt < len) {
      ${
    quads
      ? `out[(u.gDY + (bh * u.T + a + jt) * DV + c) >> 2u] = cg[jt] * ${rhsGradAt("a + jt", "c")};`
      : `out[u.gDY + (bh * u.T + a + jt) * DV + c] = cg[jt] * ${rhsGradAt("a + jt", "c")};`
  }
    }
  }`;
  const writeGainParts = `for (var it = lid; it < RP * ${parts}u; it += ${STAGED_WG}u) {
    let jt = r0 + it / ${parts}u;
    var v = 0.0;
    if (jt < len) {
      let t = a + jt;
      for (var c = ${lanes}u * (it % ${parts}u); c < DV; c += ${lanes * parts}u) {
        v += ${
    quads ? `dot(${rhsGradAt("t", "c")}, yp4(bh, i32(t), c))` : `${rhsGradAt("t", "c")} * yp(bh, i32(t), c)`
  };
      }
    }
    ${partStore(`${dbOffset}u + it`, "v")}
  }`;
  const tiles = Math.ceil(s.C / s.RP);
  return `
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices, then partial sums
var<workgroup> scxT: array<vec4<f32>, ${
    (layout.scxRows * RP4) / 4
  }>; // [chunk column kk][row / 4]: F[max, min] of (row, kk)
var<workgroup> rowErase: array<f32, RP>; // sum_s -(dR_j.w_s) Gp[j,s] x_j.x_s
${chunkEntry(`${tiles}u`, true, STAGED_WG)}
  let r0 = tile * RP;
  let chunkId = bh * nck() + n;
  let bin = u.entryState + chunkId * DK * DV;
  ${
    layout.scxRows > C4
      ? `// the depth rows of scxT past the chunk's columns (read by the last slices of loop 2 against staged zeros) hold 0
  for (var k = ${(C4 * RP4) / 4}u + lid; k < ${
        (layout.scxRows * RP4) / 4
      }u; k += ${STAGED_WG}u) { scxT[k] = vec4<f32>(0.0); }`
      : ""
  }
  // 1. x_j.x_k, dR_j.W_k${mirror ? "" : ", W_j.dR_k"}: 4 rows x 4 chunk columns per block
  ${gridBlocks(pair)}
  ${pairProducts.map(declareAccumulators).join("\n  ")}
  ${stagedLoop(`${Math.max(s.dk, s.dv)}u`, pairOperands, pairProducts)}
  ${pairStores}
  workgroupBarrier();
  for (var jr = lid; jr < RP; jr += ${STAGED_WG}u) {
    var sum = 0.0;
    for (var o = 0u; o < ${mirror ? "jr / 4u + 1u" : `${C4 / 4}u`}; o++) { sum += ${
    partLoad(`jr * ${C4 / 4}u + o`)
  }; }
    rowErase[jr] = sum;
  }
  workgroupBarrier();
  // 2. sum_k scx[j,k] x_k and base_j dR_j: 4 rows x 4 key entries per block
  ${gridBlocks(rowKey)}
  ${declareAccumulators(px)}
  ${declareAccumulators(bdEntry)}
  ${stagedLoop(`${Math.max(s.C, s.dv)}u`, stepKeyOperands, [px, bdEntry])}
  ${stagedLoop("select(0u, DV, u.hasS0 != 0u)", initialOperands, [bdInitial])}
  ${rowKeyStores}
  ${dyStores}
  ${writeGainParts}
  workgroupBarrier();
  for (var jr = lid; jr < RP; jr += ${STAGED_WG}u) {
    let jt = r0 + jr;
    if (jt >= len) { continue; }
    var xbd = 0.0;
    for (var o = 0u; o < ${keyParts}u; o++) { xbd += ${partLoad(`jr * ${keyParts}u + o`)}; }
    var db = 0.0;
    for (var o = 0u; o < ${parts}u; o++) { db += ${partLoad(`${dbOffset}u + jr * ${parts}u + o`)}; }
    let ex = exp(cpp[jt]);
    let k = bh * u.T + a + jt;
    cwset(u.dEraseGain + k, rowErase[jr] - ex * xbd);
    cwset(u.dDeltaWriteGain + k, db);
    cwset(u.decayWeightsSolveBase + k, -cga[jt] * ex * xbd);
  }
}`;
}
