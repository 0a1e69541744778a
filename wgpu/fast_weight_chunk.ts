/**
 * Driver of the chunk-parallel fast-weight kernels (`shaders/fast_weight_chunk_additive.ts` for the additive
 * rules, `shaders/fast_weight_chunk_delta.ts` for the delta rules, `shaders/fast_weight_chunk_per_column.ts`
 * for the per-column rules, `shaders/fast_weight_chunk_window_delta.ts` for falcon3, whose delta-rule
 * sections hold `W` instance rows per step): picks the tile sizes, lays out the chunk workspace and
 * records the passes. The q/k
 * normalisation into the head-major workspace, the carry gather and the gradient scatter stay in
 * `fast_weight.ts`, shared with the recurrent kernels.
 *
 * Work is spread over `B*H*ceil(T/C)*tiles` workgroups in the per-chunk passes; only the scans
 * over chunks are sequential, over `T/C` steps (additive: one invocation per state element;
 * delta: one workgroup per `scanColumns(Dk)` value columns, a `Dk x Dk` transition per step); the delta rules
 * invert their triangular systems per chunk in workgroup memory (`T = (I + A)^-1`, then products with `T`), and
 * falcon3's forward solve sweeps the `C W` instance rows of a chunk step by step, 256 invocations per
 * `WS` columns of `U0 | V` (`WINDOW_SOLVE`; its transposed solve runs 4 invocations per column). The per-column rules walk the chunks in order once
 * per `(b, h)` and group of `COLUMN_SCAN_COLUMNS` value columns (their solves carry the state from chunk to
 * chunk), each chunk's keys staged once for the group's columns, its rows spread over the invocations; falcon2a,
 * without a solve, splits them into per-chunk state increments and scans per state element (`COLUMN_SPLIT_SCAN`).
 *
 * @module
 */

import type { RuleConfig } from "../src/rules/config.ts";
import { type GpuRuntime, grid } from "./runtime.ts";
import type { GpuTensor } from "./tensor.ts";
import type { HeadConstants } from "./shaders/fast_weight_coef.ts";
import {
  CHUNK_UNIFORM_FIELDS,
  type ChunkBindingName,
  chunkBindings,
  chunkKey,
  type ChunkPass,
  type ChunkShape,
  chunkSharedFloats,
  type ChunkUniformField,
  chunkWork,
  COLUMN_UNIFORM_FIELDS,
  isAdditiveChunkRule,
  isDeltaChunkRule,
  isPerColumnChunkRule,
  isSolveChunkRule,
  isWindowDeltaChunkRule,
  PAIR_COLUMN_TILE_MAX,
  pairColumnTail,
  rowsTileMax,
  sharesWindowDots,
  SOLVE_INPUT_GRADS_ROWS_MAX,
  WINDOW_TILE_ROWS,
  windowSolveColumns,
} from "./shaders/chunk_wgsl.ts";
import { chunkShader } from "./shaders/fast_weight_chunk_shader.ts";
import {
  columnScanTiling,
  perColumnBackward,
  perColumnForward,
} from "./shaders/fast_weight_chunk_per_column.ts";
import { statKind } from "./shaders/fast_weight_coef.ts";
import { windowSlots } from "./shaders/fast_weight_recurrent.ts";

/** Sizes of a call. */
export interface ChunkDims {
  /** Batch rows. */
  B: number;
  /** Positions. */
  T: number;
  /** Heads. */
  H: number;
  /** Key size. */
  dk: number;
  /** Value size. */
  dv: number;
}

/** Buffers of a call the chunk passes read (the workspace and step table of `fast_weight.ts`). */
export interface ChunkInputs {
  /** Head-major workspace `QN, X, Y`. */
  ws: GPUBuffer;
  /** `beta [B, T, H]`. */
  beta: GPUBuffer;
  /** `lambdabar [B, T, H]`. */
  lb: GPUBuffer;
  /** `(lo_t, start)` per step, `[B, T, 2]` i32. */
  stepinfo: GPUBuffer;
  /** `S0 [B, H, Dk, Dv]` or null. */
  s0: GPUBuffer | null;
  /** Carried state `[B, H, Dk, Dv]` or null. */
  init: GPUBuffer | null;
}

/**
 * The tile sizes for a call on a device with `sharedBytes` of workgroup memory and `invocations` per workgroup at
 * most (WebGPU's default limit 256 where not given), or a RangeError naming the chunk size that does not fit.
 */
