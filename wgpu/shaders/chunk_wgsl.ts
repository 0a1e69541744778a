/**
 * Shared pieces of the chunk-parallel fast-weight kernels (`fast_weight_chunk_additive.ts` for the additive
 * rules, `fast_weight_chunk_delta.ts` for the delta rules, `fast_weight_chunk_window_delta.ts` for
 * falcon3): compile-time shape, passes, bindings,
 * uniform block, workspace addressing, the chunk's step arrays in workgroup memory and the
 * per-step coefficients (the recurrent kernels' `coef()`).
 *
 * @module
 */

import { isDeltaRule, type RuleConfig, type RuleFamily, ruleFamily } from "../../src/rules/config.ts";
import { coefficientWgsl, f32Literal, type HeadConstants, statKind } from "./fast_weight_coef.ts";
import { topEigenWgsl, windowSlots } from "./fast_weight_recurrent.ts";
import { roundUp4, STAGE_DEPTH, STAGED_WG, stagedFloats } from "./chunk_staged_tiles.ts";
import { scanColumns } from "./chunk_delta_scans.ts";
import { packWorkgroupArrays } from "./workgroup_packing.ts";

/** Compile-time shape of the chunk kernels. */
export interface ChunkShape {
  /** Heads. */
  readonly H: number;
  /** Key size. */
  readonly dk: number;
  /** Value size. */
  readonly dv: number;
  /** Chunk size `C`. */
  readonly C: number;
  /** Rows per workgroup of the `readout` and `query_grads` kernels. */
  readonly R: number;
  /** Pair columns per workgroup of the `pair_column_grads` kernel (and the delta rules' `readout_dw`). */
  readonly RC: number;
  /**
   * Pair columns per workgroup of their tail pipelines (`pair_column_grads_tail`, `readout_dw_tail`), 0 for none:
   * where `RC` does not divide the chunk's pair columns, the rest in one workgroup per chunk of this many
   * ({@linkcode pairColumnTail}).
   */
  readonly RT: number;
  /** Rows per workgroup of the delta rules' `solve_input_grads` kernel. */
  readonly RP: number;
  /**
   * Value columns per workgroup of the per-column rules' scans `column_state_scan` and `column_reverse_scan` (1: one
   * column per workgroup, their single-column form; `columnScanTiling` in `fast_weight_chunk_per_column.ts`).
   */
  readonly CS: number;
  /** Chunk rows of `X` per slice those scans stage in workgroup memory (`C`: the whole chunk; 0 where `CS` is 1). */
  readonly CX: number;
  /** Invocations per workgroup of those scans (0 where `CS` is 1: the single-column kernels' `CHUNK_WG`). */
  readonly SW: number;
  /**
   * Columns of `U0 | V` per workgroup of falcon3's sweep `window_solve` ({@linkcode windowSolveColumns}); 0: its
   * serial form (another rule, `WINDOW_SOLVE = "serial"`, or a shape whose sweep does not fit).
   */
  readonly WS: number;
}

/** Passes only the per-column rules (falcon2, falcon2a) run (`fast_weight_chunk_per_column.ts`). */
export const PER_COLUMN_PASSES = [
  "column_coefs",
  "column_gram",
  "column_state_scan",
  "column_readout",
  "column_readout_dw",
  "column_query_dout",
  "column_reverse_scan",
  "column_dots",
  "column_step_grads",
  "column_gram_grads",
  "column_coef_grads",
  "column_query_key_grads",
  "column_state_increment",
  "column_increment_scan",
  "column_gradient_scan",
] as const;

/** Passes only falcon3 runs (`fast_weight_chunk_window_delta.ts`). */
export const WINDOW_DELTA_PASSES = [
  "window_pair_gram",
  "window_solve",
  "window_transition",
  "window_pseudo_values",
  "window_readout",
  "window_readout_dw",
  "window_scan_link",
  "window_row_grads",
  "window_solve_transposed",
  "window_query_grads",
  "window_solve_input_grads",
  "window_s0_grad_parts",
  "window_pair_gather",
] as const;

/** The passes of the chunk kernels (additive rules, then the delta rules' own). */
export const CHUNK_PASSES = [
  "coef",
  "chunk_steps",
  "state_increment",
  "state_scan",
  "readout",
  "base_readout_grads",
  "base_readout_grads_no_s0",
  "reverse_scan",
  "reverse_scan_no_s0",
  "query_grads",
  "pair_column_grads",
  "pair_column_grads_tail",
  "decay_grads",
  "coef_grads",
  "pair_row_grads",
  "solve",
  "delta_state_scan",
  "delta_value_scan",
  "readout_dw",
  "readout_dw_tail",
  "scan_link",
  "delta_reverse_scan",
  "delta_value_reverse_scan",
  "solve_transposed",
  "solve_input_grads",
  "delta_decay_grads",
  "delta_coef_grads",
  "s0_grad_parts",
  "s0_grad_sum",
  ...PER_COLUMN_PASSES,
  ...WINDOW_DELTA_PASSES,
] as const;

/** One chunk kernel pass. */
export type ChunkPass = typeof CHUNK_PASSES[number];

/** Invocations per workgroup of every chunk kernel. */
export const CHUNK_WG = 64;

/**
 * The form of the per-column rules' `column_gram` (`fast_weight_chunk_per_column.ts`): `true`, one workgroup per
 * `(b, h, chunk, Gram tile)` of staged register tiles ({@linkcode columnGramLayout}); `false`, one invocation per
 * chunk row and 4 Gram columns reading the key and query rows from storage (the earlier form, the same WGSL).
 */
export const COLUMN_GRAM_STAGED = true;

/**
 * The form of the per-column rules' `column_readout` (`fast_weight_chunk_per_column.ts`): `true`, one workgroup per
 * `(b, h, chunk, tile of rows x value columns)` of staged register tiles ({@linkcode columnReadoutLayout}); `false`,
 * one invocation per `(b, h, t, column)` walking back over its segment (the earlier form, the same WGSL).
 */
export const COLUMN_READOUT_TILED = true;

/**
 * The form of falcon2a's state scan (the additive per-column rule, `fast_weight_chunk_per_column.ts`): `true`, split
 * into `column_state_increment` (per `(b, h, chunk, tile of the state)`: the chunk's increment `sum_s Gam[e,s] x_s W_s`
 * as staged register tiles, {@linkcode columnIncrementLayout}) and `column_increment_scan` (per state element, the
 * chunks in order: the entering states and the final state), `column_coefs` storing the pseudo-values `W = b y`;
 * `false`, the one serial `column_state_scan` per `(b, h, group of value columns)` (the earlier passes, the same
 * WGSL). Likewise the backward: `column_gradient_scan` (per state element, the chunks in reverse: the exit-state
 * gradients `G`, `dS0`, `dCarryState`) in place of `column_reverse_scan`, and `column_dots` storing the right-hand
 * side's gradient `dR = dW` (no solve) from the `x_t.G` it sums anyway. falcon2 (whose solves need the entering
 * state and `G` inside the walk) keeps `column_state_scan` and `column_reverse_scan` either way. With it falcon2a's
 * staged `column_gram` also computes `Kq` alone (`K = X X^T` feeds only the solves).
 */
export const COLUMN_SPLIT_SCAN = true;

/** Whether `config` runs the split state scan of {@linkcode COLUMN_SPLIT_SCAN}: falcon2a (`a = 0`) with it on. */
export function splitsColumnScan(config: RuleConfig): boolean {
  return COLUMN_SPLIT_SCAN && isPerColumnChunkRule(config) && !isDeltaRule(config.rule);
}

/** Rows and columns of the output tile of one workgroup of the staged `column_gram` and `column_readout` at most. */
export const COLUMN_TILE_MAX = 64;

/**
 * `n` entries in the fewest tiles of at most {@linkcode COLUMN_TILE_MAX}, of one size (`size`, a multiple of 4; the
 * last tile may run past `n`): 68 value columns take 2 tiles of 36, not 64 and 4.
 */
export function balancedTiles(n: number): { size: number; tiles: number } {
  const tiles = Math.ceil(n / COLUMN_TILE_MAX);
  return { size: roundUp4(Math.ceil(n / tiles)), tiles };
}

/** The fewest invocations (a power of two from {@linkcode CHUNK_WG} to {@linkcode STAGED_WG}) that hold `blocks` 4 x 4 blocks once. */
function blockInvocations(blocks: number): number {
  let n = CHUNK_WG;
  while (n < blocks && n < STAGED_WG) n *= 2;
  return n;
}

/**
 * Tiling of the staged `column_gram` ({@linkcode COLUMN_GRAM_STAGED}): the chunk's `C x C` Gram matrices in `side x
 * side` tiles of `tile` rows and columns ({@linkcode balancedTiles}; one tile at `C <= 64`), one workgroup of
 * `invocations` per tile, and the floats of its staged slices (`stage`: the key and query rows of the tile's rows,
 * and the key rows of its columns where those differ).
 */
export function columnGramLayout(C: number) {
  const { size: tile, tiles: side } = balancedTiles(C);
  const transposed = { width: tile, along: "depth" as const };
  const stage = stagedFloats(side === 1 ? [transposed, transposed] : [transposed, transposed, transposed]);
  return { tile, side, tiles: side * side, invocations: blockInvocations((tile / 4) ** 2), stage };
}

/**
 * A staged kernel's tiling of `rows.tiles x cols.tiles` output tiles of `rows.size x cols.size` entries
 * ({@linkcode balancedTiles}), one workgroup of `invocations` (a 4 x 4 block each) per tile, and its workgroup floats:
 * `stage` and the chunk's start counts (`C`), `floats` in all.
 */
function rowsByColumnsLayout(
  rows: { size: number; tiles: number },
  cols: { size: number; tiles: number },
  stage: number,
  C: number,
) {
  return {
    rows: rows.size,
    rowTiles: rows.tiles,
    cols: cols.size,
    colTiles: cols.tiles,
    tiles: rows.tiles * cols.tiles,
    invocations: blockInvocations((rows.size / 4) * (cols.size / 4)),
    stage,
    floats: stage + C,
  };
}

/**
 * Tiling of the staged `column_readout` ({@linkcode COLUMN_READOUT_TILED}): per chunk, `rowTiles` tiles of `rows`
 * steps times `colTiles` tiles of `cols` value columns ({@linkcode balancedTiles}), one workgroup of `invocations`
 * per tile, and its workgroup floats: `stage` (the largest of: a slice of the query rows and a base; of the
 * query-key Gram rows, the pseudo-values and the log-decay sums) and the chunk's start counts (`C`), `floats` in all.
 */
export function columnReadoutLayout(s: Pick<ChunkShape, "dv" | "C">) {
  const rows = balancedTiles(s.C);
  const cols = balancedTiles(s.dv);
  const transposed = { width: rows.size, along: "depth" as const };
  const row = { width: cols.size, along: "width" as const };
  const stage = Math.max(stagedFloats([transposed, row]), stagedFloats([transposed, row, row]));
  return rowsByColumnsLayout(rows, cols, stage, s.C);
}

/**
 * Tiling of falcon2a's `column_state_increment` ({@linkcode COLUMN_SPLIT_SCAN}): per chunk, `rowTiles` tiles of
 * `rows` key rows times `colTiles` tiles of `cols` value columns of the `Dk x Dv` increment ({@linkcode balancedTiles}),
 * one workgroup of `invocations` per tile, and its workgroup floats: `stage` (a slice of the keys and of the decayed
 * pseudo-values) and the chunk's start counts (`C`), `floats` in all.
 */
export function columnIncrementLayout(s: Pick<ChunkShape, "dk" | "dv" | "C">) {
  const rows = balancedTiles(s.dk);
  const cols = balancedTiles(s.dv);
  const stage = stagedFloats([{ width: rows.size, along: "width" }, { width: cols.size, along: "width" }]);
  return rowsByColumnsLayout(rows, cols, stage, s.C);
}

/** Workspace sections only the per-column rules have. */
export const COLUMN_UNIFORM_FIELDS = [
  "columnLogDecaySum",
  "columnEraseGain",
  "columnWriteGain",
  "columnPseudoValues",
  "columnKeyDotBase",
  "columnDPseudoValuesReadout",
  "columnDRightHandSide",
  "columnDEraseGain",
  "columnDWriteGain",
  "columnDLogDecay",
  "keyGram",
  "queryKeyGram",
  "dQueryKeyGram",
  "dKeyGram",
  "columnDBaseReadout",
  "columnDqBaseWeights",
  "columnDxExitWeights",
  "columnDxBaseWeights",
  "startsInChunk",
  "columnBaseDecayShare",
  "columnKeyDotDExit",
] as const;

/** Fields of the uniform block (u32 each), in order. */
export const CHUNK_UNIFORM_FIELDS = [
  "B",
  "T",
  "hasS0",
  "hasInit",
  "NCK",
  "logDecay",
  "chunkLogDecay",
  "chunkLogDecayBefore",
  "chunkSegment",
  "writeGain",
  "dWriteGain",
  "dLogDecay",
  "dStatistic",
  "chunkDecay",
  "exitBaseKind",
  "chunkStateIncrement",
  "entryState",
  "dExitState",
  "finalState",
  "dBaseReadout",
  "dxPrecedingPairs",
  "dyPrecedingPairs",
  "dWriteGainTerms",
  "gDX",
  "gDY",
  "gDB",
  "gDLB",
  "gDS0",
  "gDC",
  "eraseGain",
  "solveInverse",
  "pseudoValuesConstant",
  "pseudoValuesStateFactor",
  "exitKeys",
  "transitionMatrix",
  "pseudoValues",
  "dPseudoValuesReadout",
  "reverseScanLink",
  "dPseudoValues",
  "dRightHandSide",
  "dEraseGain",
  "dDeltaWriteGain",
  "dS0Parts",
  "decayWeightsReadout",
  "decayWeightsExit",
  "dqBase",
  "decayWeightsSolve",
  "decayWeightsSolveBase",
  ...COLUMN_UNIFORM_FIELDS,
  "dxInstanceRows",
  "topEigenvector",
  "pairGram",
] as const;

