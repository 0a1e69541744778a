/**
 * The computation of one chunk on a tape, from the raw inputs it reads to its readout and end state
 * (SPEC section 4). Used by the forward sweep (no gradients) and, recomputed chunk by chunk in
 * reverse, by the backward pass (SPEC section 5).
 *
 * @module
 */

import { isPerColumnRule, type RuleConfig } from "../config.ts";
import {
  concatCols,
  concatRows,
  gatherCols,
  gatherRows,
  matmul,
  type Node,
  type Tape,
  transpose,
} from "./autodiff.ts";
import { additiveChunk } from "./chunk_additive.ts";
import { stepCoefficients } from "./chunk_coeffs.ts";
import { type ChunkResult, type ChunkSystem, deltaChunk, instanceProducts } from "./chunk_delta.ts";
import { normalizeRowsOp } from "./chunk_features.ts";
import type { ChunkLayout, SequencePlan } from "./chunk_layout.ts";
import type { HeadInputs } from "./head.ts";

/** The raw-input leaves of one chunk; their gradients are the chunk's contributions. */
export interface ChunkLeaves {
  /** Raw q rows `a..e` `[n, Dk]`. */
  q: Node;
  /** Raw k rows `kLo..` `[kN, Dk]`. */
  k: Node;
  /** Raw v rows `vLo..` `[vN, Dv]`. */
  v: Node;
  /** beta rows `a..e` `[n, 1]` or `[n, Dv]`. */
  beta: Node;
  /** lambdabar rows `a..e` `[n, 1]`. */
  lambdabar: Node;
  /** State entering the chunk `[Dk, Dv]`. */
  sa: Node;
  /** Reset state `[Dk, Dv]`. */
  s0: Node;
}

/** A chunk's leaves and outputs. */
export interface ChunkGraph extends ChunkResult {
  /** The leaves (gradients after `tape.backward`). */
  leaves: ChunkLeaves;
}

/** Build one chunk on `tape`; `sa` is the state entering it. */
export function chunkGraph(
  tape: Tape,
  config: RuleConfig,
  plan: SequencePlan,
  inputs: HeadInputs,
  layout: ChunkLayout,
  sa: Float64Array,
  needsGrad: boolean,
): ChunkGraph {
  const { dk, dv } = plan;
  const { a, n } = layout;
  const bw = isPerColumnRule(config.rule) ? dv : 1;
  const leaves: ChunkLeaves = {
    q: tape.leaf(n, dk, inputs.q.slice(a * dk, (a + n) * dk), needsGrad),
    k: tape.leaf(layout.kN, dk, inputs.k.slice(layout.kLo * dk, (layout.kLo + layout.kN) * dk), needsGrad),
    v: tape.leaf(layout.vN, dv, inputs.v.slice(layout.vLo * dv, (layout.vLo + layout.vN) * dv), needsGrad),
    beta: tape.leaf(n, bw, inputs.beta.slice(a * bw, (a + n) * bw), needsGrad),
    lambdabar: tape.leaf(n, 1, inputs.lambdabar.slice(a, a + n), needsGrad),
    sa: tape.leaf(dk, dv, sa, needsGrad),
    s0: tape.leaf(dk, dv, inputs.s0, needsGrad),
  };
  const q = normalizeRowsOp(leaves.q, config.qkNorm, config.epsRms);
  const xParts = [normalizeRowsOp(leaves.k, config.qkNorm, config.epsRms)];
  const yParts = [leaves.v];
  if (plan.carryCount > 0) {
    xParts.push(tape.constant(plan.carryCount, dk, plan.carryX));
    yParts.push(tape.constant(plan.carryCount, dv, plan.carryY));
  }
  if (plan.lastKey) xParts.push(tape.constant(1, dk, plan.lastKey));
  const xPairs = gatherRows(concatRows(xParts), layout.pairX);
  const yPairs = gatherRows(concatRows(yParts), layout.pairY);
  const coeffs = stepCoefficients(config, layout, {
    xPairs,
    beta: leaves.beta,
    lambdabar: leaves.lambdabar,
    mambaA: inputs.mambaA,
    retnetG: inputs.retnetG,
  });
  const seg = { n, segId: layout.segId, segFirst: layout.segFirst };
  const system: ChunkSystem = {
    q,
    xPairs,
    yPairs,
    sa: leaves.sa,
    s0: leaves.s0,
    lg: coeffs.lg,
    ga: coeffs.ga,
    gb: coeffs.gb,
    layout,
    seg,
  };
  const additive = coeffs.ga === null;
  if (coeffs.lg.cols === 1) {
    const result = additive ? additiveChunk(system) : deltaChunk(system);
    return { ...result, leaves };
  }
  // Falcon-2/2A: one system per value column, sharing the Gram matrix (or Q X^T)
  const shared = additive ? null : instanceProducts(q, xPairs, layout);
  const scores = additive ? matmul(q, transpose(xPairs)) : undefined;
  const os: Node[] = [];
  const ses: Node[] = [];
  for (let col = 0; col < dv; col++) {
    const pick = (node: Node) => gatherCols(node, [col]);
    const column: ChunkSystem = {
      ...system,
      yPairs: pick(yPairs),
      sa: pick(leaves.sa),
      s0: pick(leaves.s0),
      lg: pick(coeffs.lg),
      ga: coeffs.ga ? pick(coeffs.ga) : null,
      gb: pick(coeffs.gb),
    };
    const result = additive ? additiveChunk(column, scores) : deltaChunk(column, shared!);
    os.push(result.o);
    ses.push(result.se);
  }
  return { o: concatCols(os), se: concatCols(ses), leaves };
}