export function chunkShape(
  config: RuleConfig,
  d: ChunkDims,
  C: number,
  sharedBytes: number,
  invocations = 256,
): ChunkShape {
  const limit = Math.floor(sharedBytes / 4) - 16;
  const pad = windowSlots(config) - 1;
  const tooBig = () =>
    new RangeError(
      `chunkSize = ${C} with Dk = ${d.dk}, Dv = ${d.dv} does not fit this device's workgroup memory (${sharedBytes} bytes)`,
    );
  const floats = (r: number) => chunkSharedFloats(config, { dk: d.dk, dv: d.dv, C, R: r, RC: r, RP: r });
  if (floats(1).local > limit) throw tooBig();
  // the largest power-of-two tile (up to top, and up to the rows or columns there are) that fits
  const fit = (key: "rows" | "cols" | "pairs", max: number, top = 16) => {
    for (let r = top; r >= 1; r >>= 1) if (r <= max && floats(r)[key] <= limit) return r;
    throw tooBig();
  };
  const windowDelta = isWindowDeltaChunkRule(config);
  const cols = windowDelta ? C : C + pad; // falcon3 tiles steps, the others pair columns
  // falcon3's window_row_grads and window_solve_input_grads take about WINDOW_TILE_ROWS instance rows (W per step): more rows would
  // only grow their workgroup arrays (fewer workgroups in flight), not the reuse of a value read
  const steps = windowDelta ? Math.max(1, Math.floor(WINDOW_TILE_ROWS / (pad + 1))) : Infinity;
  const pairColumnRule = isAdditiveChunkRule(config) || isDeltaChunkRule(config);
  // pair_column_grads (additive and delta rules) takes up to PAIR_COLUMN_TILE_MAX pair columns: each staged
  // q, dO and G value then serves more of them
  const RC = fit("cols", Math.min(cols, steps), pairColumnRule ? PAIR_COLUMN_TILE_MAX : 16);
  return {
    H: d.H,
    dk: d.dk,
    dv: d.dv,
    C,
    // readout and query_grads (additive and delta rules): up to the rows of their kernel form (rowsTileMax: the
    // staged kernels' whole chunk, where each staged x, v, base and score serves more rows; 16 for a window's pad)
    R: fit("rows", C, pairColumnRule ? rowsTileMax(pad) : 16),
    RC,
    // the columns past its whole tiles (falcon3a: 67 = 64 + 3 at C = 64) in a tail pipeline of a small tile, whose
    // workgroup arrays are no larger than the main one's
    RT: pairColumnRule ? pairColumnTail(cols, RC) : 0,
    // the delta rules' solve_input_grads takes up to SOLVE_INPUT_GRADS_ROWS_MAX rows (the whole chunk at C <= 64):
    // each staged x, dR and W value then serves every row, and F is mirrored instead of a third product
    RP: fit("pairs", Math.min(C, steps), isDeltaChunkRule(config) ? SOLVE_INPUT_GRADS_ROWS_MAX : 16),
    // the per-column rules' scans: COLUMN_SCAN_COLUMNS value columns per workgroup where the memory holds them
    ...(isPerColumnChunkRule(config)
      ? columnScanTiling({ dk: d.dk, dv: d.dv, C }, sharedBytes, invocations)
      : { CS: 1, CX: 0, SW: 0 }),
    // falcon3's window_solve: the sweep's columns per workgroup (0: the serial form)
    WS: windowDelta ? windowSolveColumns(pad + 1, C, limit) : 0,
  };
}

/** Workspace sections the forward passes use (the others are sized 0 there). */
const FORWARD_SECTIONS: ReadonlySet<ChunkUniformField> = new Set<ChunkUniformField>([
  "logDecay",
  "chunkLogDecay",
  "chunkLogDecayBefore",
  "chunkSegment",
  "writeGain",
  "eraseGain",
  "chunkDecay",
  "exitBaseKind",
  "chunkStateIncrement",
  "entryState",
  "finalState",
  "solveInverse",
  "pseudoValuesConstant",
  "pseudoValuesStateFactor",
  "exitKeys",
  "transitionMatrix",
  "pseudoValues",
  "topEigenvector",
  "pairGram",
  "columnLogDecaySum",
  "columnEraseGain",
  "columnWriteGain",
  "columnPseudoValues",
  "columnKeyDotBase",
  "keyGram",
  "queryKeyGram",
  "startsInChunk",
]);