/** Name of a uniform field. */
export type ChunkUniformField = typeof CHUNK_UNIFORM_FIELDS[number];

/** Storage bindings a pass may use, in binding order. */
export type ChunkBindingName = "ws" | "beta" | "lb" | "stepinfo" | "s0" | "init" | "dout" | "cw" | "out";

const DECL: Record<ChunkBindingName, string> = {
  ws: "var<storage, read> ws: array<f32>",
  beta: "var<storage, read> beta: array<f32>",
  lb: "var<storage, read> lb: array<f32>",
  stepinfo: "var<storage, read> stepinfo: array<i32>",
  s0: "var<storage, read> s0: array<f32>",
  init: "var<storage, read> init: array<f32>",
  dout: "var<storage, read> dout: array<f32>",
  cw: "var<storage, read_write> cw: array<f32>",
  out: "var<storage, read_write> out: array<f32>",
};

const BINDINGS: Record<ChunkPass, readonly ChunkBindingName[]> = {
  coef: ["ws", "beta", "lb", "stepinfo", "cw"],
  chunk_steps: ["stepinfo", "cw"],
  state_increment: ["ws", "stepinfo", "cw"],
  state_scan: ["s0", "init", "cw"],
  readout: ["ws", "stepinfo", "s0", "cw", "out"],
  base_readout_grads: ["ws", "stepinfo", "dout", "cw"],
  base_readout_grads_no_s0: ["ws", "stepinfo", "dout", "cw"],
  reverse_scan: ["cw", "out"],
  reverse_scan_no_s0: ["cw", "out"],
  query_grads: ["ws", "stepinfo", "s0", "dout", "cw", "out"],
  pair_column_grads: ["ws", "stepinfo", "dout", "cw", "out"],
  pair_column_grads_tail: ["ws", "stepinfo", "dout", "cw", "out"],
  decay_grads: ["ws", "stepinfo", "s0", "cw"],
  coef_grads: ["ws", "beta", "lb", "stepinfo", "cw", "out"],
  pair_row_grads: ["ws", "stepinfo", "cw", "out"],
  solve: ["ws", "stepinfo", "s0", "cw"],
  delta_state_scan: ["init", "cw"],
  delta_value_scan: ["s0", "init", "cw"],
  readout_dw: ["ws", "stepinfo", "dout", "cw"],
  readout_dw_tail: ["ws", "stepinfo", "dout", "cw"],
  scan_link: ["stepinfo", "cw"],
  delta_reverse_scan: ["cw", "out"],
  delta_value_reverse_scan: ["cw", "out"],
  solve_transposed: ["cw"],
  solve_input_grads: ["ws", "stepinfo", "s0", "cw", "out"],
  delta_decay_grads: ["ws", "stepinfo", "s0", "cw"],
  delta_coef_grads: ["ws", "beta", "lb", "stepinfo", "cw", "out"],
  s0_grad_parts: ["ws", "stepinfo", "cw"],
  s0_grad_sum: ["cw", "out"],
  column_coefs: ["ws", "beta", "lb", "stepinfo", "cw"],
  column_gram: ["ws", "cw"],
  column_state_scan: ["ws", "s0", "init", "cw"],
  column_readout: ["ws", "stepinfo", "s0", "cw", "out"],
  column_readout_dw: ["stepinfo", "dout", "cw"],
  column_query_dout: ["ws", "stepinfo", "dout", "cw"],
  column_reverse_scan: ["ws", "cw", "out"],
  column_dots: ["ws", "s0", "dout", "cw"],
  column_step_grads: ["ws", "dout", "cw", "out"],
  column_gram_grads: ["dout", "cw"],
  column_coef_grads: ["ws", "beta", "lb", "stepinfo", "cw", "out"],
  column_query_key_grads: ["ws", "s0", "cw", "out"],
  column_state_increment: ["ws", "cw"],
  column_increment_scan: ["s0", "init", "cw"],
  column_gradient_scan: ["cw", "out"],
  window_pair_gram: ["ws", "stepinfo", "cw"],
  window_solve: ["ws", "stepinfo", "s0", "cw"],
  window_transition: ["ws", "stepinfo", "s0", "cw"],
  window_pseudo_values: ["cw"],
  window_readout: ["ws", "stepinfo", "s0", "cw", "out"],
  window_readout_dw: ["ws", "stepinfo", "dout", "cw"],
  window_scan_link: ["stepinfo", "cw"],
  window_row_grads: ["ws", "stepinfo", "dout", "cw"],
  window_solve_transposed: ["stepinfo", "cw"],
  window_query_grads: ["ws", "stepinfo", "s0", "dout", "cw", "out"],
  window_solve_input_grads: ["ws", "stepinfo", "s0", "cw"],
  window_s0_grad_parts: ["ws", "stepinfo", "cw"],
  window_pair_gather: ["ws", "stepinfo", "cw", "out"],
};

/** Passes whose shader holds the rule's `coef()` and `coef_back()`. */
const COEF_PASSES: ReadonlySet<ChunkPass> = new Set<ChunkPass>([
  "coef",
  "coef_grads",
  "delta_coef_grads",
  "column_coefs",
  "column_coef_grads",
]);

/**
 * The storage bindings of a pass, in binding order (the uniform block follows them). Rules without
 * a step statistic read no features in `coef`, `coef_grads` and `pair_row_grads`, nor falcon3's `delta_coef_grads` where
 * {@linkcode sharesWindowDots}; the tiled `column_readout` ({@linkcode COLUMN_READOUT_TILED}) reads no step table.
 */
export function chunkBindings(pass: ChunkPass, config: RuleConfig): readonly ChunkBindingName[] {
  const list = BINDINGS[pass];
  // the tiled column_readout reads the chunk's start counts, not the step table
  if (pass === "column_readout" && COLUMN_READOUT_TILED) return list.filter((b) => b !== "stepinfo");
  // falcon3's delta_coef_grads reads the statistic coef stored, not the pair rows (WINDOW_COEF_SHARED_DOTS)
  if (pass === "delta_coef_grads" && sharesWindowDots(config)) return list.filter((b) => b !== "ws");
  if (statKind(config.rule) !== "none") return list;
  if (pass === "pair_row_grads") return ["cw", "out"];
  if (pass === "coef" || pass === "coef_grads" || pass === "delta_coef_grads") {
    return list.filter((b) => b !== "ws");
  }
  return list;
}

/**
 * The chunk kernels a rule runs: its catalog family (`src/rules/catalog.ts`), except that falcon3a
 * (window family, additive write) runs the additive passes with `B_t` pairs per step; the window
 * kernels are falcon3's solve over instance rows. An unknown rule is an `UnknownRuleError`.
 */
export function chunkKernelFamily(config: RuleConfig): RuleFamily {
  const family = ruleFamily(config.rule);
  switch (family) {
    case "additive":
    case "delta":
    case "per-column":
      return family;
    case "window":
      return isDeltaRule(config.rule) ? "window" : "additive";
    default:
      throw new TypeError(`unknown rule family "${family satisfies never}"`);
  }
}

/** Additive rules with scalar coefficients: chunk kernels without a solve. */
export function isAdditiveChunkRule(config: RuleConfig): boolean {
  return chunkKernelFamily(config) === "additive";
}

/** Delta rules with scalar coefficients and no window: chunk kernels with the `(I + A)^-1` solve. */
export function isDeltaChunkRule(config: RuleConfig): boolean {
  return chunkKernelFamily(config) === "delta";
}

/** Per-column rules (falcon2, falcon2a): chunk kernels of `fast_weight_chunk_per_column.ts`, one sub-problem per value column. */
export function isPerColumnChunkRule(config: RuleConfig): boolean {
  return chunkKernelFamily(config) === "per-column";
}

/**
 * The regression window rule (falcon3): a delta rule over the chunk's instance rows `(s, o)`, `W` per
 * step, with the `(I + A)^-1` solve (`fast_weight_chunk_window_delta.ts`).
 */
export function isWindowDeltaChunkRule(config: RuleConfig): boolean {
  return chunkKernelFamily(config) === "window";
}

/** Rules whose chunk kernels solve for pseudo-values (delta rules and falcon3): they keep `a_t` and `Pp_t`. */
export function isSolveChunkRule(config: RuleConfig): boolean {
  return isDeltaChunkRule(config) || isWindowDeltaChunkRule(config);
}

/** Rules the chunk kernels run: every rule of the catalog (an unknown one is an `UnknownRuleError`). */
export function isChunkRule(config: RuleConfig): boolean {
  chunkKernelFamily(config);
  return true;
}

/** Workgroup floats of the kernels with tiles (for picking `R`, `RC`, `RP` and checking `C`). */
export function chunkSharedFloats(
  config: RuleConfig,
  s: Pick<ChunkShape, "dk" | "dv" | "C" | "R" | "RC" | "RP">,
) {
  const pad = windowSlots(config) - 1;
  if (isPerColumnChunkRule(config)) {
    // the column scans (state column, step arrays) and column_step_grads (step arrays, RP rows of Z)
    const rows = 4 * s.C + s.R * s.C;
    const cols = 4 * s.C + s.RC * s.C;
    // the staged column_gram and column_readout, where they run
    const gram = COLUMN_GRAM_STAGED ? columnGramLayout(s.C).stage : 0;
    const readout = COLUMN_READOUT_TILED ? columnReadoutLayout(s).floats : 0;
    // falcon2a's column_state_increment, where it runs
    const increment = splitsColumnScan(config) ? columnIncrementLayout(s).floats : 0;
    return {
      local: Math.max(2 * s.dk + 12 * s.C, gram, readout, increment),
      rows,
      cols,
      pairs: 12 * s.C + s.RP * s.C,
    };
  }
  const steps = (isSolveChunkRule(config) ? 6 : 4) * s.C;
  // the log-decay gradient (decay_grads, delta_decay_grads): its tile sums, chain sums and step arrays
  const decay = decayGradLayout(s.C).floats;
  if (isWindowDeltaChunkRule(config)) {
    // falcon3: tiles over instance rows (W per step); window_readout/window_query_grads: R steps' decays and pair scores; window_row_grads: RC steps of W rows
    // (their RC + PAD pairs' q.x, the rows' dO.w and G w, the pairs' G^T x, the decays); window_solve_input_grads: RP
    // steps of W rows against a panel of PS steps (two score panels, their pair sums, the dx rows);
    // window_solve/window_solve_transposed: W staged rows of A (and window_solve_transposed's W partial sums of every invocation)
    // (the sweep window_solve is chosen only where its windowSweepFloats fit: ChunkShape.WS)
    const nw = pad + 1;
    const cw = s.C * nw;
    const ps = windowPanelSteps(nw, s.C);
    return {
      local: steps + Math.max(nw * (cw + CHUNK_WG), decay),
      rows: steps + s.R * (2 * s.C + pad),
      cols: steps + s.C + s.RC * s.C + (s.RC + pad) * (s.C + s.dv) + s.RC * nw * (s.C + s.dk + 1),
      pairs: steps + s.RP * (ps + 1) + s.RP * nw * (2 * ps * nw + ps + pad + s.dk + 2),
    };
  }
  return {
    // the delta rules' solve holds A, T and its staged operands
    local: steps + Math.max(s.C + pad, decay, isDeltaChunkRule(config) ? solveLayout(s).floats : 0),
    rows: steps + rowsFloats(s, pad),
    // pair_column_grads (readout_dw, the delta rules' other variant, needs less)
    cols: steps + pairColumnLayout(s, isSolveChunkRule(config) ? "delta" : "additive").floats,
    // solve_input_grads (the delta rules; the additive rules have no such pass)
    pairs: steps + solveInputGradsLayout(s).floats,
  };
}

/** Rows of the chunk per workgroup of the delta rules' `solve_input_grads` at most: the whole chunk at `C <= 64`. */
export const SOLVE_INPUT_GRADS_ROWS_MAX = 64;

/**
 * Workgroup arrays of the delta rules' `solve_input_grads` kernel (`fast_weight_chunk_delta.ts`), in floats,
 * besides the chunk's step arrays: the pair weights `scxT` (`scxRows x RP4`: per chunk column `kk`, the
 * workgroup's rows; depth rows rounded up to whole slices of `STAGE_DEPTH` steps), the rows' `d a` pair sums
 * (`RP`) and the staging array `stage` (the largest of: a slice of the `x`, `dR`, `W` operands of the pair
 * products, the workgroup's rows of them too unless `RP = C` (`mirror`: one operand serves both sides, and
 * `F` is mirrored in workgroup memory instead of a third product); of `x` rows for `dx`; of the masked `dR`
 * rows and the bases; the pair sums' parts; the `x.base^T dR` and `dR.y` parts). `floats` is their total.
 */
export function solveInputGradsLayout(s: Pick<ChunkShape, "dk" | "dv" | "C" | "RP">) {
  const [C4, RP4, DK4] = [s.C, s.RP, s.dk].map(roundUp4);
  const mirror = s.RP === s.C;
  const transposed = (width: number) => ({ width, along: "depth" as const });
  const chunk = [transposed(C4), transposed(C4), transposed(C4)];
  const pairOperands = mirror ? chunk : [...chunk, transposed(RP4), transposed(RP4), transposed(RP4)];
  // the shared loop of dx and base_j dR_j runs over max(C, Dv) depth rows
  const scxRows = Math.ceil(Math.max(s.C, s.dv) / STAGE_DEPTH) * STAGE_DEPTH;
  const rowParts = Math.max(1, Math.floor(STAGED_WG / s.RP));
  const stage = roundUp4(Math.max(
    stagedFloats(pairOperands),
    stagedFloats([{ width: DK4, along: "width" }, transposed(RP4), transposed(DK4)]),
    RP4 * (C4 / 4),
    RP4 * (DK4 / 4) + s.RP * rowParts,
  ));
  return { mirror, scxRows, rowParts, stage, floats: stage + scxRows * RP4 + s.RP };
}

