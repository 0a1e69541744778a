/**
 * Work area of the chunk-parallel form (fw_chunk.ts) inside a thread's scratch: byte offsets relative
 * to its start, for chunks of at most `C` positions (shapes in the comments; `C` rows, `Dk`/`Dv` wide).
 * The per-column rules (falcon2/falcon2a, fw_chunk_per_column.ts) run their `C x C` work one value column
 * at a time: W_PSEUDO_VALUES, W_D_PSEUDO_VALUES, W_D_RHS then hold one column (`[C, 1]`), and the
 * arrays after W_COEF_OUT the rest. The area ends with the kernels' context block (fw_chunk_context.ts), whose
 * pointers placeWorkArea and the family setups set from these offsets.
 */

// AssemblyScript has no type-only imports
// deno-lint-ignore verbatim-module-syntax
import { ChunkContext } from "./fw_chunk_context";

// the context block (ChunkContext), after the arrays (so it moves none of them)
export let W_CONTEXT: usize = 0;

// per-position scalars of the chunk
export let W_LOG_DECAY: usize = 0; // f64 [C] cumulative log decay Lc
export let W_D_LOG_DECAY: usize = 0; // f64 [C] gradient of Lc
export let W_FEATURE_NORM_SQ: usize = 0; // f64 [C] ||x_t||^2
export let W_GAMMA: usize = 0; // f32 [C] gamma
export let W_A_COEF: usize = 0; // f32 [C] a
export let W_B_COEF: usize = 0; // f32 [C] b
export let W_CUM_DECAY: usize = 0; // f32 [C] c = exp(Lc)
export let W_A_PREV_DECAY: usize = 0; // f32 [C] a * cp (cp_t = c_{t-1}, cp_a = 1)
export let W_DECAY_TO_END: usize = 0; // f32 [C] Gam[e, t]
export let W_D_ACOEF: usize = 0; // f32 [C] da
export let W_D_BCOEF: usize = 0; // f32 [C] db
export let W_D_DECAY: usize = 0; // f32 [C] dc
// [C, C] matrices (row stride C)
export let W_DECAY_MATRIX: usize = 0; // Gam (lower, zero above)
export let W_KEY_GRAM: usize = 0; // X X^T (strictly lower)
export let W_QUERY_KEY_GRAM: usize = 0; // Q X^T (lower)
export let W_MASKED_READOUT: usize = 0; // Kqx * Gam
export let W_NEG_SOLVE_MATRIX: usize = 0; // -A = -diag(a) (Kxx * Gp) (strictly lower)
export let W_D_MASKED_READOUT: usize = 0; // dMq, then dKqx
export let W_D_SOLVE_MATRIX: usize = 0; // dA, then dKxx
export let W_D_DECAY_MATRIX: usize = 0; // dGam
// rows
export let W_FEATURES: usize = 0; // [C, Dk] write features
export let W_FEATURES_T: usize = 0; // [Dk, C] X^T
export let W_PSEUDO_VALUES_T: usize = 0; // [Dv, C] W^T
export let W_D_RHS_STATE_T: usize = 0; // [C, Dk] dR S^T
export let W_D_OUT_STATE_T: usize = 0; // [C, Dk] dO S^T
export let W_D_FEATURES: usize = 0; // [C, Dk]
export let W_D_QUERIES: usize = 0; // [C, Dk]
export let W_VALUES: usize = 0; // [C, Dv] values
export let W_FEATURES_STATE: usize = 0; // [C, Dv] X S_a
export let W_PSEUDO_VALUES: usize = 0; // [C, Dv] pseudo-values W
export let W_FEATURES_DSTATE: usize = 0; // [C, Dv] X dS_e
export let W_D_PSEUDO_VALUES: usize = 0; // [C, Dv]
export let W_D_RHS: usize = 0; // [C, Dv]
export let W_ROW_SCRATCH: usize = 0; // [C, Dv]
// states [Dk, Dv] (transposes [Dv, Dk])
export let W_STATE_T: usize = 0; // S_a^T
export let W_D_STATE_END_T: usize = 0; // dS_e^T
export let W_D_STATE_START: usize = 0; // dS_a
export let W_D_STATE: usize = 0; // running dS
export let W_CHECKPOINT_STATE: usize = 0; // running state of the checkpoint pass
// Dv vectors for coefs() / coefGrads()
export let W_COEF_OUT: usize = 0; // 6 x [Dv]
// per-column rules
export let W_COLUMN_COEFS: usize = 0; // f32 [3, C, Dv] gamma, a, b of every column
export let W_COLUMN_COEF_GRADS: usize = 0; // f32 [3, C, Dv] their gradients
export let W_COLUMN_VALUES: usize = 0; // f32 [C] values of the current column
export let W_COLUMN_END_DECAY: usize = 0; // f32 [Dv] c_e of every column
export let W_COLUMNS_FEATURES_STATE: usize = 0; // [C, Dv] X S_a
export let W_COLUMNS_QUERIES_STATE: usize = 0; // [C, Dv] Q S_a
export let W_COLUMNS_PSEUDO_VALUES: usize = 0; // [C, Dv] W of every column
export let W_COLUMNS_END_WEIGHTED: usize = 0; // [C, Dv] Gam[e, :] ⊙ W of every column
export let W_COLUMNS_FEATURES_DSTATE: usize = 0; // [C, Dv] X dS_e
export let W_COLUMNS_DECAYED_DOUT: usize = 0; // [C, Dv] diag(c) dO of every column
export let W_COLUMNS_SCALED_DRHS: usize = 0; // [C, Dv] -diag(a cp) dR of every column
export let W_COLUMNS_DQUERY_KEY_GRAM: usize = 0; // [C, C] dKqx summed over the columns
export let W_COLUMNS_DKEY_GRAM: usize = 0; // [C, C] dKxx summed over the columns
// window rule falcon3a (fw_chunk_window_additive.ts): the segment's pairs, P = C + B - 1 of them at most
export let W_WINDOW_SCALARS: usize = 0; // f64 [8, C] per position: gamma, g, stat, lam, den, eta, clamped, noop
export let W_WINDOW_BOUNDS: usize = 0; // i32 [2, C] per position: first pair of the window, window size
export let W_PAIR_FEATURES: usize = 0; // [P, Dk] pair features
export let W_PAIR_FEATURES_T: usize = 0; // [Dk, P] their transpose
export let W_PAIR_TARGETS: usize = 0; // [P, Dv] pair targets
export let W_PAIR_TARGETS_T: usize = 0; // [Dv, P] their transpose
export let W_WRITE_MASK: usize = 0; // [C, P] write mask M
export let W_PAIR_QUERY_GRAM: usize = 0; // [C, P] Q X^T
export let W_PAIR_MASKED_READOUT: usize = 0; // [C, P] Kqx ⊙ M
export let W_D_WRITE_MASK: usize = 0; // [C, P] dM
export let W_D_PAIR_MASKED_READOUT: usize = 0; // [C, P] dMq, then dKqx
export let W_D_PAIR_FEATURES: usize = 0; // [P, Dk] pair feature gradients
export let W_D_PAIR_TARGETS: usize = 0; // [P, Dv] pair target gradients
export let W_PAIR_PRODUCTS: usize = 0; // [P, Dv] X dS_e, then M[e, :] ⊙ Y
export let W_REVERSE_ROW: usize = 0; // f32 [P] running dM row of the reverse recursion
// regression window rule falcon3 (fw_chunk_window_delta.ts): R = C * B instance rows (only when asked for)
export let W_INSTANCE_STEP: usize = 0; // i32 [R] step of each instance row
export let W_INSTANCE_PAIR: usize = 0; // i32 [R] pair of each instance row
export let W_STEP_FIRST_INSTANCE: usize = 0; // i32 [C + 1] first instance row of each step
export let W_INSTANCE_W: usize = 0; // [R, Dv] pseudo-values W
export let W_INSTANCE_WT: usize = 0; // [Dv, R] W^T
export let W_D_INSTANCE_W: usize = 0; // [R, Dv] dW, then dR
export let W_INSTANCE_NEG_SOLVE: usize = 0; // [R, R] -A
export let W_D_INSTANCE_SOLVE: usize = 0; // [R, R] dR W^T
export let W_INSTANCE_READOUT: usize = 0; // [C, R] masked readout matrix
export let W_D_INSTANCE_READOUT: usize = 0; // [C, R] its gradient
export let W_PAIR_GRAM: usize = 0; // [P, P] pair Gram X X^T
export let W_D_PAIR_GRAM: usize = 0; // [P, P] its gradient
export let W_PAIR_FEATURES_STATE: usize = 0; // [P, Dv] X S_a
export let W_PAIR_END_SUMS: usize = 0; // [P, Dv] pair sums of Gam[e, s] W
export let W_PAIR_SCALED_DRHS: usize = 0; // [P, Dv] pair sums of -g cp dR
export let W_D_STEP_GAIN: usize = 0; // f64 [C] dg per step