/** The sections the per-column rules use (their own and four shared ones; the others are sized 0 there). */
const COLUMN_SECTIONS: ReadonlySet<ChunkUniformField> = new Set<ChunkUniformField>([
  "entryState",
  "dExitState",
  "finalState",
  "dStatistic",
  ...COLUMN_UNIFORM_FIELDS,
]);

/**
 * Float offsets of the chunk workspace sections and its size: the delta sections only for delta
 * rules, the backward-only sections only when `backward`.
 */
function workspaceLayout(config: RuleConfig, d: ChunkDims, C: number, backward: boolean) {
  const pad = windowSlots(config) - 1;
  const BH = d.B * d.H;
  const nck = Math.ceil(d.T / C);
  const S = d.dk * d.dv;
  const delta = isSolveChunkRule(config) ? 1 : 0;
  // instance rows per step: W for falcon3 (one per window pair), 1 for the delta rules
  const windowDelta = isWindowDeltaChunkRule(config) ? 1 : 0;
  const slots = pad + 1;
  const rows = windowDelta ? slots : 1;
  const column = isPerColumnChunkRule(config);
  const perColumn = column ? 1 : 0;
  const tokenValueFloats = BH * d.T * d.dv;
  const chunkSquareFloats = BH * nck * C * C;
  const sizes: [ChunkUniformField, number][] = [
    ["logDecay", BH * d.T],
    ["chunkLogDecay", BH * d.T],
    ["chunkLogDecayBefore", delta * BH * d.T],
    ["chunkSegment", BH * d.T],
    ["writeGain", BH * d.T],
    ["dWriteGain", BH * d.T],
    ["dLogDecay", BH * d.T],
    ["dStatistic", BH * d.T],
    ["chunkDecay", BH * nck],
    ["exitBaseKind", BH * nck],
    ["chunkStateIncrement", (1 - delta + windowDelta) * BH * nck * S],
    ["entryState", BH * nck * S],
    ["dExitState", BH * nck * S],
    ["finalState", BH * S],
    ["dBaseReadout", BH * nck * 2 * S],
    ["dxPrecedingPairs", BH * nck * pad * d.dk],
    ["dyPrecedingPairs", BH * nck * pad * d.dv],
    ["dWriteGainTerms", BH * nck * (C + pad) * (pad + 1)],
    ["eraseGain", delta * BH * d.T],
    ["solveInverse", delta * (1 - windowDelta) * BH * nck * C * C],
    ["pseudoValuesConstant", delta * BH * nck * C * rows * d.dv],
    ["pseudoValuesStateFactor", delta * BH * nck * C * rows * d.dk],
    ["exitKeys", delta * (1 - windowDelta) * BH * nck * C * d.dk],
    ["transitionMatrix", windowDelta * BH * nck * d.dk * d.dk],
    ["pseudoValues", delta * BH * d.T * rows * d.dv],
    ["dPseudoValuesReadout", delta * (1 - windowDelta) * BH * d.T * rows * d.dv],
    ["dPseudoValues", delta * BH * d.T * rows * d.dv],
    ["dRightHandSide", delta * BH * d.T * rows * d.dv],
    ["reverseScanLink", delta * BH * nck * S],
    ["dS0Parts", delta * BH * nck * S],
    ["dEraseGain", delta * BH * d.T],
    ["dDeltaWriteGain", delta * BH * d.T],
    ["decayWeightsReadout", BH * nck * C * (C + pad)],
    ["decayWeightsExit", BH * nck * (C + pad)],
    ["dqBase", BH * d.T * d.dk],
    ["decayWeightsSolve", delta * BH * nck * C * C],
    ["decayWeightsSolveBase", delta * BH * d.T],
    ["columnLogDecaySum", perColumn * tokenValueFloats],
    ["columnEraseGain", perColumn * tokenValueFloats],
    ["columnWriteGain", perColumn * tokenValueFloats],
    ["columnPseudoValues", perColumn * tokenValueFloats],
    ["columnKeyDotBase", perColumn * tokenValueFloats],
    ["columnDPseudoValuesReadout", perColumn * tokenValueFloats],
    ["columnDRightHandSide", perColumn * tokenValueFloats],
    ["columnDEraseGain", perColumn * tokenValueFloats],
    ["columnDWriteGain", perColumn * tokenValueFloats],
    ["columnDLogDecay", perColumn * tokenValueFloats],
    ["keyGram", perColumn * chunkSquareFloats],
    ["queryKeyGram", perColumn * chunkSquareFloats],
    ["dQueryKeyGram", perColumn * chunkSquareFloats],
    ["dKeyGram", perColumn * chunkSquareFloats],
    ["columnDBaseReadout", perColumn * BH * nck * 2 * S],
    ["columnDqBaseWeights", perColumn * tokenValueFloats],
    ["columnDxExitWeights", perColumn * tokenValueFloats],
    ["columnDxBaseWeights", perColumn * tokenValueFloats],
    ["startsInChunk", perColumn * BH * d.T],
    ["columnBaseDecayShare", perColumn * tokenValueFloats],
    ["columnKeyDotDExit", perColumn * tokenValueFloats],
    ["dxInstanceRows", windowDelta * BH * d.T * slots * d.dk],
    // falcon3's top eigenvectors [BH,T,W], then (sharesWindowDots) the statistic mu [BH,T]
    ["topEigenvector", windowDelta * BH * d.T * (slots + (sharesWindowDots(config) ? 1 : 0))],
    ["pairGram", windowDelta * BH * nck * (C + pad) ** 2],
  ];
  const offsets: Partial<Record<ChunkUniformField, number>> = {};
  let total = 0;
  for (const [name, size] of sizes) {
    offsets[name] = total;
    const used = !column || COLUMN_SECTIONS.has(name);
    // whole vec4: the readout and dq kernels read the entry states and pseudo-values 16 bytes at a time
    if (used && (backward || FORWARD_SECTIONS.has(name))) total += Math.ceil(size / 4) * 4;
  }
  // falcon3's dPseudoValuesReadout (read last by window_scan_link) shares dRightHandSide's floats (written first by window_solve_transposed, after it)
  if (windowDelta) offsets.dPseudoValuesReadout = offsets.dRightHandSide;
  return { offsets, total, nck };
}