/** Steps of the diagonal blocks of `A` the delta rules' `solve` inverts by substitution before merging them. */
export const SOLVE_BLOCK = 16;

/**
 * Workgroup arrays of the delta rules' `solve` kernel (`fast_weight_chunk_delta.ts`), in floats, besides the
 * chunk's step arrays: `triangle`, `A` and then `T = (I + A)^-1` of the chunk padded to `CT` steps (whole
 * {@linkcode SOLVE_BLOCK} blocks), column `k` from row `4 floor(k / 4)` (its vec4 rows at and below the diagonal,
 * `inverseVec4` of them in all; `T`'s block rows overwrite `A`'s as they are formed), and `stage`, the largest of:
 * a slice of `x` for `A`; the diagonal blocks of `A`, then the merges' sums `A_ik T_kj`; a slice of the
 * right-hand sides `[U | V]`; a slice of `x` and `S0` for the `S0` term. `floats` is their total.
 */
export function solveLayout(s: Pick<ChunkShape, "dk" | "dv" | "C">) {
  const CT = Math.ceil(s.C / SOLVE_BLOCK) * SOLVE_BLOCK;
  const n = CT / 4;
  const inverseVec4 = 2 * n * (n + 1);
  const [C4, DK4, DV4] = [s.C, s.dk, s.dv].map(roundUp4);
  const stage = roundUp4(Math.max(
    CT * SOLVE_BLOCK,
    stagedFloats([{ width: DV4 + DK4, along: "width" }]),
    stagedFloats([{ width: C4, along: "depth" }, { width: DV4, along: "width" }]),
  ));
  return { CT, inverseVec4, stage, floats: stage + 4 * inverseVec4 };
}

/** The variants of the `pair_column_grads` kernel: additive rules, delta rules, and the delta rules' `readout_dw` (no exit term). */
export type PairColumnVariant = "additive" | "delta" | "deltaNoExit";

/** Pair columns per workgroup of `pair_column_grads` at most: at `C = Dk = Dv = 64` its 256 invocations then hold one 4 x 4 block of every product. */
export const PAIR_COLUMN_TILE_MAX = 64;

/**
 * The pair-column passes: `pair_column_grads` and `readout_dw` (the main pipelines), and their tails (which run
 * after them where `ChunkShape.RT` is not 0; `chunkWork` is 0 otherwise).
 */
export type PairColumnPass =
  | "pair_column_grads"
  | "pair_column_grads_tail"
  | "readout_dw"
  | "readout_dw_tail";

/** Whether a pass is a pair-column tail pipeline. */
export function isPairColumnTail(pass: ChunkPass): boolean {
  return pass === "pair_column_grads_tail" || pass === "readout_dw_tail";
}

/**
 * The tail tile of `cols` pair columns in tiles of `RC` (`ChunkShape.RT`): the smallest power of two that holds
 * the columns past the last whole tile, or 0 where there are none or it would be `RC` itself (a partial last tile
 * of the main pipeline then costs the same). Each workgroup of a pair-column kernel computes every 4 x 4 block
 * of its tile whichever columns exist, so the `C + pad = 67` columns of falcon3a at `C = 64` would take a second
 * 64-column workgroup per chunk for 3 columns; the tail takes them in a workgroup of `RT` columns (and fewer
 * invocations, {@linkcode pairColumnInvocations}).
 */
export function pairColumnTail(cols: number, RC: number): number {
  const rest = cols % RC;
  if (rest === 0) return 0;
  let rt = 1;
  while (rt < rest) rt *= 2;
  return rt < RC ? rt : 0;
}

/**
 * How a pair-column pass (`pair_column_grads`, `readout_dw` or their tails) tiles the `C + pad` pair columns of
 * a chunk: `RC` columns per workgroup, `tiles` workgroups per chunk, the first from chunk column `first`. With a
 * tail (`s.RT > 0`), the main pipeline takes the whole `s.RC` tiles and the tail one tile of `s.RT` from the end
 * of the last; without one, the main pipeline takes every column (a partial last tile) and the tail none.
 */
export function pairColumnTiling(
  pass: PairColumnPass,
  s: Pick<ChunkShape, "C" | "RC" | "RT">,
  pad: number,
): { RC: number; tiles: number; first: number } {
  const cols = s.C + pad;
  const main = Math.floor(cols / s.RC) * s.RC;
  if (isPairColumnTail(pass)) {
    return { RC: s.RT, tiles: s.RT ? Math.ceil((cols - main) / s.RT) : 0, first: main };
  }
  return { RC: s.RC, tiles: s.RT ? main / s.RC : Math.ceil(cols / s.RC), first: 0 };
}

/**
 * Invocations of a pair-column workgroup of `RC` columns: {@linkcode STAGED_WG} for the main pipelines; for a
 * tail, the fewest (a power of two from {@linkcode CHUNK_WG}) that hold each 4 x 4 block of its largest product
 * once (`C x RC` scores, `RC x Dk` and `RC x Dv` gradients): at `RC = 4`, `C = Dk = Dv = 64` 64 invocations for
 * 16 blocks, where 256 would compute each block 16 times over.
 */
export function pairColumnInvocations(
  s: Pick<ChunkShape, "dk" | "dv" | "C">,
  RC: number,
  tail: boolean,
): number {
  if (!tail) return STAGED_WG;
  const [C4, RC4, DK4, DV4] = [s.C, RC, s.dk, s.dv].map(roundUp4);
  const blocks = (RC4 * Math.max(C4, DK4, DV4)) / 16;
  let n = CHUNK_WG;
  while (n < blocks && n < STAGED_WG) n *= 2;
  return n;
}

/**
 * Workgroup arrays of the `pair_column_grads` kernel (`fast_weight_chunk_additive.ts`), in floats, besides
 * the chunk's step arrays: the readout weights `wq`, `wd` (`weightRows x RC4` each, rows rounded up to whole
 * slices of `STAGE_DEPTH` steps; `readout_dw` keeps only `wd`), the exit weights `M[e, j]` and `x_j^T G y_j` (`RC`
 * each) and the staging array `stage` (the largest of: a slice of q, dO, x, y for the products; of y, G^T,
 * x, G for the exit products; of q, dO for the sums over steps; the `x_j^T G y_j` parts; the `d g_s`
 * parts, split over the kernel's `invocations`). `floats` is their total.
 */
export function pairColumnLayout(
  s: Pick<ChunkShape, "dk" | "dv" | "C" | "RC">,
  variant: PairColumnVariant,
  invocations = STAGED_WG,
) {
  const exit = variant !== "deltaNoExit";
  const [C4, RC4, DK4, DV4] = [s.C, s.RC, s.dk, s.dv].map(roundUp4);
  const weightRows = Math.ceil(s.C / STAGE_DEPTH) * STAGE_DEPTH;
  // the d g_s sums: one per pair column, split over the invocations
  const gainParts = Math.max(1, Math.floor(invocations / s.RC));
  // the staged operands of the kernel's three loops (it checks its own against these)
  const transposed = (width: number) => ({ width, along: "depth" as const });
  const rows = (width: number) => ({ width, along: "width" as const });
  const stage = roundUp4(Math.max(
    stagedFloats([transposed(C4), transposed(RC4), transposed(C4), transposed(RC4)]),
    exit ? stagedFloats([transposed(RC4), transposed(DK4), transposed(RC4), rows(DV4)]) : 0,
    stagedFloats(exit ? [rows(DK4), rows(DV4)] : [rows(DV4)]),
    exit ? RC4 * (DK4 / 4) : 0,
    variant === "additive" ? s.RC * gainParts : 0,
  ));
  const weights = weightRows * RC4;
  return {
    weightRows,
    stage,
    gainParts,
    floats: stage + (exit ? 2 * weights + 2 * s.RC : weights),
  };
}

/**
 * The form of the `readout` and `query_grads` kernels (additive and delta rules) for a rule whose pair columns
 * start `pad` steps before the chunk (its window's pad, `W - 1`):
 * - `staged` (pad-free rules): whole-chunk staged-tile kernels (`stagedRowsKernel` of
 *   `fast_weight_chunk_additive.ts`; up to {@linkcode ROWS_TILE_MAX} rows, {@linkcode rowsLayout});
 * - `direct` (a window's pad, falcon3a): direct-load row kernels (`directRowsKernel`; up to
 *   {@linkcode DIRECT_ROWS_TILE_MAX} rows of {@linkcode CHUNK_WG} invocations, their operands read from storage
 *   4 entries at a time, the scores `R x (C + pad)` floats).
 *
 * Measured on the H200 (8 x 4096 x 8 x 64, ms per kernel of one forward + backward, readout / query_grads): the
 * staged kernels took the pad-free rules from 0.84 / 0.97 (direct) to 0.54 / 0.54, but falcon3a from 0.98 / 1.12
 * (direct) to 1.25 / 1.23. With falcon3a's pad the staged form scored the 3 pair columns past 64 (of 67) one per
 * invocation from storage, and ran its intra product over every pair column: the causal skip of the pad-free
 * whole-chunk tile (a lower triangular `M^T`, each block skipping the slices past its rows) does not hold there.
 */
export function rowsKernelForm(pad: number): "staged" | "direct" {
  return pad > 0 ? "direct" : "staged";
}

/** Rows of the chunk per workgroup of the staged `readout` and `query_grads` at most: the whole chunk at `C <= 64`. */
export const ROWS_TILE_MAX = 64;

/** Rows of the chunk per workgroup of the direct-load `readout` and `query_grads` at most ({@linkcode rowsKernelForm}). */
export const DIRECT_ROWS_TILE_MAX = 16;

/** Rows per workgroup of `readout` and `query_grads` at most for a rule of window pad `pad` ({@linkcode rowsKernelForm}). */
export function rowsTileMax(pad: number): number {
  return rowsKernelForm(pad) === "staged" ? ROWS_TILE_MAX : DIRECT_ROWS_TILE_MAX;
}

/**
 * Workgroup floats of the `readout` and `query_grads` kernels besides the chunk's step arrays, in the form of
 * {@linkcode rowsKernelForm}: the staged kernels' {@linkcode rowsLayout}, the direct kernels' scores (`R` rows of
 * `C + pad` pair columns).
 */
export function rowsFloats(s: Pick<ChunkShape, "dk" | "dv" | "C" | "R">, pad: number): number {
  return rowsKernelForm(pad) === "staged" ? rowsLayout(s).floats : s.R * (s.C + pad);
}

/**
 * Workgroup arrays and tiling of the staged `readout` and `query_grads` kernels of the pad-free additive and delta
 * rules (`stagedRowsKernel` of `fast_weight_chunk_additive.ts`, {@linkcode rowsKernelForm}), in floats, besides the
 * chunk's step arrays: the masked scores `scT` (`scoreRows x R4`: per pair column, the workgroup's `R` rows; depth
 * rows rounded up to whole slices of `STAGE_DEPTH` pair columns) and the staging array `stage` (the largest of: a
 * slice of the pair columns, the rows and a base for the scores and the inter-chunk part, readout's bases along
 * their rows, query_grads' across; of the values or keys for the intra part). The scores' 4 x 4 blocks take
 * `scoreColumns` pair columns (the chunk's `C`, rounded up to 4). `invocations` is the fewest (a power of two from
 * {@linkcode CHUNK_WG} up to {@linkcode STAGED_WG}) that hold a block of each product once.
 */
export function rowsLayout(s: Pick<ChunkShape, "dk" | "dv" | "C" | "R">) {
  const [R4, scoreColumns, DK4, DV4] = [s.R, s.C, s.dk, s.dv].map(roundUp4);
  const blocks = (R4 / 4) * (Math.max(scoreColumns, DK4, DV4) / 4);
  let invocations = CHUNK_WG;
  while (invocations < blocks && invocations < STAGED_WG) invocations *= 2;
  const scoreRows = Math.ceil(s.C / STAGE_DEPTH) * STAGE_DEPTH;
  const transposed = (width: number) => ({ width, along: "depth" as const });
  const rows = (width: number) => ({ width, along: "width" as const });
  const stage = roundUp4(Math.max(
    stagedFloats([transposed(scoreColumns), transposed(R4), rows(DV4)]),
    stagedFloats([transposed(scoreColumns), transposed(R4), transposed(DK4)]),
    stagedFloats([rows(Math.max(DK4, DV4))]),
  ));
  return { invocations, scoreColumns, scoreRows, stage, floats: stage + scoreRows * R4 };
}

/**
 * The form of falcon3's `window_readout` scores `q_t . x_j` (`R` steps x the chunk's `CP = C + W - 1` pairs per
 * workgroup): `true`, only the pairs up to the window of the workgroup's last step (`min(len, r0 + R) + PAD`, the pairs
 * its steps read: the later ones meet `Gam = 0`), at `C = 64`, `R = 16` 5, 9, 13 and 17 blocks of 4 pairs instead of
 * 17 each (one pass of the 64 invocations instead of two for all but the last workgroup); `false`, every pair (the
 * earlier form, the same WGSL).
 */
export const WINDOW_READOUT_CAUSAL_PAIRS: boolean = true;

/**
 * Whether falcon3's `window_readout` runs its three products as staged register tiles (`stagedLoop`: slices of 8
 * depth rows of each operand in workgroup memory, the next slice's loads in flight while one is accumulated):
 * `true`, the scores `q_t . x_j` over the keys, the inter-chunk part `q_t^T S_in` and `q_t^T S0` over the keys, and the
 * intra-chunk part over the chunk's instance rows (`Gam`-weighted scores times the pseudo-values `W`), each operand
 * entry loaded once per workgroup instead of once per invocation that reads it (the earlier form read every
 * operand from storage inside its loops, 4 loads per 16 products); `false`, the form
 * {@linkcode WINDOW_READOUT_CAUSAL_PAIRS} says (the earlier WGSL).
 */