function up(x: usize): usize {
  return (x + 15) & ~(<usize> 15);
}

/**
 * Set the offsets for chunks of `c` positions and return the bytes of the work area (`w`: the window
 * size B of falcon3a, whose arrays of pairs hold `c + w - 1` rows; 1 for the other rules;
 * `instances`: falcon3's arrays of `c * w` instance rows too).
 */
export function chunkLayout(c: i32, dk: i32, dv: i32, w: i32, instances: bool = false): usize {
  const cc = <usize> c;
  const f64v = cc << 3;
  const f32v = cc << 2;
  const mat = (cc * cc) << 2;
  const rk = (cc * <usize> dk) << 2;
  const rv = (cc * <usize> dv) << 2;
  const sd = (<usize> dk * <usize> dv) << 2;
  let o: usize = 0;
  W_LOG_DECAY = o;
  o = up(o + f64v);
  W_D_LOG_DECAY = o;
  o = up(o + f64v);
  W_FEATURE_NORM_SQ = o;
  o = up(o + f64v);
  W_GAMMA = o;
  o = up(o + f32v);
  W_A_COEF = o;
  o = up(o + f32v);
  W_B_COEF = o;
  o = up(o + f32v);
  W_CUM_DECAY = o;
  o = up(o + f32v);
  W_A_PREV_DECAY = o;
  o = up(o + f32v);
  W_DECAY_TO_END = o;
  o = up(o + f32v);
  W_D_ACOEF = o;
  o = up(o + f32v);
  W_D_BCOEF = o;
  o = up(o + f32v);
  W_D_DECAY = o;
  o = up(o + f32v);
  W_DECAY_MATRIX = o;
  o = up(o + mat);
  W_KEY_GRAM = o;
  o = up(o + mat);
  W_QUERY_KEY_GRAM = o;
  o = up(o + mat);
  W_MASKED_READOUT = o;
  o = up(o + mat);
  W_NEG_SOLVE_MATRIX = o;
  o = up(o + mat);
  W_D_MASKED_READOUT = o;
  o = up(o + mat);
  W_D_SOLVE_MATRIX = o;
  o = up(o + mat);
  W_D_DECAY_MATRIX = o;
  o = up(o + mat);
  W_FEATURES = o;
  o = up(o + rk);
  W_FEATURES_T = o;
  o = up(o + rk);
  W_PSEUDO_VALUES_T = o;
  o = up(o + rv);
  W_D_RHS_STATE_T = o;
  o = up(o + rk);
  W_D_OUT_STATE_T = o;
  o = up(o + rk);
  W_D_FEATURES = o;
  o = up(o + rk);
  W_D_QUERIES = o;
  o = up(o + rk);
  W_VALUES = o;
  o = up(o + rv);
  W_FEATURES_STATE = o;
  o = up(o + rv);
  W_PSEUDO_VALUES = o;
  o = up(o + rv);
  W_FEATURES_DSTATE = o;
  o = up(o + rv);
  W_D_PSEUDO_VALUES = o;
  o = up(o + rv);
  W_D_RHS = o;
  o = up(o + rv);
  W_ROW_SCRATCH = o;
  o = up(o + rv);
  W_STATE_T = o;
  o = up(o + sd);
  W_D_STATE_END_T = o;
  o = up(o + sd);
  W_D_STATE_START = o;
  o = up(o + sd);
  W_D_STATE = o;
  o = up(o + sd);
  W_CHECKPOINT_STATE = o;
  o = up(o + sd);
  W_COEF_OUT = o;
  o = up(o + ((6 * <usize> dv) << 2));
  W_COLUMN_COEFS = o;
  o = up(o + 3 * rv);
  W_COLUMN_COEF_GRADS = o;
  o = up(o + 3 * rv);
  W_COLUMN_VALUES = o;
  o = up(o + f32v);
  W_COLUMN_END_DECAY = o;
  o = up(o + ((<usize> dv) << 2));
  W_COLUMNS_FEATURES_STATE = o;
  o = up(o + rv);
  W_COLUMNS_QUERIES_STATE = o;
  o = up(o + rv);
  W_COLUMNS_PSEUDO_VALUES = o;
  o = up(o + rv);
  W_COLUMNS_END_WEIGHTED = o;
  o = up(o + rv);
  W_COLUMNS_FEATURES_DSTATE = o;
  o = up(o + rv);
  W_COLUMNS_DECAYED_DOUT = o;
  o = up(o + rv);
  W_COLUMNS_SCALED_DRHS = o;
  o = up(o + rv);
  W_COLUMNS_DQUERY_KEY_GRAM = o;
  o = up(o + mat);
  W_COLUMNS_DKEY_GRAM = o;
  o = up(o + mat);
  const pn = <usize> (c + (w > 1 ? w : 1) - 1);
  const pm = (cc * pn) << 2;
  W_WINDOW_SCALARS = o;
  o = up(o + 8 * f64v);
  W_WINDOW_BOUNDS = o;
  o = up(o + 2 * f32v);
  W_PAIR_FEATURES = o;
  o = up(o + ((pn * <usize> dk) << 2));
  W_PAIR_FEATURES_T = o;
  o = up(o + ((pn * <usize> dk) << 2));
  W_PAIR_TARGETS = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_PAIR_TARGETS_T = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_WRITE_MASK = o;
  o = up(o + pm);
  W_PAIR_QUERY_GRAM = o;
  o = up(o + pm);
  W_PAIR_MASKED_READOUT = o;
  o = up(o + pm);
  W_D_WRITE_MASK = o;
  o = up(o + pm);
  W_D_PAIR_MASKED_READOUT = o;
  o = up(o + pm);
  W_D_PAIR_FEATURES = o;
  o = up(o + ((pn * <usize> dk) << 2));
  W_D_PAIR_TARGETS = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_PAIR_PRODUCTS = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_REVERSE_ROW = o;
  o = up(o + (pn << 2));
  const rn = instances ? cc * <usize> (w > 1 ? w : 1) : 0;
  const pp = instances ? pn : 0;
  W_INSTANCE_STEP = o;
  o = up(o + (rn << 2));
  W_INSTANCE_PAIR = o;
  o = up(o + (rn << 2));
  W_STEP_FIRST_INSTANCE = o;
  o = up(o + ((cc + 1) << 2));
  W_INSTANCE_W = o;
  o = up(o + ((rn * <usize> dv) << 2));
  W_INSTANCE_WT = o;
  o = up(o + ((rn * <usize> dv) << 2));
  W_D_INSTANCE_W = o;
  o = up(o + ((rn * <usize> dv) << 2));
  W_INSTANCE_NEG_SOLVE = o;
  o = up(o + ((rn * rn) << 2));
  W_D_INSTANCE_SOLVE = o;
  o = up(o + ((rn * rn) << 2));
  W_INSTANCE_READOUT = o;
  o = up(o + ((cc * rn) << 2));
  W_D_INSTANCE_READOUT = o;
  o = up(o + ((cc * rn) << 2));
  W_PAIR_GRAM = o;
  o = up(o + ((pp * pp) << 2));
  W_D_PAIR_GRAM = o;
  o = up(o + ((pp * pp) << 2));
  W_PAIR_FEATURES_STATE = o;
  o = up(o + ((pp * <usize> dv) << 2));
  W_PAIR_END_SUMS = o;
  o = up(o + ((pp * <usize> dv) << 2));
  W_PAIR_SCALED_DRHS = o;
  o = up(o + ((pp * <usize> dv) << 2));
  W_D_STEP_GAIN = o;
  o = up(o + (instances ? f64v : 0));
  W_CONTEXT = o;
  o = up(o + offsetof<ChunkContext>());
  return o;
}