/** Bytes of the chunk workspace of one forward (or, when `backward`, backward) call. */
export function chunkWorkspaceBytes(config: RuleConfig, d: ChunkDims, C: number, backward: boolean): number {
  return workspaceLayout(config, d, C, backward).total * 4;
}

/** Gradient workspace offsets of the recurrent backward (`fast_weight_recurrent.ts`), shared here. */
export interface GradOffsets {
  /** `DX`. */
  gDX: number;
  /** `DY`. */
  gDY: number;
  /** `DB`. */
  gDB: number;
  /** `DLB`. */
  gDLB: number;
  /** `DS0`. */
  gDS0: number;
  /** `DC`. */
  gDC: number;
}

/** The forward passes of a rule, in dispatch order. */
function forwardPasses(config: RuleConfig): readonly ChunkPass[] {
  if (isPerColumnChunkRule(config)) return perColumnForward(config);
  if (isWindowDeltaChunkRule(config)) {
    return [
      "coef",
      "chunk_steps",
      "window_pair_gram",
      "window_solve",
      "window_transition",
      "delta_state_scan",
      "window_pseudo_values",
      "window_readout",
    ];
  }
  return isDeltaChunkRule(config)
    ? ["coef", "chunk_steps", "solve", "delta_value_scan", "readout"]
    : ["coef", "chunk_steps", "state_increment", "state_scan", "readout"];
}

/**
 * How many of a rule's first backward passes recompute the forward (the passes a backward given the
 * forward's workspace skips): the backward's leading passes that are the forward's, readout excluded.
 */
function recomputedPasses(config: RuleConfig): number {
  const forward = forwardPasses(config);
  const backward = backwardPasses(config);
  let n = 0;
  while (n < forward.length - 1 && backward[n] === forward[n]) n++;
  return n;
}

/**
 * The backward passes of a rule (recomputing the forward states first), in dispatch order; the pair-column tails
 * run only at shapes that have one (`ChunkShape.RT`). Without `s0Grad` the passes that only produce `dS0` drop
 * out (`s0_grad_parts`, `window_s0_grad_parts`, `s0_grad_sum`), and `base_readout_grads` and the additive
 * `reverse_scan` run their `_no_s0` variants (no `S0` half of `dBaseReadout`, no `dS0` sum); the per-column
 * rules compute `dS0` inside their reverse scan either way.
 */