export const WINDOW_READOUT_STAGED: boolean = true;

/**
 * The form of falcon3's `window_transition` (`K = [no start] exp(P_e) I - sum_r Gam[e, t_r] x_(j_r) V_r^T`, `Bv` the same
 * with `U0`): `true`, the sum runs over the chunk's `C + W - 1` PAIRS, `x_j` times the decayed sum of the `W` rows of
 * pair `j` (`sum_o Gam[e, j + o] V_(j + o, o)`, 4 columns at a time): a quarter of the loop trips and of the `x` loads,
 * half the products; `false`, over the `C W` instance rows, each row's `x_j` and `V_r` read (the earlier form, the
 * same WGSL).
 */
export const WINDOW_TRANSITION_PAIRS: boolean = true;

/**
 * Whether falcon3's `window_transition` is a staged register-tile product ({@linkcode windowTransitionStaged}): `true`,
 * one workgroup of `STAGED_WG` invocations per `(b, h, chunk, K | Bv)`, a 4 x 4 block of the output per invocation
 * (at `Dk = Dv = 64`), fed from slices of 8 pairs of `x` and of the folded rows `z_p = sum_o Gam[e, t] F_(t, o)`
 * staged in workgroup memory, so each pair's `W` rows are read and folded once per workgroup, not once per 4 output
 * rows: at 8x4096x8x64 (C = 64) the earlier forms' 32768 workgroups of 64 invocations each walked every pair of its
 * chunk with 4 + 4 W scalar storage loads per 16 products, and took 1.9 ms at C = 16, 32 and 64 alike (the same loads
 * per token: bound by them, not by the loop's trips); `false`, the form {@linkcode WINDOW_TRANSITION_PAIRS} says (the
 * earlier WGSL). Shapes whose staged arrays pass {@linkcode WINDOW_STAGED_FLOATS} keep the earlier form.
 */
export const WINDOW_TRANSITION_STAGED: boolean = true;

/**
 * Whether falcon3's `window_pseudo_values` (`W = U0 - V S_in`) is a staged register-tile product: `true`, one
 * workgroup of `STAGED_WG` invocations per `(b, h, chunk, panel of` {@linkcode windowPseudoValuePanelRows} `instance
 * rows)`, a 4 x 4 block of `W` per invocation (at `Dv = 64`), `V` and `S_in` staged 8 keys at a time (each entry loaded
 * once per workgroup); `false`, one 4 x 4 block per invocation of `CHUNK_WG` with every `V` and `S_in` entry loaded
 * from storage in its loop (the earlier WGSL).
 */
export const WINDOW_PSEUDO_VALUES_STAGED: boolean = true;

/** Instance rows per workgroup of the staged `window_pseudo_values` (the chunk's `rows`: 64 at most, a multiple of 4). */
export function windowPseudoValuePanelRows(rows: number): number {
  return Math.min(64, roundUp4(rows));
}

/**
 * Whether falcon3's `window_pseudo_values` runs its staged form at shape `s` with `rows` instance rows per chunk
 * ({@linkcode WINDOW_PSEUDO_VALUES_STAGED}; its slice of `V` and `S_in` within {@linkcode WINDOW_STAGED_FLOATS}).
 */
export function windowPseudoValuesStaged(s: Pick<ChunkShape, "dv">, rows: number): boolean {
  const floats = stagedFloats([
    { width: windowPseudoValuePanelRows(rows), along: "depth" },
    { width: roundUp4(s.dv), along: "width" },
  ]);
  return WINDOW_PSEUDO_VALUES_STAGED && floats <= WINDOW_STAGED_FLOATS;
}

/**
 * Workgroup floats the staged `window_transition` and `window_readout` may take ({@linkcode WINDOW_TRANSITION_STAGED},
 * {@linkcode WINDOW_READOUT_STAGED}; 16 KiB, WebGPU's least `maxComputeWorkgroupStorageSize`): a shape past it runs
 * the earlier form.
 */
export const WINDOW_STAGED_FLOATS = 4096;

/**
 * Workgroup floats of the staged `window_transition` ({@linkcode WINDOW_TRANSITION_STAGED}): the chunk's step arrays
 * (6 C), the decay weights `Gam[e, t]` (C) and one slice of `x` and of the folded rows (`max(Dk, Dv)` columns).
 */
export function windowTransitionStagedFloats(s: Pick<ChunkShape, "dk" | "dv" | "C">): number {
  return 7 * s.C + stagedFloats([
    { width: roundUp4(s.dk), along: "width" },
    { width: Math.max(roundUp4(s.dk), roundUp4(s.dv)), along: "width" },
  ]);
}

/** Whether falcon3's `window_transition` runs its staged form at shape `s` ({@linkcode WINDOW_TRANSITION_STAGED}). */
export function windowTransitionStaged(s: Pick<ChunkShape, "dk" | "dv" | "C">): boolean {
  return WINDOW_TRANSITION_STAGED && windowTransitionStagedFloats(s) <= WINDOW_STAGED_FLOATS;
}

/**
 * Instance rows per workgroup that falcon3's `window_row_grads` and `window_solve_input_grads` aim at (whole steps): 16 rows make
 * 4 x 4 blocks of rows x 64 columns one per invocation, with small workgroup arrays.
 */
export const WINDOW_TILE_ROWS = 16;

/**
 * Steps of the column panels falcon3's `window_solve_input_grads` walks the chunk in (about 64 instance rows, at most the
 * chunk): its workgroup arrays grow with the panel, not with the chunk.
 */
export function windowPanelSteps(nw: number, C: number): number {
  return Math.max(1, Math.min(C, Math.floor(64 / nw)));
}

/** Forms of falcon3's forward `window_solve` ({@linkcode WINDOW_SOLVE}). */
export type WindowSolveForm = "sweep" | "sweep_prefetch" | "sweep_shared" | "serial";

/**
 * The form of falcon3's forward `window_solve` (`fast_weight_chunk_window_delta.ts`). Both sweeps run
 * {@linkcode WINDOW_SOLVE_WG} invocations per `(b, h, chunk, WS columns of U0 | V)` and solve step by step,
 * right-looking (each solved step updates every later row of its segment, one barrier per step):
 * - `"sweep_prefetch"` (default): as `"sweep"` with {@linkcode WINDOW_SOLVE_PREFETCH_COLUMNS} columns per workgroup
 *   (4 times the columns share each barrier, pivot row, decay factor and pair Gram column), and each pivot pair's
 *   Gram column loaded from storage a step before the step that stores it (`"sweep"` waits on the load at the
 *   barrier of the same step, every step);
 * - `"sweep"`: every invocation keeps 4 columns of its rows in registers (`WS / 4` invocations per row)
 *   and publishes a step's rows to workgroup memory once they are final (the default before `"sweep_prefetch"`);
 * - `"sweep_shared"`: the columns of every row in workgroup memory, one column per invocation and item;
 * - `"serial"`: one invocation per column that re-reads the earlier solved rows from the workspace (the kernel
 *   before the sweeps, its WGSL unchanged).
 * A shape whose sweep does not fit ({@linkcode windowSolveColumns} 0) runs the serial one.
 */
export const WINDOW_SOLVE: WindowSolveForm = "sweep_prefetch";

/**
 * Columns of `U0 | V` per workgroup of the sweep `window_solve` at most, a power of two (halved until its arrays
 * fit; `"sweep"`: at least 4, and `C W WS / 1024` rows of 4 columns in each invocation's registers, 16 at most).
 */
export const WINDOW_SOLVE_COLUMNS = 8;

/**
 * Columns of `U0 | V` per workgroup of the `"sweep_prefetch"` `window_solve` at most (halved until its arrays and
 * register rows fit, as {@linkcode WINDOW_SOLVE_COLUMNS}): 16 at `C = 64`, `Dk + Dv = 128` is 8 workgroups per chunk,
 * 4 register rows per invocation (on the H200, 2026-12-04 03:10 UTC, `window_solve` 4.77 ms against 5.11 at 32
 * columns, 8 register rows; docs/performance.md "Tenth round").
 */
export const WINDOW_SOLVE_PREFETCH_COLUMNS = 16;

/**
 * Whether the `"sweep_prefetch"` `window_solve` takes each later row's decay factor `a_(t_r) exp(Pp_(t_r) - P_t)` of
 * step `t` from a workgroup array of the chunk's steps (`fac`, two steps: `C` invocations compute step `t + 1`'s
 * factors, one exp each, while step `t`'s updates run; 0 where the row's step is not later in `t`'s segment):
 * `true`, a row update reads one float there instead of an exp of its own (8 per invocation and step at 32 columns, 4 at 16)
 * and each register row holds 3 fewer values (its segment, gain and log decay: register pressure, so occupancy);
 * `false`, each invocation computes the factors of its rows (the earlier WGSL).
 */
export const WINDOW_SOLVE_STEP_FACTORS: boolean = true;

/** Invocations of the sweep `window_solve`. */
export const WINDOW_SOLVE_WG = 256;

/** Rows of 4 columns each invocation of the `"sweep"` `window_solve` holds in registers at most. */
export const WINDOW_SOLVE_REGISTER_ROWS = 16;

/**
 * Workgroup floats of the sweep `window_solve` of `form` with `sc` columns: the chunk's step arrays (6 C), `W + 1`
 * pivot columns of the pair Gram matrix (`CP = C + W - 1` each), and `"sweep"`: the pivot rows of two steps
 * (`2 W sc`; `"sweep_prefetch"` the same); `"sweep_shared"`: the columns (`C W x sc`) and the later rows' decay factors
 * of two steps (`2 C W`).
 */
export function windowSweepFloats(
  form: Exclude<WindowSolveForm, "serial">,
  nw: number,
  C: number,
  sc: number,
): number {
  const shared = 6 * C + (nw + 1) * (C + nw - 1);
  return shared + (form !== "sweep_shared" ? 2 * nw * sc : C * nw * sc + 2 * C * nw);
}

/** Rows of 4 columns per invocation of the `"sweep"` `window_solve` with `sc` columns per workgroup. */
export function windowSweepRegisterRows(nw: number, C: number, sc: number): number {
  return Math.ceil((C * nw) / (WINDOW_SOLVE_WG / (sc / 4)));
}

/**
 * Columns per workgroup of falcon3's sweep `window_solve` at chunk size `C`, window `nw` and `limit` workgroup
 * floats: {@linkcode WINDOW_SOLVE_COLUMNS}, halved until {@linkcode windowSweepFloats} (and for `"sweep"` its
 * register rows) fit; 0 (the serial form) where `WINDOW_SOLVE` is `"serial"`, nothing fits, or the chunk has more
 * pairs than the sweep has invocations.
 */
export function windowSolveColumns(nw: number, C: number, limit: number): number {
  const form = WINDOW_SOLVE as WindowSolveForm;
  if (form === "serial" || C + nw - 1 > WINDOW_SOLVE_WG) return 0;
  // the register sweeps hold 4 columns per invocation
  const inRegisters = form !== "sweep_shared";
  const least = inRegisters ? 4 : 1;
  const top = form === "sweep_prefetch" ? WINDOW_SOLVE_PREFETCH_COLUMNS : WINDOW_SOLVE_COLUMNS;
  for (let sc = top; sc >= least; sc = Math.floor(sc / 2)) {
    const registers = !inRegisters || windowSweepRegisterRows(nw, C, sc) <= WINDOW_SOLVE_REGISTER_ROWS;
    if (registers && windowSweepFloats(form, nw, C, sc) <= limit) return sc;
  }
  return 0;
}

/** Pipeline key of a chunk kernel. */
export function chunkKey(pass: ChunkPass, config: RuleConfig, s: ChunkShape, heads: HeadConstants): string {
  return [
    `fastweight_chunk_${pass}_f32`,
    config.rule,
    config.coupling,
    config.eps,
    config.epsGamma,
    windowSlots(config),
    s.H,
    s.dk,
    s.dv,
    s.C,
    s.R,
    s.RC,
    s.RT,
    s.RP,
    s.CS,
    s.CX,
    s.SW,
    s.WS,
    heads.mambaA.join(","),
    heads.retnetG.join(","),
  ].join(":");
}

/**
 * Rows and columns of the output block one workgroup of a staged product computes (the delta rules'
 * `pseudo_values`, `solve_transposed`): 8 x 8 invocations, a 4 x 4 register tile each.
 */
export const STAGED_BLOCK = 32;

/** Workgroups per chunk of a staged product with a `rows x cols` output: its {@linkcode STAGED_BLOCK} blocks. */
export function stagedBlocks(rows: number, cols: number): number {
  return Math.ceil(rows / STAGED_BLOCK) * Math.ceil(cols / STAGED_BLOCK);
}

/** Workgroups per chunk of a pass that computes a `rows x cols` matrix as 4 x 4 blocks, one per invocation. */
export function stateTiles(rows: number, cols: number): number {
  return Math.ceil((Math.ceil(rows / 4) * Math.ceil(cols / 4)) / CHUNK_WG);
}

/**
 * WGSL of one 4 x 4 block of a `[Dk, Dv]` state per invocation of a {@linkcode stateTiles} pass: block `tile WG + lid`
 * at row `i0` and column `column` (a WGSL name, `cb0` unless given), `body` run where the block exists.
 */
export function stateTileBlock(body: string, column = "cb0"): string {
  return `let bk = tile * WG + lid;
  let nbc = (DV + 3u) / 4u;
  if (bk < ((DK + 3u) / 4u) * nbc) {
    let i0 = (bk / nbc) * 4u;
    let ${column} = (bk % nbc) * 4u;
    ${body}
  }`;
}

