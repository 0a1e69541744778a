/**
 * The per-call context of the chunk-parallel kernels (fw_chunk.ts and its family files): the absolute
 * pointers of the chunk work area and the per-head constants, in one block of linear memory at the
 * start of the work area (fw_chunk_layout.ts). fw_chunk.ts fills it once per head and passes it as the
 * first argument `ctx` of every chunk function, so no work pointer is a module global: a thread's
 * context lives in its own scratch and costs no allocation (`changetype` of a scratch address).
 *
 * Shapes: q, k `[B, T, H, Dk]`, v, o `[B, T, H, Dv]`, state `[B, H, Dk, Dv]`; work arrays `[C, *]`.
 * Field comments give each array's element type (f32 unless said) and shape.
 */

/** The chunk kernels' context: fields are set by fw_chunk.ts `setup` (nothing runs a constructor). */
@unmanaged
export class ChunkContext {
  // per-head and per-segment constants
  /** Chunk size C (at most T), also the row stride of the [C, C] matrices. */
  chunk: i32;
  /** Per-column rule: sub-problems of one value column each. */
  perColumn: bool;
  /** falcon3a: segments of fw_chunk_window_additive.ts. */
  additiveWindow: bool;
  /** falcon3: segments of fw_chunk_window_delta.ts. */
  deltaWindow: bool;
  /** The delta write (a != 0): the solve. */
  deltaWrite: bool;
  /** Value width of a sub-problem: Dv, or 1 for a per-column rule. */
  subWidth: i32;
  /** Byte offset of the current value column in v, o, dO, dv rows (0: scalar rules). */
  columnByte: usize;
  /** Values of the sub-problem [C, subWidth]: values, or columnValues for a per-column rule. */
  subValues: usize;
  /** Row stride of v, o, dO (H * Dv). */
  valueStride: i32;
  /** phi(k) of every position [T, Dk]. */
  keyHat: usize;
  /** phi(q) of every position [T, Dk]. */
  queryHat: usize;
  /** [Dk] zeros (the sentinel's write feature). */
  zeroKey: usize;
  /** Backward of a delta rule: W of every position [T, Dv], else 0. */
  pseudoValueStore: usize;
  /** Row stride of the [C, P] matrices (P = C + B - 1). */
  pairStride: i32;
  /** First pair of the segment. */
  firstPair: i32;
  /** Pairs of the segment. */
  pairCount: i32;
  /** Float64 work of windowCoefs (falcon3's eigen solver). */
  f64Work: usize;
  /** Row stride of the [*, R] matrices (R = C * B). */
  instanceStride: i32;
  /** Instance rows of the segment. */
  instanceCount: i32;
  // per-position scalars of the chunk
  /** f64 [C] cumulative log decay Lc. */
  logDecay: usize;
  /** f64 [C] gradient of Lc. */
  dLogDecay: usize;
  /** f64 [C] ||x_t||^2. */
  featureNormSq: usize;
  /** f32 [C] gamma. */
  gamma: usize;
  /** f32 [C] a. */
  aCoef: usize;
  /** f32 [C] b. */
  bCoef: usize;
  /** f32 [C] c = exp(Lc). */
  cumDecay: usize;
  /** f32 [C] a * cp (cp_t = c_{t-1}, cp_a = 1). */
  aPrevDecay: usize;
  /** f32 [C] Gam[e, t]. */
  decayToEnd: usize;
  /** f32 [C] da. */
  dACoef: usize;
  /** f32 [C] db. */
  dBCoef: usize;
  /** f32 [C] dc, then dgamma (decayGrads). */
  dDecay: usize;
  // [C, C] matrices (row stride C)
  /** [C, C] Gam (lower, zero above). */
  decayMatrix: usize;
  /** [C, C] X X^T (strictly lower). */
  keyGram: usize;
  /** [C, C] Q X^T (lower). */
  queryKeyGram: usize;
  /** [C, C] Kqx ⊙ Gam. */
  maskedReadout: usize;
  /** [C, C] -A = -diag(a) (Kxx ⊙ Gp) (strictly lower). */
  negSolveMatrix: usize;
  /** [C, C] dMq, then dKqx. */
  dMaskedReadout: usize;
  /** [C, C] dA, then dKxx. */
  dSolveMatrix: usize;
  /** [C, C] dGam. */
  dDecayMatrix: usize;
  // rows of the chunk
  /** [C, Dk] write features X. */
  features: usize;
  /** [Dk, C] X^T. */
  featuresT: usize;
  /** [Dv, C] W^T. */
  pseudoValuesT: usize;
  /** [C, Dk] dR S^T. */
  dRhsStateT: usize;
  /** [C, Dk] dO S^T. */
  dOutStateT: usize;
  /** [C, Dk] dX. */
  dFeatures: usize;
  /** [C, Dk] dQ. */
  dQueries: usize;
  /** [C, Dv] values Y. */
  values: usize;
  /** [C, Dv] X S_a. */
  featuresState: usize;
  /** [C, Dv] pseudo-values W. */
  pseudoValues: usize;
  /** [C, Dv] X dS_e. */
  featuresDState: usize;
  /** [C, Dv] dW. */
  dPseudoValues: usize;
  /** [C, Dv] dR (R: the right-hand side of the solve). */
  dRhs: usize;
  /** [C, Dv] scratch rows. */
  rowScratch: usize;
  // states [Dk, Dv] (transposes [Dv, Dk]) and the coefficient vectors
  /** [Dv, Dk] S_a^T. */
  stateT: usize;
  /** [Dv, Dk] dS_e^T. */
  dStateEndT: usize;
  /** [Dk, Dv] dS_a. */
  dStateStart: usize;
  /** [Dk, Dv] running dS: dS_e on entry to a segment's backward, dS_a on return. */
  dState: usize;
  /** [Dk, Dv] running state of the checkpoint pass. */
  checkpointState: usize;
  /** 3 x [Dv] coefs() output: gamma, a, b (one float each, Dv apart). */
  coefOut: usize;
  /** 3 x [Dv] coefGrads() input: dgamma, da, db (one float each, Dv apart). */
  coefGradIn: usize;
  // per-column rules (fw_chunk_per_column.ts)
  /** f32 [3, C, Dv] gamma, a, b of every column. */
  columnCoefs: usize;
  /** f32 [3, C, Dv] their gradients. */
  columnCoefGrads: usize;
  /** f32 [C] values of the current column. */
  columnValues: usize;
  /** f32 [Dv] c_e of every column. */
  columnEndDecay: usize;
  /** [C, Dv] X S_a. */
  columnsFeaturesState: usize;
  /** [C, Dv] Q S_a. */
  columnsQueriesState: usize;
  /** [C, Dv] Gam[e, :] ⊙ W of every column. */
  columnsEndWeighted: usize;
  /** [C, Dv] X dS_e. */
  columnsFeaturesDState: usize;
  /** [C, Dv] diag(c) dO of every column. */
  columnsDecayedDOut: usize;
  /** [C, Dv] -diag(a cp) dR of every column. */
  columnsScaledDRhs: usize;
  /** [C, C] dKqx summed over the columns. */
  columnsDQueryKeyGram: usize;
  /** [C, C] dKxx summed over the columns. */
  columnsDKeyGram: usize;
  // window rules (fw_chunk_window_additive.ts): per position of the segment, and its pairs (P = C + B - 1 at most)
  /** f64 [C] gamma. */
  windowGamma: usize;
  /** f64 [C] g = eta / |I_t| (0 at a no-op). */
  windowGain: usize;
  /** f64 [C] the write statistic. */
  windowStat: usize;
  /** f64 [C] lambda. */
  windowLambda: usize;
  /** f64 [C] the step's denominator. */
  windowDen: usize;
  /** f64 [C] eta. */
  windowEta: usize;
  /** f64 [C] 1 where the decay was clamped. */
  windowClamped: usize;
  /** f64 [C] 1 at a no-op position. */
  windowNoop: usize;
  /** i32 [C] first pair of the position's window. */
  windowFirst: usize;
  /** i32 [C] window size (0 at a no-op). */
  windowSize: usize;
  /** [P, Dk] pair features. */
  pairFeatures: usize;
  /** [Dk, P] their transpose. */
  pairFeaturesT: usize;
  /** [P, Dv] pair targets. */
  pairTargets: usize;
  /** [Dv, P] their transpose. */
  pairTargetsT: usize;
  /** [C, P] write mask M. */
  writeMask: usize;
  /** [C, P] Q X^T. */
  pairQueryGram: usize;
  /** [C, P] Kqx ⊙ M. */
  pairMaskedReadout: usize;
  /** [C, P] dM. */
  dWriteMask: usize;
  /** [C, P] dMq, then dKqx. */
  dPairMaskedReadout: usize;
  /** [P, Dk] pair feature gradients. */
  dPairFeatures: usize;
  /** [P, Dv] pair target gradients. */
  dPairTargets: usize;
  /** [P, Dv] X dS_e, then M[e, :] ⊙ Y. */
  pairProducts: usize;
  /** f32 [P] running dM row of the reverse recursion. */
  reverseRow: usize;
  // delta window rule falcon3 (fw_chunk_window_delta.ts): R = C * B instance rows
  /** i32 [R] step of each instance row. */
  instanceStep: usize;
  /** i32 [R] pair of each instance row. */
  instancePair: usize;
  /** i32 [C + 1] first instance row of each step. */
  stepFirstInstance: usize;
  /** [R, Dv] pseudo-values W. */
  instanceW: usize;
  /** [Dv, R] W^T. */
  instanceWT: usize;
  /** [R, Dv] dW, then dR. */
  dInstanceW: usize;
  /** [R, R] -A. */
  instanceNegSolve: usize;
  /** [R, R] dR W^T. */
  dInstanceSolve: usize;
  /** [C, R] masked readout matrix. */
  instanceReadout: usize;
  /** [C, R] its gradient. */
  dInstanceReadout: usize;
  /** [P, P] pair Gram X X^T. */
  pairGram: usize;
  /** [P, P] its gradient. */
  dPairGram: usize;
  /** [P, Dv] X S_a. */
  pairFeaturesState: usize;
  /** [P, Dv] pair sums of Gam[e, s] W. */
  pairEndSums: usize;
  /** [P, Dv] pair sums of -g cp dR. */
  pairScaledDRhs: usize;
  /** f64 [C] dg per step. */
  dStepGain: usize;
}

/** The context block at address `p` (a thread's chunk work area). */
export function contextAt(p: usize): ChunkContext {
  return changetype<ChunkContext>(p);
}

/** Pointer to row `i` of a `[*, d]` work array. */
export function row(p: usize, i: i32, d: i32): usize {
  return p + ((<usize> i * <usize> d) << 2);
}

/** Pointer to element `(i, j)` of a `[C, C]` work matrix (row stride `ctx.chunk`). */
export function el(ctx: ChunkContext, p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> ctx.chunk + <usize> j) << 2);
}

/** Pointer to element `(i, j)` of a `[*, stride]` work matrix (`el` with the stride read once). */
export function elementAt(stride: i32, p: usize, i: i32, j: i32): usize {
  return p + ((<usize> i * <usize> stride + <usize> j) << 2);
}