function backwardPasses(config: RuleConfig, s0Grad = true): readonly ChunkPass[] {
  const passes = allBackwardPasses(config);
  return s0Grad ? passes : passes.flatMap((pass) => passWithoutS0Grad(pass));
}

/** What a backward without `dS0` runs for `pass` of {@linkcode allBackwardPasses}: its variant, itself or nothing. */
function passWithoutS0Grad(pass: ChunkPass): ChunkPass[] {
  switch (pass) {
    case "base_readout_grads":
      return ["base_readout_grads_no_s0"];
    case "reverse_scan":
      return ["reverse_scan_no_s0"];
    case "s0_grad_parts":
    case "window_s0_grad_parts":
    case "s0_grad_sum":
      return [];
    default:
      return [pass];
  }
}

/**
 * `pair_row_grads` where it adds anything: with a step statistic (its gradient), or a window pad (the gradients
 * earlier chunks computed for their pad pairs); a pad-free rule without a statistic (mamba2, retnet, linear,
 * deltanet, gated_deltanet) has none.
 */
function pairRowGrads(config: RuleConfig): ChunkPass[] {
  return statKind(config.rule) !== "none" || windowSlots(config) > 1 ? ["pair_row_grads"] : [];
}

/** The backward passes of a rule with `dS0` ({@linkcode backwardPasses}). */
function allBackwardPasses(config: RuleConfig): readonly ChunkPass[] {
  if (isPerColumnChunkRule(config)) return perColumnBackward(config);
  if (isWindowDeltaChunkRule(config)) {
    return [
      ...forwardPasses(config).slice(0, -1),
      "base_readout_grads",
      "window_readout_dw",
      "window_scan_link",
      "delta_reverse_scan",
      "window_row_grads",
      "window_solve_transposed",
      "window_query_grads",
      "window_solve_input_grads",
      "delta_decay_grads",
      "delta_coef_grads",
      "window_s0_grad_parts",
      "s0_grad_sum",
      "window_pair_gather",
    ];
  }
  if (!isDeltaChunkRule(config)) {
    return [
      "coef",
      "chunk_steps",
      "state_increment",
      "state_scan",
      "base_readout_grads",
      "reverse_scan",
      "query_grads",
      "pair_column_grads",
      "pair_column_grads_tail",
      "decay_grads",
      "coef_grads",
      ...pairRowGrads(config),
    ];
  }
  const stat = pairRowGrads(config);
  return [
    ...forwardPasses(config).slice(0, -1),
    "base_readout_grads",
    "readout_dw",
    "readout_dw_tail",
    "scan_link",
    "delta_value_reverse_scan",
    "pair_column_grads",
    "pair_column_grads_tail",
    "solve_transposed",
    "query_grads",
    "solve_input_grads",
    "delta_decay_grads",
    "delta_coef_grads",
    "s0_grad_parts",
    "s0_grad_sum",
    ...stat,
  ];
}

/**
 * The chunk kernels on a runtime; a call whose workspace exceeds `workspaceLimit` bytes (at most the
 * device's `maxStorageBufferBindingSize`) is a RangeError (`fast_weight_slices.ts` keeps calls under it
 * by slicing the batch).
 */