/** Workgroups per chunk of the delta rules' `transition` pass: 4 x 4 blocks of `K [Dk, Dk]` then `D [Dk, Dv]`. */
export function transitionTiles(dk: number, dv: number): number {
  return Math.ceil((Math.ceil(dk / 4) * (Math.ceil(dk / 4) + Math.ceil(dv / 4))) / CHUNK_WG);
}

/**
 * Workgroups per chunk of falcon3's `window_pair_gram`: the 4 x 4 blocks on and below the diagonal of the
 * `CP x CP` pair Gram matrix (`CP = C + pad`), one per invocation (each also stores its mirror).
 */
export function pairGramTiles(C: number, pad: number): number {
  const nb = Math.ceil((C + pad) / 4);
  return Math.ceil((nb * (nb + 1)) / 2 / CHUNK_WG);
}

/**
 * Value columns per workgroup of falcon3's `window_solve_transposed` (`CHUNK_WG / SOLVE_TRANSPOSED_COLUMNS` invocations share a
 * column, each summing a stride of the later rows).
 */
export const SOLVE_TRANSPOSED_COLUMNS = 16;

/**
 * Entries per pair row that `pair_row_grads` updates: a pair's `dx` and `dy` rows (`Dk + Dv`) with a window pad (the
 * earlier chunks' gradients of its pad pairs reach both), its `dx` row alone without one (only the step statistic's
 * gradient is added; the `dy` half was a read and a store of the same value: 0.32 ms of the H200's fwd+bwd at
 * 8x4096x8x64 for mamba2, which has neither).
 */
export function pairRowEntries(s: Pick<ChunkShape, "dk" | "dv">, pad: number): number {
  return pad > 0 ? s.dk + s.dv : s.dk;
}

/** Number of workgroups (or, for the flat passes, invocations) a pass needs (0: a tail pass of a shape without one). */
export function chunkWork(pass: ChunkPass, s: ChunkShape, pad: number, B: number, T: number): number {
  const BH = B * s.H;
  const nck = Math.ceil(T / s.C);
  const flat = (n: number) => Math.ceil(n / CHUNK_WG);
  switch (pass) {
    case "coef":
    case "coef_grads":
    case "delta_coef_grads":
      return flat(BH * T);
    case "chunk_steps":
      return flat(BH * nck);
    case "decay_grads":
    case "delta_decay_grads":
    case "column_coefs":
      return BH * nck;
    case "solve":
      return BH * nck;
    case "solve_transposed":
      return BH * nck * stagedBlocks(s.C, s.dv);
    case "window_solve_transposed":
      return BH * nck * Math.ceil(s.dv / SOLVE_TRANSPOSED_COLUMNS);
    case "window_solve":
      return BH * nck * Math.ceil((s.dk + s.dv) / (s.WS > 0 ? s.WS : CHUNK_WG));
    case "window_pair_gram":
      return BH * nck * pairGramTiles(s.C, pad);
    case "window_transition":
      return BH * nck * (windowTransitionStaged(s) ? 2 : transitionTiles(s.dk, s.dv));
    case "window_pseudo_values": {
      const rows = s.C * (pad + 1);
      if (windowPseudoValuesStaged(s, rows)) {
        return BH * nck * Math.ceil(rows / windowPseudoValuePanelRows(rows));
      }
      return BH * nck * stateTiles(rows, s.dv);
    }
    case "window_readout":
    case "window_query_grads":
      return BH * nck * Math.ceil(s.C / s.R);
    case "window_row_grads":
    case "window_readout_dw":
      return BH * nck * Math.ceil(s.C / s.RC);
    case "window_solve_input_grads":
      return BH * nck * Math.ceil(s.C / s.RP);
    case "window_scan_link":
    case "window_s0_grad_parts":
      return BH * nck * stateTiles(s.dk, s.dv);
    case "window_pair_gather":
      return flat(BH * (pad + T) * (s.dk + s.dv));
    case "state_scan":
    case "reverse_scan":
    case "reverse_scan_no_s0":
    case "s0_grad_sum":
      return flat(BH * s.dk * s.dv);
    case "delta_state_scan":
    case "delta_reverse_scan":
    case "delta_value_scan":
    case "delta_value_reverse_scan":
      return BH * Math.ceil(s.dv / scanColumns(s.dk));
    case "pair_row_grads":
      return flat(BH * (pad + T + 1) * pairRowEntries(s, pad));
    case "state_increment":
    case "base_readout_grads":
    case "base_readout_grads_no_s0":
    case "scan_link":
    case "s0_grad_parts":
      return BH * nck * stateTiles(s.dk, s.dv);
    case "readout":
    case "query_grads":
      return BH * nck * Math.ceil(s.C / s.R);
    case "pair_column_grads":
    case "readout_dw":
    case "pair_column_grads_tail":
    case "readout_dw_tail":
      return BH * nck * pairColumnTiling(pass, s, pad).tiles;
    case "solve_input_grads":
      return BH * nck * Math.ceil(s.C / s.RP);
    case "column_gram":
      return COLUMN_GRAM_STAGED
        ? BH * nck * columnGramLayout(s.C).tiles
        : flat(BH * nck * s.C * Math.ceil(s.C / 4));
    case "column_gram_grads":
      return flat(BH * nck * Math.ceil(s.C / 4) ** 2);
    case "column_state_scan":
    case "column_reverse_scan":
      return BH * Math.ceil(s.dv / s.CS);
    case "column_readout":
      return COLUMN_READOUT_TILED ? BH * nck * columnReadoutLayout(s).tiles : flat(BH * T * s.dv);
    case "column_readout_dw":
    case "column_dots":
      return flat(BH * T * s.dv);
    case "column_query_dout":
      return flat(BH * nck * s.dk * s.dv);
    case "column_step_grads":
      return BH * nck * s.dv;
    case "column_coef_grads":
      return flat(BH * T);
    case "column_query_key_grads":
      return flat(BH * T * s.dk);
    case "column_state_increment":
      return BH * nck * columnIncrementLayout(s).tiles;
    case "column_increment_scan":
    case "column_gradient_scan":
      return flat(BH * s.dk * s.dv);
  }
}

/**
 * Passes that read the workspace rows (and `dO`) four entries at a time (`qn4`, `xp4`, `yp4`, `do4`): with
 * `Dk` and `Dv` multiples of 4 they bind `ws` and `dout` as `array<vec4<f32>>` (one 16-byte load per 4
 * entries), otherwise the same functions assemble the vec4 from scalar loads, 0 past the row's end. Staged loads of
 * one entry take one component (`qn`, `xp`, `yp`, `doutf`).
 * The delta rules' `solve_input_grads` is one of them.
 */
const VEC4_PASSES: ReadonlySet<ChunkPass> = new Set<ChunkPass>([
  "readout",
  "query_grads",
  "state_increment",
  "base_readout_grads",
  "base_readout_grads_no_s0",
  "pair_column_grads",
  "pair_column_grads_tail",
  "readout_dw",
  "readout_dw_tail",
  "solve",
  "solve_input_grads",
]);

/**
 * Whether `pass` reads the workspace rows four entries at a time: {@linkcode VEC4_PASSES}, and the staged
 * `column_gram` and `column_readout` ({@linkcode COLUMN_GRAM_STAGED}, {@linkcode COLUMN_READOUT_TILED}) and falcon2a's
 * `column_state_increment` ({@linkcode COLUMN_SPLIT_SCAN}).
 */
function isVec4Pass(pass: ChunkPass): boolean {
  return VEC4_PASSES.has(pass) || (COLUMN_GRAM_STAGED && pass === "column_gram") ||
    (COLUMN_READOUT_TILED && pass === "column_readout") || pass === "column_state_increment";
}

/** Whether `pass` binds `ws` and `dout` as vec4 arrays at shape `s` ({@linkcode VEC4_PASSES}). */
export function bindsVec4(pass: ChunkPass, s: Pick<ChunkShape, "dk" | "dv">): boolean {
  return isVec4Pass(pass) && s.dk % 4 === 0 && s.dv % 4 === 0;
}

/**
 * Passes that also bind the workspace `cw` and `s0` as vec4 arrays where {@linkcode bindsVec4} holds: the readout
 * and dq kernels read pseudo-values and, in their direct-load form ({@linkcode rowsKernelForm}), the state rows
 * (`cw4`, `s04`) 16 bytes at a time, the pair-column kernels the rows of the exit-state gradient `G` (`cw4`, where
 * they stage 4 entries per load); the workspace sections start at multiples of 4 floats. Their other workspace
 * floats go through `cwf`, `s0f` and `cwset` (a load or store of one component);
 * the delta rules' `solve_input_grads` its staged
 * operands and gradient rows.
 */
const VEC4_WORKSPACE_PASSES: ReadonlySet<ChunkPass> = new Set<ChunkPass>([
  "readout",
  "query_grads",
  "pair_column_grads",
  "pair_column_grads_tail",
  "readout_dw",
  "readout_dw_tail",
  "solve_input_grads",
]);

/** Whether `pass` binds `cw` and `s0` as vec4 arrays at shape `s` ({@linkcode VEC4_WORKSPACE_PASSES}). */
export function bindsVec4Workspace(pass: ChunkPass, s: Pick<ChunkShape, "dk" | "dv">): boolean {
  return VEC4_WORKSPACE_PASSES.has(pass) && bindsVec4(pass, s);
}

/**
 * Whether `pass` also binds its output `out` as a vec4 array at shape `s`: the pair-column kernels and
 * `solve_input_grads` where they bind `cw` as one ({@linkcode bindsVec4Workspace}) store their gradients 4 entries
 * at a time (`Dk` and `Dv` multiples of 4: the gradient sections and rows start at multiples of 4 floats).
 */
export function bindsVec4Output(pass: ChunkPass, s: Pick<ChunkShape, "dk" | "dv">): boolean {
  return (pass === "pair_column_grads" || pass === "pair_column_grads_tail" ||
    pass === "solve_input_grads") &&
    bindsVec4Workspace(pass, s);
}

/**
 * WGSL `cwf(i)` (one float of `cw`) and, in {@linkcode VEC4_WORKSPACE_PASSES}, `cwset(i, v)` and `s0f(i)` (one
 * float of `s0`); where those bind `cw` as a vec4 array also `cw4(i)` and `s04(i)` (4 floats from float `i`, a
 * multiple of 4).
 */
function workspaceFloatAccessors(pass: ChunkPass, s: ChunkShape, hasS0: boolean): string {
  if (!VEC4_WORKSPACE_PASSES.has(pass)) return "fn cwf(i: u32) -> f32 { return cw[i]; }";
  if (!bindsVec4Workspace(pass, s)) {
    return `fn cwf(i: u32) -> f32 { return cw[i]; }
fn cwset(i: u32, v: f32) { cw[i] = v; }${hasS0 ? "\nfn s0f(i: u32) -> f32 { return s0[i]; }" : ""}`;
  }
  return `fn cwf(i: u32) -> f32 { return cw[i >> 2u][i & 3u]; }
fn cwset(i: u32, v: f32) { cw[i >> 2u][i & 3u] = v; }
fn cw4(i: u32) -> vec4<f32> { return cw[i >> 2u]; }${
    hasS0
      ? "\nfn s0f(i: u32) -> f32 { return s0[i >> 2u][i & 3u]; }\nfn s04(i: u32) -> vec4<f32> { return s0[i >> 2u]; }"
      : ""
  }`;
}

/**
 * WGSL `vec4` of `at(min(i + m, n - 1))`, `m = 0..3`: entries past the row's end repeat its last one (for
 * operands whose products there are 0 or unused).
 */
export function clampedVec4(at: (i: string) => string, i: string, n: string): string {
  return `vec4<f32>(${[0, 1, 2, 3].map((m) => at(`min(${i} + ${m}u, ${n} - 1u)`)).join(", ")})`;
}

/** WGSL `vec4` of `at(i + m)`, `m = 0..3`: entries at or past `n` are 0 (and read at `n - 1`). */
export function maskedVec4(at: (i: string) => string, i: string, n: string): string {
  const parts = [0, 1, 2, 3].map((m) =>
    m === 0 ? at(i) : `select(0.0, ${at(`min(${i} + ${m}u, ${n} - 1u)`)}, ${i} + ${m}u < ${n})`
  );
  return `vec4<f32>(${parts.join(", ")})`;
}

/**
 * WGSL of the workspace row accessors: `qn` (query rows), `xp` (pair key rows, from slot `-PAD`), `yp`
 * (pair value rows), and for {@linkcode VEC4_PASSES} their vec4 forms from entry `i` (a multiple of 4),
 * `do4` (`dO` entries `k..k+3` of the row at float `r0`), as 16-byte loads where {@linkcode bindsVec4}, and `doutf`
 * (one float of `dO`).
 */
