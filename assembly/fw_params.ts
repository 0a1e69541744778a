/**
 * Parameter block of the fast-weight kernels: one float64 slot per field, written by the TypeScript side
 * (`src/wasm/fast_weight.ts`) and read here. This file is the single source of the layout:
 * `scripts/build_wasm.ts` copies every `export const P_*` into the generated TypeScript module.
 *
 * Integer fields (sizes, flags, byte pointers into the shared memory) are stored as exact float64 values.
 */

/** Rule id: index into RULES of src/rules/catalog.ts (the ids of the generated fw_rules.ts). */
export const P_RULE: i32 = 0;
/** 0 = prefix, 1 = same-step. */
export const P_ALIGN: i32 = 1;
/** 0 = rms, 1 = l2, 2 = none. */
export const P_QKNORM: i32 = 2;
/** 1 = coupled ridge. */
export const P_COUPLING: i32 = 3;
/** Window size W of falcon3/3a. */
export const P_WINDOW: i32 = 4;
/** Step-denominator stabiliser. */
export const P_EPS: i32 = 5;
/** Positive-decay floor. */
export const P_EPS_GAMMA: i32 = 6;
/** RMSNorm stabiliser. */
export const P_EPS_RMS: i32 = 7;
/** Batch rows. */
export const P_B: i32 = 8;
/** Positions. */
export const P_T: i32 = 9;
/** Heads. */
export const P_H: i32 = 10;
/** Key size. */
export const P_DK: i32 = 11;
/** Value size. */
export const P_DV: i32 = 12;
/** Width of beta per position and head: 1, or Dv for falcon2/falcon2a. */
export const P_BETA_W: i32 = 13;
/** Pointers to q, k `[B, T, H, Dk]`, v `[B, T, H, Dv]`, beta, lambdabar `[B, T, H]`. */
export const P_Q: i32 = 14;
export const P_K: i32 = 15;
export const P_V: i32 = 16;
export const P_BETA: i32 = 17;
export const P_LAMBDA: i32 = 18;
/** Sequence-start flags, u8 `[B, T]`, or 0. */
export const P_STARTS: i32 = 19;
/** Reset state `[B, H, Dk, Dv]`, or 0 for zeros. */
export const P_S0: i32 = 20;
/** 1 when a carry is given (the next five pointers are then valid). */
export const P_HAS_CARRY: i32 = 21;
export const P_C_STATE: i32 = 22;
export const P_C_LASTKEY: i32 = 23;
export const P_C_WX: i32 = 24;
export const P_C_WY: i32 = 25;
/** i32 `[B]`. */
export const P_C_COUNT: i32 = 26;
/** Outputs of the forward: o `[B, T, H, Dv]` and the carry out (same layout as the carry in). */
export const P_O: i32 = 27;
export const P_OUT_STATE: i32 = 28;
export const P_OUT_LASTKEY: i32 = 29;
export const P_OUT_WX: i32 = 30;
export const P_OUT_WY: i32 = 31;
export const P_OUT_COUNT: i32 = 32;
/** f32 `[H]`: Mamba-2 A_h and RetNet g_h per head. */
export const P_MAMBA_A: i32 = 33;
export const P_RETNET_G: i32 = 34;
/** Backward: upstream gradient dO `[B, T, H, Dv]` and the gradient outputs (overwritten). */
export const P_DO: i32 = 35;
export const P_DQ: i32 = 36;
export const P_DK_: i32 = 37;
export const P_DV_: i32 = 38;
export const P_DBETA: i32 = 39;
export const P_DLAMBDA: i32 = 40;
export const P_DS0: i32 = 41;
export const P_DCARRY: i32 = 42;
/** Checkpoint interval of the backward (states are stored every C positions). */
export const P_CHUNK: i32 = 43;
/** 0 = recurrent; 1 = chunk-parallel (forms "chunk" and "parallel"; every rule). */
export const P_FORM: i32 = 44;
/** Number of slots. */
export const P_COUNT: i32 = 45;