export function createChunkKernels(rt: GpuRuntime, workspaceLimit: number) {
  const sharedBytes = rt.device.limits.maxComputeWorkgroupStorageSize;
  const invocations = rt.device.limits.maxComputeInvocationsPerWorkgroup;
  const bindingLimit = rt.device.limits.maxStorageBufferBindingSize;

  /**
   * Record `passes` on a chunk workspace: `io.workspace` (a kept forward's), else a fresh one (with the
   * backward sections when `backwardLayout`); returns it.
   */
  function run(
    passes: readonly ChunkPass[],
    config: RuleConfig,
    heads: HeadConstants,
    d: ChunkDims,
    C: number,
    io: ChunkInputs & {
      dout: GPUBuffer | null;
      out: GPUBuffer;
      grads?: GradOffsets;
      backwardLayout: boolean;
      workspace?: GpuTensor;
    },
  ) {
    const shape = chunkShape(config, d, C, sharedBytes, invocations);
    const pad = windowSlots(config) - 1;
    const layout = workspaceLayout(config, d, C, io.backwardLayout);
    const limit = Math.min(workspaceLimit, bindingLimit);
    if (layout.total * 4 > limit) {
      throw new RangeError(
        `${config.rule} ${
          io.backwardLayout ? "backward" : "forward"
        } in chunk form at B = ${d.B}, T = ${d.T}, ` +
          `H = ${d.H}, Dk = ${d.dk}, Dv = ${d.dv}, chunkSize = ${C} needs a ${layout.total * 4}-byte ` +
          `chunk workspace, above its limit of ${limit} bytes (this device's maxStorageBufferBindingSize is ` +
          `${bindingLimit}): use a shorter T or chunk size, or form "recurrent"`,
      );
    }
    const cw = io.workspace ?? rt.tensor([layout.total], false);
    const values: Record<ChunkUniformField, number> = {
      ...Object.fromEntries(CHUNK_UNIFORM_FIELDS.map((f) => [f, 0])),
      ...layout.offsets,
      ...io.grads,
      B: d.B,
      T: d.T,
      hasS0: io.s0 ? 1 : 0,
      hasInit: io.init ? 1 : 0,
      NCK: layout.nck,
    } as Record<ChunkUniformField, number>;
    const uniform = rt.uniform(CHUNK_UNIFORM_FIELDS.map((f) => ({ u: values[f] })));
    const buffers: Record<ChunkBindingName, GPUBuffer> = {
      ws: io.ws,
      beta: io.beta,
      lb: io.lb,
      stepinfo: io.stepinfo,
      s0: io.s0 ?? rt.zeroBuffer(),
      init: io.init ?? rt.zeroBuffer(),
      dout: io.dout ?? rt.zeroBuffer(),
      cw: cw.buffer,
      out: io.out,
    };
    for (const pass of passes) {
      // a pair-column tail pass at a shape without one
      const work = chunkWork(pass, shape, pad, d.B, d.T);
      if (work === 0) continue;
      const pipe = rt.pipeline(
        chunkKey(pass, config, shape, heads),
        () => chunkShader(pass, config, shape, heads),
      );
      const bindings = chunkBindings(pass, config).map((name) => buffers[name]);
      rt.dispatch(pipe, [...bindings, uniform], grid(work));
    }
    return { layout, cw };
  }

  return {
    /**
     * Forward: outputs `o [B, T, H, Dv]` into `o` and the final state `[B, H, Dk, Dv]` into `state`. When
     * `keep`, the workspace is laid out as the backward's and returned for {@linkcode backward} (the
     * caller owns it); otherwise it is released and the result is null.
     */
    forward(
      config: RuleConfig,
      heads: HeadConstants,
      d: ChunkDims,
      C: number,
      io: ChunkInputs,
      o: GpuTensor,
      state: GpuTensor,
      keep = false,
    ): GpuTensor | null {
      const { layout, cw } = run(forwardPasses(config), config, heads, d, C, {
        ...io,
        dout: null,
        out: o.buffer,
        backwardLayout: keep,
      });
      const bytes = d.B * d.H * d.dk * d.dv * 4;
      rt.encoder().copyBufferToBuffer(
        cw.buffer,
        (layout.offsets.finalState ?? 0) * 4,
        state.buffer,
        0,
        bytes,
      );
      if (keep) return cw;
      rt.pool.release(cw.buffer);
      return null;
    },

    /**
     * Backward: fills the zeroed gradient workspace `g` (layout {@linkcode GradOffsets}). Given `kept` (the
     * workspace a `keep` forward of the same call returned), it skips the passes that recompute the forward
     * and releases it. Without `s0Grad` it skips the work that only `dS0` needs ({@linkcode backwardPasses}):
     * section `gDS0` of `g` is then left as it was (zero) for every rule but the per-column ones.
     */
    backward(
      config: RuleConfig,
      heads: HeadConstants,
      d: ChunkDims,
      C: number,
      io: ChunkInputs,
      dout: GPUBuffer,
      g: GpuTensor,
      grads: GradOffsets,
      kept: GpuTensor | null = null,
      s0Grad = true,
    ): void {
      const all = backwardPasses(config, s0Grad);
      const passes = kept ? all.slice(recomputedPasses(config)) : all;
      const { cw } = run(passes, config, heads, d, C, {
        ...io,
        dout,
        out: g.buffer,
        grads,
        backwardLayout: true,
        workspace: kept ?? undefined,
      });
      rt.pool.release(cw.buffer);
    },
  };
}