function workspaceAccessors(pass: ChunkPass, s: ChunkShape, usesDout: boolean): string {
  const q = "(bh * u.T + t) * DK + i";
  const x = "u.B * H * u.T * DK + (bh * (PAD + u.T + 1u) + u32(j + i32(PAD))) * DK + i";
  const y = "u.B * H * (u.T * DK + (PAD + u.T + 1u) * DK) + (bh * (PAD + u.T) + u32(j + i32(PAD))) * DV + c";
  const vec4 = bindsVec4(pass, s);
  // a float of ws: one component of its vec4 where ws is a vec4 array
  const float = (f: string) => vec4 ? `let f = ${f}; return ws[f >> 2u][f & 3u];` : `return ws[${f}];`;
  const scalars = `fn qn(bh: u32, t: u32, i: u32) -> f32 { ${float(q)} }
fn xp(bh: u32, j: i32, i: u32) -> f32 { ${float(x)} }
fn yp(bh: u32, j: i32, c: u32) -> f32 { ${float(y)} }`;
  if (!isVec4Pass(pass)) return scalars;
  const rows = vec4 ? [`ws[(${q}) >> 2u]`, `ws[(${x}) >> 2u]`, `ws[(${y}) >> 2u]`, "dout[(r0 + k) >> 2u]"] : [
    maskedVec4((e) => `qn(bh, t, ${e})`, "i", "DK"),
    maskedVec4((e) => `xp(bh, j, ${e})`, "i", "DK"),
    maskedVec4((e) => `yp(bh, j, ${e})`, "c", "DV"),
    maskedVec4((e) => `dout[r0 + ${e}]`, "k", "DV"),
  ];
  return `${scalars}
fn qn4(bh: u32, t: u32, i: u32) -> vec4<f32> { return ${rows[0]}; }
fn xp4(bh: u32, j: i32, i: u32) -> vec4<f32> { return ${rows[1]}; }
fn yp4(bh: u32, j: i32, c: u32) -> vec4<f32> { return ${rows[2]}; }${
    usesDout
      ? `\nfn do4(r0: u32, k: u32) -> vec4<f32> { return ${rows[3]}; }
fn doutf(i: u32) -> f32 { return ${vec4 ? "dout[i >> 2u][i & 3u]" : "dout[i]"}; }`
      : ""
  }`;
}

export function prelude(pass: ChunkPass, config: RuleConfig, s: ChunkShape, heads: HeadConstants): string {
  const nw = windowSlots(config);
  const names = chunkBindings(pass, config);
  const vec4 = bindsVec4(pass, s);
  const vec4Workspace = bindsVec4Workspace(pass, s);
  const vectors = (name: ChunkBindingName) =>
    (vec4 && (name === "ws" || name === "dout")) || (vec4Workspace && (name === "cw" || name === "s0")) ||
    (name === "out" && bindsVec4Output(pass, s));
  const decl = (name: ChunkBindingName) =>
    vectors(name) ? DECL[name].replace("array<f32>", "array<vec4<f32>>") : DECL[name];
  const bindings = names.map((name, i) => `@group(0) @binding(${i}) ${decl(name)};`).join("\n");
  const nb = names.length;
  const usesWs = names.includes("ws");
  return `// fastweight_chunk_${pass}_f32 (${config.rule})
${bindings}
struct U { ${CHUNK_UNIFORM_FIELDS.map((f) => `${f}: u32`).join(", ")} }
@group(0) @binding(${nb}) var<uniform> u: U;
const DK = ${s.dk}u;
const DV = ${s.dv}u;
const NW = ${nw}u;
const PAD = ${nw - 1}u;
const H = ${s.H}u;
const C = ${s.C}u;
const R = ${s.R}u;
const RC = ${s.RC}u;
const RP = ${s.RP}u;
const WG = ${CHUNK_WG}u;
const CP = ${s.C + nw - 1}u;
${usesWs ? workspaceAccessors(pass, s, names.includes("dout")) : ""}
${workspaceFloatAccessors(pass, s, names.includes("s0"))}
fn nck() -> u32 { return u.NCK; }
${COEF_PASSES.has(pass) ? coefficientWgsl(config, heads) : ""}
`;
}

/**
 * `chunk_steps`: per `(b, h, chunk)` one invocation walks the chunk's steps once and stores what every per-chunk
 * kernel's {@linkcode chunkSteps} loads: `P_t` (`chunkLogDecay`: the log decay since the chunk's start or its last
 * segment start, from `logDecay`), the segment code `2 * (segments begun in a..t) + (1 if the current one began at
 * a cut)` (`chunkSegment`) and, for the solve rules (`solve`), `Pp_t = P_t - log gamma_t` (`chunkLogDecayBefore`).
 * A sequence start, or a cut (gamma underflowed to 0: `logDecay` holds the marker 1), begins a segment. Each
 * kernel once walked the chunk in one invocation while the others waited (H200, 8x4096x8x64, 2026-12-02 18:38
 * UTC, without that walk: falcon1 fwd+bwd 9.34 -> 8.65 ms, falcon1a 5.03 -> 4.72 ms).
 */
export function chunkStepsKernel(solve: boolean): string {
  return `
${flatEntry("u.B * H * nck()")}
  let n = idx % nck();
  let bh = idx / nck();
  let b = bh / H;
  let a = n * C;
  let len = min(C, u.T - a);
  var p = 0.0;
  var cnt = 0u;
  var zb = 0u;
  for (var k = 0u; k < len; k++) {
    let at = bh * u.T + a + k;
    let ld = cw[u.logDecay + at];
    let cut = ld > 0.5;
    if (stepinfo[(b * u.T + a + k) * 2u + 1u] != 0 || cut) {
      p = 0.0;
      cnt++;
      zb = select(0u, 1u, cut);
    }
    ${solve ? "cw[u.chunkLogDecayBefore + at] = p;" : ""}
    if (!cut) { p += ld; }
    cw[u.chunkLogDecay + at] = p;
    cw[u.chunkSegment + at] = f32(2u * cnt + zb);
  }
}`;
}

/**
 * The chunk's step arrays in workgroup memory and `M[t, j]` (passes with a per-chunk workgroup), loaded from what
 * `chunk_steps` stored ({@linkcode chunkStepsKernel}).
 * Delta rules also keep `Pp_t` (the log decay before step `t`'s own factor) and `a_t`, and their
 * `M[t, s]` is the plain decay ratio `Gam[t, s]` (the gain sits in the solved pseudo-values).
 */
export function chunkSteps(delta: boolean): string {
  return `
var<workgroup> cp: array<f32, C>;   // P_t (log decay since the chunk start or the last start)
var<workgroup> cg: array<f32, C>;   // g_t (the write gain b_t)
var<workgroup> clo: array<i32, C>;  // lo_t (first pair of step t's window)
var<workgroup> cseg: array<u32, C>; // 2 * (segments begun in a..t) + (1 if the current one began at a cut)
${
    delta
      ? `var<workgroup> cpp: array<f32, C>;  // Pp_t = P_t - log gamma_t
var<workgroup> cga: array<f32, C>;  // a_t`
      : ""
  }
// the chunk's step arrays, as chunk_steps stored them
fn load_chunk(lid: u32, bh: u32, b: u32, a: u32, len: u32) {
  for (var k = lid; k < len; k += WG) {
    let at = bh * u.T + a + k;
    cp[k] = cwf(u.chunkLogDecay + at);
    cg[k] = cwf(u.writeGain + at);
    clo[k] = stepinfo[(b * u.T + a + k) * 2u];
    cseg[k] = u32(cwf(u.chunkSegment + at));
    ${delta ? "cpp[k] = cwf(u.chunkLogDecayBefore + at);\n    cga[k] = cwf(u.eraseGain + at);" : ""}
  }
  workgroupBarrier();
}
// what the decayed base of step k's segment is: 0 the entering state, 1 S0 (after a start), 2 zero (after a cut)
fn base_kind(k: u32) -> u32 {
  if (cseg[k] == 0u) { return 0u; }
  return select(1u, 2u, (cseg[k] & 1u) == 1u);
}
${
    delta
      ? `// Gam[t, s] for chunk step tt = t - a and step s (masked before exp)
fn m_of(tt: u32, j: i32, a: u32) -> f32 {
  if (j < i32(a) || j > i32(a + tt)) { return 0.0; }
  let ss = u32(j) - a;
  if (cseg[ss] != cseg[tt]) { return 0.0; }
  return exp(cp[tt] - cp[ss]);
}`
      : `// M[t, j] for chunk step tt = t - a and pair j (masked before exp)
fn m_of(tt: u32, j: i32, a: u32) -> f32 {
  var m = 0.0;
  for (var o = 0u; o < NW; o++) {
    let s = j + i32(o);
    if (s < i32(a) || s > i32(a + tt)) { continue; }
    let ss = u32(s) - a;
    if (cseg[ss] != cseg[tt] || clo[ss] > j) { continue; }
    m += exp(cp[tt] - cp[ss]) * cg[ss];
  }
  return m;
}`
  }
`;
}

/**
 * Entry point header of a per-chunk pass: `bh, b, n, a, len, tile` from the flat workgroup id; with
 * `load` (passes that declare `chunkSteps`) also the chunk's step arrays. `invocations` above
 * {@linkcode CHUNK_WG}: `load_chunk` strides by `WG`, so the invocations past the first `WG` pass it a step
 * index past the chunk (they still reach its barriers).
 */
export function chunkEntry(tiles: string, load = true, invocations = CHUNK_WG): string {
  const first = invocations > CHUNK_WG ? "select(C, lid, lid < WG)" : "lid";
  return `@compute @workgroup_size(${invocations})
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wgid = gid.y * nwg.x + gid.x;
  let tiles = ${tiles};
  if (wgid >= u.B * H * nck() * tiles) { return; }
  let tile = wgid % tiles;
  let bn = wgid / tiles;
  let n = bn % nck();
  let bh = bn / nck();
  let b = bh / H;
  let a = n * C;
  let len = min(C, u.T - a);${load ? `\n  load_chunk(${first}, bh, b, a, len);` : ""}`;
}

/**
 * Entry point header of a flat pass: invocation `idx` of `count` (`lid` in its workgroup of `WG`, the workgroups at
 * multiples of `WG`); `prologue` runs before the invocations past `count` return (WGSL that holds a barrier).
 */
export function flatEntry(count: string, prologue = ""): string {
  return `@compute @workgroup_size(${CHUNK_WG})
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (gid.y * nwg.x + gid.x) * WG + lid;${prologue ? `\n  ${prologue}` : ""}
  if (idx >= ${count}) { return; }`;
}

/**
 * {@linkcode flatEntry} of a pass with one invocation per step `idx = bh T + t` that calls `step_co` of
 * {@linkcode stepCoefWgsl} (`coef`, `coef_grads`, `delta_coef_grads`): for a window mean statistic (`Ebar`) it first
 * loads the workgroup's pair norms, for falcon3's `coef` ({@linkcode sharesWindowDots}; not where `storedStatistic`)
 * its lag dot products.
 */
export function stepCoefEntry(config: RuleConfig, storedStatistic = false): string {
  const count = "u.B * H * u.T";
  if (sharesWindowDots(config) && !storedStatistic) {
    return flatEntry(count, `load_lag_dots(idx, lid, ${count});`);
  }
  return flatEntry(count, statKind(config.rule) === "Ebar" ? `load_pair_norms(idx, lid, ${count});` : "");
}

/**
 * WGSL of the pair norms of a window mean statistic (`Ebar`, falcon3a), shared by the steps of a workgroup of
 * {@linkcode stepCoefEntry}: each pair's `||x_p||^2` is summed once (`DK` loads) where every step summed its
 * window's `W` norms (`W DK` loads, each pair's read by `W` steps). Slot `PAD + l` holds the own pair (`p = t`) of
 * the workgroup's step `l`, slots `0..PAD-1` those of the `PAD` flat steps before the workgroup (computed by its
 * first `PAD` invocations). Pair `t - o >= 0` of step `bh T + t` is the own pair of flat step `bh T + t - o` (the same
 * head), so `window_norm` reads it `o` slots back; a pair before the sequence (`t < o`, a carry's) is summed on the spot.
 * The sums are those `dot_xx` gives, added in the same order.
 */
const WINDOW_NORMS = `
var<workgroup> pairNorm: array<f32, WG + PAD>;
fn load_pair_norms(idx: u32, lid: u32, count: u32) {
  if (idx < count) { pairNorm[PAD + lid] = dot_xx(idx / u.T, i32(idx % u.T)); }
  if (lid < PAD && idx >= PAD) {
    let f = idx - PAD;
    pairNorm[lid] = dot_xx(f / u.T, i32(f % u.T));
  }
  workgroupBarrier();
}
fn window_norm(bh: u32, t: u32, o: u32) -> f32 {
  if (t < o) { return dot_xx(bh, i32(t) - i32(o)); }
  return pairNorm[PAD + (bh * u.T + t) % WG - o];
}`;

/**
 * The form of falcon3's window statistic `mu_t = lambda_max(G_t) / n_t` (the top eigenvalue of the Gram matrix of step
 * `t`'s window pairs) in the chunk kernels: `true`, `coef` builds every `G_t` from lag dot products that its workgroup
 * sums once each from staged pair rows ({@linkcode windowLagDotsWgsl}), solves one eigenproblem per step and stores
 * `mu_t` after the top eigenvectors, and `delta_coef_grads` reads it (no Gram matrix, no eigenproblem, no pair rows);
 * `false`, every step sums its `W^2` Gram entries from storage, twice in `coef` (for `mu_t`, then for the
 * eigenvector) and once more in `delta_coef_grads` (the earlier form, the same WGSL).
 */
export const WINDOW_COEF_SHARED_DOTS: boolean = true;

/** Whether `config`'s `coef` shares its window dot products and stores `mu` ({@linkcode WINDOW_COEF_SHARED_DOTS}; falcon3). */
export function sharesWindowDots(config: RuleConfig): boolean {
  return WINDOW_COEF_SHARED_DOTS && statKind(config.rule) === "mu";
}

/**
 * WGSL of falcon3's window Gram matrices from lag dot products that the steps of a workgroup of
 * {@linkcode stepCoefEntry} share (`coef`, {@linkcode WINDOW_COEF_SHARED_DOTS}). Entry `(r, c)`, `r <= c`, of step `t`'s
 * matrix is `x_{t-c} . x_{t-r} = D_{c-r}(t - c)`, with the lag dot products `D_l(p) = x_p . x_{p+l}`, `l = 0..W-1`.
 * Slot `k` holds the own pair of flat step `f0 + k` (`f0`: the workgroup's first step less `PAD`, the slots of
 * `WINDOW_NORMS`); the slots' rows are staged 4 key entries at a time (a vec4 per slot, `WG + PAD` vec4s: llvmpipe
 * compiles a kernel with 5 times the staged entries for 3 s longer at the CI shapes), and invocation `lid` adds the
 * `W` products `D_l` of slot `lid` (the first `PAD` also of slot `WG + lid`) into `lagDots`: `W` dot products per step
 * where every step summed `2 W^2` from storage. Step `bh T + t` (slot `PAD + lid`) reads `D_{c-r}(t - c)` at slot
 * `PAD + lid - c` where `t >= c` (the own pair of flat step `bh T + t - c`, the same head); a pair before the sequence
 * (`t < c`, a carry's) is summed on the spot; pairs before a start lie outside the `n x n` block. Each dot product adds
 * its entries' products in key order (the zero entries past `DK` add `+0`), as the earlier form's `step_stat` does.
 */
function windowLagDotsWgsl(nw: number): string {
  const lags = Array.from({ length: nw }, (_, l) => l);
  const products = (l: number) => ["x", "y", "z", "w"].map((m) => `d[${l}] += a.${m} * b.${m};`).join(" ");
  const wgsl = `