/**
 * Set the context's pointers to the arrays every family shares (the family setups set their own),
 * for the work area at `base` of the current layout (`dv`: the value width Dv).
 */
export function placeWorkArea(ctx: ChunkContext, base: usize, dv: i32): void {
  ctx.logDecay = base + W_LOG_DECAY;
  ctx.dLogDecay = base + W_D_LOG_DECAY;
  ctx.featureNormSq = base + W_FEATURE_NORM_SQ;
  ctx.gamma = base + W_GAMMA;
  ctx.aCoef = base + W_A_COEF;
  ctx.bCoef = base + W_B_COEF;
  ctx.cumDecay = base + W_CUM_DECAY;
  ctx.aPrevDecay = base + W_A_PREV_DECAY;
  ctx.decayToEnd = base + W_DECAY_TO_END;
  ctx.dACoef = base + W_D_ACOEF;
  ctx.dBCoef = base + W_D_BCOEF;
  ctx.dDecay = base + W_D_DECAY;
  ctx.decayMatrix = base + W_DECAY_MATRIX;
  ctx.keyGram = base + W_KEY_GRAM;
  ctx.queryKeyGram = base + W_QUERY_KEY_GRAM;
  ctx.maskedReadout = base + W_MASKED_READOUT;
  ctx.negSolveMatrix = base + W_NEG_SOLVE_MATRIX;
  ctx.dMaskedReadout = base + W_D_MASKED_READOUT;
  ctx.dSolveMatrix = base + W_D_SOLVE_MATRIX;
  ctx.dDecayMatrix = base + W_D_DECAY_MATRIX;
  ctx.features = base + W_FEATURES;
  ctx.featuresT = base + W_FEATURES_T;
  ctx.pseudoValuesT = base + W_PSEUDO_VALUES_T;
  ctx.dRhsStateT = base + W_D_RHS_STATE_T;
  ctx.dOutStateT = base + W_D_OUT_STATE_T;
  ctx.dFeatures = base + W_D_FEATURES;
  ctx.dQueries = base + W_D_QUERIES;
  ctx.values = base + W_VALUES;
  ctx.featuresState = base + W_FEATURES_STATE;
  ctx.pseudoValues = base + W_PSEUDO_VALUES;
  ctx.featuresDState = base + W_FEATURES_DSTATE;
  ctx.dPseudoValues = base + W_D_PSEUDO_VALUES;
  ctx.dRhs = base + W_D_RHS;
  ctx.rowScratch = base + W_ROW_SCRATCH;
  ctx.stateT = base + W_STATE_T;
  ctx.dStateEndT = base + W_D_STATE_END_T;
  ctx.dStateStart = base + W_D_STATE_START;
  ctx.dState = base + W_D_STATE;
  ctx.checkpointState = base + W_CHECKPOINT_STATE;
  ctx.coefOut = base + W_COEF_OUT;
  ctx.coefGradIn = ctx.coefOut + ((3 * <usize> dv) << 2);
  ctx.columnCoefs = base + W_COLUMN_COEFS;
  ctx.columnCoefGrads = base + W_COLUMN_COEF_GRADS;
  ctx.columnValues = base + W_COLUMN_VALUES;
}