const LAG_SLOTS = WG + PAD;
var<workgroup> lagRows: array<vec4<f32>, LAG_SLOTS>;
var<workgroup> lagDots: array<f32, ${(CHUNK_WG + nw - 1) * nw}>;
// key entries i .. i + 3 of the slots' pair rows (zero past DK and outside the call's steps)
fn stage_lag_rows(f0: i32, lid: u32, count: u32, i: u32) {
  for (var k = lid; k < LAG_SLOTS; k += WG) {
    let f = f0 + i32(k);
    var v = vec4<f32>(0.0);
    if (f >= 0 && u32(f) < count) {
      let bh = u32(f) / u.T;
      let j = i32(u32(f) % u.T);
      v = ${maskedVec4((e) => `xp(bh, j, ${e})`, "i", "DK")};
    }
    lagRows[k] = v;
  }
}
// slot k's lag dot products d[l] plus the staged entries' products, in key order (no lag past the last slot)
fn add_lag_dots(k: u32, sums: array<f32, NW>) -> array<f32, NW> {
  var d = sums;
  let a = lagRows[k];
  ${
    lags.map((l) =>
      `if (k + ${l}u < LAG_SLOTS) {
    let b = lagRows[k + ${l}u];
    ${products(l)}
  }`
    ).join("\n  ")
  }
  return d;
}
fn load_lag_dots(idx: u32, lid: u32, count: u32) {
  let f0 = i32(idx - lid) - i32(PAD);
  var own: array<f32, NW>;
  var late: array<f32, NW>;
  // 1, unknown to the compiler: the loop keeps its trip count at run time (llvmpipe unrolls loops of known count)
  let one = min(u.B, 1u);
  for (var i = 0u; i < DK * one; i += 4u) {
    workgroupBarrier();
    stage_lag_rows(f0, lid, count, i);
    workgroupBarrier();
    own = add_lag_dots(lid, own);
    if (lid < PAD) { late = add_lag_dots(WG + lid, late); }
  }
  for (var l = 0u; l < NW; l++) {
    lagDots[lid * NW + l] = own[l];
    if (lid < PAD) { lagDots[(WG + lid) * NW + l] = late[l]; }
  }
  workgroupBarrier();
}
// x_j . x_k of pairs j, k of head bh (j < 0: a carry's pair before the sequence), in key order
fn pair_dot(bh: u32, j: i32, k: i32) -> f32 {
  var d = 0.0;
  for (var i = 0u; i < DK; i++) { d += xp(bh, j, i) * xp(bh, k, i); }
  return d;
}
// entry (r, c), r <= c, of step t's window Gram matrix: x_{t-c} . x_{t-r}
fn window_gram_entry(bh: u32, t: u32, r: u32, c: u32) -> f32 {
  if (t < c) { return pair_dot(bh, i32(t) - i32(r), i32(t) - i32(c)); }
  return lagDots[(PAD + (bh * u.T + t) % WG - c) * NW + c - r];
}
// step t's mu, its window's top eigenpair solved once: the eigenvector (for mu's gradient) and mu (for the backward's
// coefficients) stored
fn step_statistic(bh: u32, t: u32, n: u32) -> f32 {
  var gm: array<f32, NW2>;
  for (var e = 0u; e < NW2; e++) {
    let r = e / NW;
    let c = e % NW;
    var d = 0.0;
    if (r < n && c < n) { d = window_gram_entry(bh, t, min(r, c), max(r, c)); }
    gm[e] = d;
  }
  let st = stat_of(n, gm);
  let at = bh * u.T + t;
  for (var o = 0u; o < NW; o++) { cw[u.topEigenvector + at * NW + o] = st.u[o]; }
  cw[window_statistic_at(at)] = st.value;
  return st.value;
}`;
  return packWorkgroupArrays(wgsl, ["lagDots"]);
}

/**
 * WGSL of falcon3's window statistic where {@linkcode sharesWindowDots}: `window_statistic_at` (mu of a step, after the
 * top eigenvectors `[BH, T, W]` of section `topEigenvector`) and `step_statistic(bh, t, n)`, which `coef` computes
 * ({@linkcode windowLagDotsWgsl}) and the backward (`storedStatistic`) reads.
 */
function sharedWindowStatisticWgsl(config: RuleConfig, storedStatistic: boolean): string {
  const nw = windowSlots(config);
  const at = `
// mu of step bh T + t, after the top eigenvectors [BH, T, W]
fn window_statistic_at(at: u32) -> u32 { return u.topEigenvector + u.B * H * u.T * NW + at; }`;
  if (storedStatistic) {
    return `${at}
// step t's mu as coef stored it
fn step_statistic(bh: u32, t: u32, n: u32) -> f32 { return cw[window_statistic_at(bh * u.T + t)]; }`;
  }
  return `${at}${windowEigenpairWgsl(config)}${windowLagDotsWgsl(nw)}`;
}

/** WGSL `stat_of(n, gram)` of falcon3's window Gram matrices (`W x W`, zero outside the `n x n` block): the top eigenpair. */
function windowEigenpairWgsl(config: RuleConfig): string {
  return `
// the window's Gram matrix (zero outside the n x n block: slot o is pair t - o), its top eigenpair
const NW2 = NW * NW;
struct Stat { value: f32, u: array<f32, NW> }
${topEigenWgsl(windowSlots(config))}`;
}

/**
 * WGSL `step_co(bh, b, h, t)`: step `t`'s pair count and coefficients, as the recurrent kernels compute them. Where
 * `storedStatistic` (the backward's coefficient passes) and {@linkcode sharesWindowDots}, the statistic is the one
 * `coef` stored.
 */
export function stepCoefWgsl(config: RuleConfig, storedStatistic = false): string {
  const kind = statKind(config.rule);
  const dot = (o: string) => `dot_xx(bh, i32(t) - i32(${o}))`;
  const shared = sharesWindowDots(config);
  const mu = shared
    ? sharedWindowStatisticWgsl(config, storedStatistic)
    : kind === "mu"
    ? `${windowEigenpairWgsl(config)}
fn step_stat(bh: u32, t: u32, n: u32) -> Stat {
  var gm: array<f32, NW2>;
  for (var e = 0u; e < NW2; e++) {
    let r = e / NW;
    let c = e % NW;
    var d = 0.0;
    if (r < n && c < n) {
      for (var i = 0u; i < DK; i++) { d += xp(bh, i32(t) - i32(r), i) * xp(bh, i32(t) - i32(c), i); }
    }
    gm[e] = d;
  }
  return stat_of(n, gm);
}`
    : "";
  const stat = kind === "E" ? `if (n > 0u) { st = ${dot("0u")}; }` : kind === "Ebar"
    ? `if (n > 0u) {
    var sm = window_norm(bh, t, 0u);
    for (var o = 1u; o < NW; o++) { if (o < n) { sm += window_norm(bh, t, o); } }
    st = sm / f32(n);
  }`
    : kind === "mu"
    ? shared ? "st = step_statistic(bh, t, n);" : "st = step_stat(bh, t, n).value;"
    : "";
  return `${mu}${
    kind === "none" || kind === "mu" ? "" : `
fn dot_xx(bh: u32, j: i32) -> f32 {
  var d = 0.0;
  for (var i = 0u; i < DK; i++) { let v = xp(bh, j, i); d += v * v; }
  return d;
}`
  }${kind === "Ebar" ? WINDOW_NORMS : ""}
fn pairs_at(b: u32, t: u32) -> u32 { return u32(max(i32(t) - stepinfo[(b * u.T + t) * 2u] + 1, 0)); }
fn step_co(bh: u32, b: u32, h: u32, t: u32) -> Co {
  let n = pairs_at(b, t);
  var st = 0.0;
  ${stat}
  return coef(n, st, beta[(b * u.T + t) * H + h], lb[(b * u.T + t) * H + h], h);
}
// gamma below GAMMA_MIN (exp(-lambdabar) or exp(-dt A) underflowing to 0) cuts the chain: logDecay holds the
// marker 1 (log gamma is never positive), the step begins a segment with a zero base, d gamma is dropped
const GAMMA_MIN = 1e-37;
fn log_gamma(co: Co) -> f32 {
  if (co.clamped) { return ${f32Literal(Math.log(config.epsGamma))}; }
  if (co.gamma < GAMMA_MIN) { return 1.0; }
  return log(co.gamma);
}
fn dgamma_of(co: Co, dlg: f32) -> f32 {
  if (co.clamped || co.gamma < GAMMA_MIN) { return 0.0; }
  return dlg / co.gamma;
}`;
}

/** Steps per side of the largest tile of the chain weights of {@linkcode decayGradKernel}. */
export const DECAY_TILE_MAX = 64;

/**
 * The tile of chain weights of {@linkcode decayGradKernel} at chunk size `C` (`tile` steps a side, the chunk's
 * power of two between 16 and {@linkcode DECAY_TILE_MAX}) and its invocations (one per 4 x 4 block of the tile, at
 * least 64 and twice the tile: one per row and column sum). A chunk of a few steps thus runs 64 invocations, not
 * the 256 of a 64-step tile, whose idle blocks cost a software adapter 20 times the kernel's time (41 ms against
 * 2.2 ms per call at C = 3 on llvmpipe).
 */
export function decayTiling(C: number): { tile: number; invocations: number } {
  let tile = 16;
  while (tile < C && tile < DECAY_TILE_MAX) tile *= 2;
  return { tile, invocations: Math.max(64, 2 * tile, (tile / 4) ** 2) };
}

/** Invocations per step of the `q_t . dqBase_t` dot products of {@linkcode decayGradKernel}. */
export const DECAY_DOT_LANES = 4;

/**
 * Workgroup layout of {@linkcode decayGradKernel} for chunk size `C` (the WGSL constants `DECAY_*` compute the
 * same): `grid` (blocks per tile side), `tiles` (tiles per chunk side: the chunk's `C x C` pairs in
 * `DECAY_TILE x DECAY_TILE` tiles), `part` (floats of its scratch array: a tile's row and column partial sums, `grid`
 * per step at the odd stride `DECAY_TILE + 1`, or before the tiles the exit-base and dot partial sums) and `floats`,
 * its workgroup arrays besides the chunk's step arrays (the scratch array, the per-step chain sums `U` and `L`, the
 * 16 exit-base sums).
 */
export function decayGradLayout(C: number) {
  const { tile, invocations } = decayTiling(C);
  const grid = tile / 4;
  const tiles = Math.ceil(C / tile);
  const part = Math.max(2 * grid * (tile + 1), invocations + DECAY_DOT_LANES * C);
  return { tile, invocations, grid, tiles, part, floats: part + 2 * C + 16 };
}

/**
 * WGSL of the per-chunk log-decay gradient (`decay_grads` additive, `delta_decay_grads` delta): one workgroup of
 * the invocations of {@linkcode decayTiling} per `(b, h, chunk)`. `d log gamma_r` sums, over every decay chain that holds
 * `r`, the chain's share of the loss (its factor times the factor's gradient). A chain `(hi, lo)` holds the steps
 * `lo < r <= hi` of one segment:
 * readout `Gam[t,s]`, `(t, s)` (weights `decayWeightsReadout`: `(q_t.x_j)(v_j.dO_t)`, times `g_s` summed over the
 * window of `s`), the exit factors `Gam[e,s]`, `(e, s)` (weights `decayWeightsExit`: `x_j^T G v_j`), the bases
 * `exp(P_t)` (`q_t . dqBase_t`) and `exp(P_e)` (`<G, base_e>`) from the segment's start to `t` (`e`), and for the
 * delta rules the solve's factors `Gp[t,s]`, `(t - 1, s)` (`decayWeightsSolve`) and `exp(Pp_t)` from the segment's
 * start to `t - 1` (`decayWeightsSolveBase`).
 *
 * Reverse cumulative sum (as fla's `dg`): with `U_k` the weight of the chains ending at `hi = k` and `L_k` of those
 * starting at `lo = k` (the bases start before the segment: no `L`), `d log gamma_r = sum_{k >= r} (U_k - L_k)` over
 * `r`'s segment. Each tile of the chunk's lower triangle of pairs is a grid of 4 x 4 blocks (16 x 16 at C = 64), one per
 * invocation: every pair weight is read and its `exp(P_t - P_s)` taken once (all in parallel), the blocks' row and
 * column sums go through workgroup memory into `U` and `L`; then a segmented suffix scan over the chunk's steps
 * (doubling offsets). The differences cancel the chains that begin after `r`: `d log gamma_r` is off by about
 * float32's epsilon times their weight, which a small `gamma_r` does not scale down (fla ships the same form).
 * Additive rules also gather `d g_t` from `dWriteGainTerms` into `dWriteGain`. Writes
 * `d log gamma` into `dLogDecay`.
 */
export function decayGradKernel(delta: boolean, C: number): string {
  const { tile, invocations } = decayTiling(C);
  // the pair weight f of block column j from the row's values v (the additive rules: the window of s, times g_s)
  const pairWeight = delta ? "let f = v[j];" : `var f = 0.0;
        for (var o = 0u; o < NW; o++) { if (o < np[j]) { f += v[j + PAD - o]; } }
        f *= gs[j];`;
  return `
// the tile (and its grid of blocks), scratch stride and size, dot lanes, scan slots per invocation
const DECAY_WG = ${invocations}u;
const DECAY_TILE = ${tile}u;
const DECAY_BLOCK = 4u;
const DECAY_GRID = DECAY_TILE / DECAY_BLOCK;
const DECAY_STRIDE = DECAY_TILE + 1u;
const DECAY_LANES = ${DECAY_DOT_LANES}u;
const DECAY_PART = max(2u * DECAY_GRID * DECAY_STRIDE, DECAY_WG + DECAY_LANES * C);
const DECAY_SLOTS = (C + DECAY_WG - 1u) / DECAY_WG;
// the pairs left of a block's first column that its window sums read
const DECAY_XPAD = ${delta ? "0u" : "PAD"};
// a tile's partial sums: rows (DECAY_GRID per step, one per block column), then columns; before the tiles
// the <G, base_e> partial sums (one per invocation) and the q . dqBase lane sums
var<workgroup> part: array<f32, DECAY_PART>;
var<workgroup> chain_hi: array<f32, C>; // U_k, then d log gamma_k
var<workgroup> chain_lo: array<f32, C>; // L_k
var<workgroup> exit16: array<f32, 16>;  // <G, base_e> in 16 sums
// block (gi, gj) of tile (tr, tc): its chain weights' row sums and column sums into part (zeros past the pairs)
fn block_chains(cb: u32, a: u32, len: u32, tr: u32, tc: u32, gi: u32, gj: u32) {
  let t0 = tr * DECAY_TILE + gi * DECAY_BLOCK;
  let c0 = tc * DECAY_TILE + gj * DECAY_BLOCK;
  let last = len - 1u;
  var rs: array<f32, DECAY_BLOCK>;
  var cs: array<f32, DECAY_BLOCK>;
  if (t0 < len && c0 + 1u < t0 + DECAY_BLOCK) {${
    delta ? "" : `
    var np: array<u32, DECAY_BLOCK>; // the window pairs of column s
    var gs: array<f32, DECAY_BLOCK>; // g_s
    for (var j = 0u; j < DECAY_BLOCK; j++) {
      let s = min(c0 + j, last);
      np[j] = u32(max(i32(a + s) - clo[s] + 1, 0));
      gs[j] = cg[s];
    }`
  }
    // the exit weights, added to the readout weights of the last step
    var ex: array<f32, DECAY_BLOCK + DECAY_XPAD>;
    if (last >= t0 && last < t0 + DECAY_BLOCK) {
      for (var m = 0u; m < DECAY_BLOCK + DECAY_XPAD; m++) { ex[m] = cw[u.decayWeightsExit + cb * CP + min(c0 + m, CP - 1u)]; }
    }
    for (var i = 0u; i < DECAY_BLOCK; i++) {
      let t = min(t0 + i, last);
      let row = u.decayWeightsReadout + (cb * C + t) * CP;
      var v: array<f32, DECAY_BLOCK + DECAY_XPAD>;
      for (var m = 0u; m < DECAY_BLOCK + DECAY_XPAD; m++) {
        v[m] = cw[row + min(c0 + m, CP - 1u)] + select(0.0, ex[m], t0 + i == last);
      }${
    delta
      ? `
      // the solve's chains (t, s): Gp[t + 1, s] (t + 1 in the segment)
      let next = min(t + 1u, last);
      let solve_row = u.decayWeightsSolve + (cb * C + next) * C;`
      : ""
  }
      for (var j = 0u; j < DECAY_BLOCK; j++) {
        let s = min(c0 + j, last);
        let ok = c0 + j < t0 + i && t0 + i < len && cseg[s] == cseg[t];
        ${pairWeight}
        var w = select(0.0, exp(select(0.0, cp[t] - cp[s], ok)) * f, ok);${
    delta ? "\n        w += select(0.0, cw[solve_row + s], ok && next > t && cseg[next] == cseg[s]);" : ""
  }
        rs[i] += w;
        cs[j] += w;
      }
    }
  }
  for (var k = 0u; k < DECAY_BLOCK; k++) {
    part[gj * DECAY_STRIDE + gi * DECAY_BLOCK + k] = rs[k];
    part[(DECAY_GRID + gi) * DECAY_STRIDE + gj * DECAY_BLOCK + k] = cs[k];
  }
}
// a finished tile's sums: its rows' into U (an invocation per row), its columns' into L (one per column)
fn add_tile_sums(lid: u32, len: u32, tr: u32, tc: u32) {
  if (lid < DECAY_TILE) {
    let t = tr * DECAY_TILE + lid;
    if (t < len) {
      var v = 0.0;
      for (var g = 0u; g < DECAY_GRID; g++) { v += part[g * DECAY_STRIDE + lid]; }
      chain_hi[t] += v;
    }
  } else if (lid < 2u * DECAY_TILE) {
    let c = lid - DECAY_TILE;
    let s = tc * DECAY_TILE + c;
    if (s < len) {
      var v = 0.0;
      for (var g = 0u; g < DECAY_GRID; g++) { v += part[(DECAY_GRID + g) * DECAY_STRIDE + c]; }
      chain_lo[s] += v;
    }
  }
}
${chunkEntry("1u", true, invocations)}
  let cb = bh * nck() + n;
  let out0 = bh * u.T + a;
  let last = len - 1u;
  // exit base weight <G_n, base_e> (times exp(P_e) below): coalesced partial sums
  let bk = base_kind(last);
  let z = bk == 1u;
  let gb = u.dExitState + cb * DK * DV;
  let sb = select(u.entryState + cb * DK * DV, bh * DK * DV, z);
  var exit_part = 0.0;
  if (bk == 0u || (z && u.hasS0 != 0u)) {
    for (var k = lid; k < DK * DV; k += DECAY_WG) { exit_part += cw[gb + k] * select(cw[sb + k], s0[sb + k], z); }
  }
  part[lid] = exit_part;
  // q_t . dqBase_t: DECAY_LANES invocations per step, each a strided share (neighbours read neighbouring floats)
  let lane = lid % DECAY_LANES;
  for (var t = lid / DECAY_LANES; t < len; t += DECAY_WG / DECAY_LANES) {
    var v = 0.0;
    for (var i = lane; i < DK; i += DECAY_LANES) { v += qn(bh, a + t, i) * cw[u.dqBase + (out0 + t) * DK + i]; }
    part[DECAY_WG + lane * C + t] = v;
  }${
    delta ? "" : `
  for (var r = lid; r < len; r += DECAY_WG) {
    var dg = 0.0;
    let np = u32(max(i32(a + r) - clo[r] + 1, 0));
    for (var o = 0u; o < NW; o++) {
      if (o < np) { dg += cw[u.dWriteGainTerms + (cb * CP + (r - o + PAD)) * NW + o]; }
    }
    cw[u.dWriteGain + out0 + r] = dg;
  }`
  }
  workgroupBarrier();
  if (lid < 16u) {
    var v = 0.0;
    for (var k = lid * (DECAY_WG / 16u); k < (lid + 1u) * (DECAY_WG / 16u); k++) { v += part[k]; }
    exit16[lid] = v;
  }
  // U_t starts with the bases' chains ending at t: q_t . dqBase_t${
    delta ? " and the solve's exp(Pp_{t+1})" : ""
  }
  for (var t = lid; t < len; t += DECAY_WG) {
    var hi = 0.0;
    for (var l = 0u; l < DECAY_LANES; l++) { hi += part[DECAY_WG + l * C + t]; }${
    delta
      ? `
    let next = min(t + 1u, last);
    hi += select(0.0, cw[u.decayWeightsSolveBase + out0 + next], next > t && cseg[next] == cseg[t]);`
      : ""
  }
    chain_hi[t] = hi;
    chain_lo[t] = 0.0;
  }
  workgroupBarrier();
  // the pair chains, tile by tile over the lower triangle
  let ntiles = (len + DECAY_TILE - 1u) / DECAY_TILE;
  for (var tr = 0u; tr < ntiles; tr++) {
    for (var tc = 0u; tc <= tr; tc++) {
      if (lid < DECAY_GRID * DECAY_GRID) { block_chains(cb, a, len, tr, tc, lid / DECAY_GRID, lid % DECAY_GRID); }
      workgroupBarrier();
      add_tile_sums(lid, len, tr, tc);
      workgroupBarrier();
    }
  }
  // U_k - L_k, the exit base's chain ending at the last step
  var exit_base = 0.0;
  for (var k = 0u; k < 16u; k++) { exit_base += exit16[k]; }
  for (var m = 0u; m < DECAY_SLOTS; m++) {
    let k = lid + m * DECAY_WG;
    if (k < len) { chain_hi[k] += select(0.0, exp(cp[last]) * exit_base, k == last) - chain_lo[k]; }
  }
  workgroupBarrier();
  // segmented suffix sums: after offset o, step k holds the sum over its segment's steps k .. k + 2o - 1
  for (var o = 1u; o < len; o <<= 1u) {
    var later: array<f32, DECAY_SLOTS>;
    for (var m = 0u; m < DECAY_SLOTS; m++) {
      let k = lid + m * DECAY_WG;
      // (set on every pass: a var declared in a loop need not start at zero on every adapter)
      later[m] = 0.0;
      if (k + o < len && cseg[k + o] == cseg[k]) { later[m] = chain_hi[k + o]; }
    }
    workgroupBarrier();
    for (var m = 0u; m < DECAY_SLOTS; m++) {
      let k = lid + m * DECAY_WG;
      if (k < len) { chain_hi[k] += later[m]; }
    }
    workgroupBarrier();
  }
  for (var m = 0u; m < DECAY_SLOTS; m++) {
    let k = lid + m * DECAY_WG;
    if (k < len) { cw[u.dLogDecay + out0 + k] = chain_hi[k]; }
  }
}`;
}

/**
 * WGSL of a 4 x 4 register tile named `p`: declares `p00..p33` and accumulates
 * `p{r}{c} += [w(k) *] a(k, r) b(k, c)` over `k < K`. `a`, `b` (and `w`) are WGSL templates in which
 * `${r}` / `${c}` stand for the block row / column (0..3) and `k` for the loop index; each value read
 * serves 4 products, so a block reads 8 values per 16 products instead of 2 per product.
 */
export function tile4(p: string, K: string, a: string, b: string, w?: string): string {
  const R = [0, 1, 2, 3];
  const at = (t: string, v: number) => t.replace(/\$\{(r|c)\}/g, () => `${v}`);
  return `${R.flatMap((r) => R.map((c) => `var ${p}${r}${c} = 0.0;`)).join(" ")}
    for (var k = 0u; k < ${K}; k++) {
      ${w ? `let ${p}w = ${w};` : ""}
      ${R.map((r) => `let ${p}a${r} = ${at(a, r)}${w ? ` * ${p}w` : ""};`).join("\n      ")}
      ${R.map((c) => `let ${p}b${c} = ${at(b, c)};`).join("\n      ")}
      ${R.flatMap((r) => R.map((c) => `${p}${r}${c} += ${p}a${r} * ${p}b${c};`)).join("\n      ")}
    }`;
}

/**
 * WGSL of 4 x 4 state blocks as outer products: for `k < K`, `<acc><r> += a[r] * b` for each product
 * (`a`, `b` vec4 expressions in `k`: 4 rows and 4 columns of the block; the products share `b`). The
 * accumulators are vec4 per row, declared here.
 */
export function vec4Tile(products: readonly { acc: string; a: string }[], K: string, b: string): string {
  const R4 = [0, 1, 2, 3];
  return `${products.map((p) => R4.map((r) => `var ${p.acc}${r} = vec4<f32>(0.0);`).join(" ")).join(" ")}
    for (var k = 0u; k < ${K}; k++) {
      let vb = ${b};
      ${
    products.map((p) =>
      `{
        let va = ${p.a};
        ${R4.map((r) => `${p.acc}${r} += va[${r}] * vb;`).join(" ")}
      }`
    ).join("\n      ")
  }
    }`;
}

/** `f(r, c)` for the 16 entries of a 4 x 4 tile, joined as WGSL lines. */
export function tile4Each(f: (r: number, c: number) => string): string {
  const R = [0, 1, 2, 3];
  return R.flatMap((r) => R.map((c) => f(r, c))).join("\n    ");
}

/**
 * The per-step coefficient backward (`coef_grads`, `delta_coef_grads`): `d gamma = d log gamma / gamma`, then the
 * recurrent kernel's `coef_back(co, d gamma, da, db)` into `d beta`, `d lambdabar` and the statistic's
 * gradient `dStatistic`. `da` / `db` are WGSL expressions (the delta rules' `d a_t`, `d b_t`; 0 and `d g_t` otherwise).
 */
export function coefBackKernel(config: RuleConfig, da: string, db: string): string {
  return stepCoefWgsl(config, true) + `
${stepCoefEntry(config, true)}
  let t = idx % u.T;
  let bh = idx / u.T;
  let b = bh / H;
  let h = bh % H;
  let dlg = cw[u.dLogDecay + idx];
  let co = step_co(bh, b, h, t);
  let cb = coef_back(co, dgamma_of(co, dlg), ${da}, ${db});
  out[u.gDB + idx] = cb.x;
  out[u.gDLB + idx] = cb.y;
  cw[u.dStatistic + idx] = cb.z;
}`;
}
