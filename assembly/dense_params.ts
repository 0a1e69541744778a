/**
 * Parameter block of `dense_task_f32` (assembly/dense_tasks.ts): one float64 slot per field, written by
 * the TypeScript side (`src/wasm/dense_jobs.ts`) and read there. This file is the single source of the
 * layout and of the op ids: `scripts/build_wasm.ts` copies every `export const D_*` and `OP_*` into the
 * generated TypeScript module.
 *
 * A job runs one op over `D_COUNT` items (elements, rows or channels: the op says which) cut into
 * `D_TASKS` bands whose starts are multiples of `D_ALIGN` items; the op's own arguments (byte pointers,
 * sizes, scalars, all exact float64 values) follow from slot `D_ARGS` in the order its case reads them.
 */

/** Op id (one of the `OP_*` below). */
export const D_OP: i32 = 0;
/** Number of bands (tasks) the items are cut into. */
export const D_TASKS: i32 = 1;
/** Number of items. */
export const D_COUNT: i32 = 2;
/** Band starts are multiples of this many items. */
export const D_ALIGN: i32 = 3;
/** First argument slot. */
export const D_ARGS: i32 = 4;
/** Slots in all (the longest argument list, AdamW's 11, after D_ARGS). */
export const D_SLOTS: i32 = 16;

/** `out = a + b`; items: elements. Args: out, a, b. */
export const OP_ADD: i32 = 0;
/** `out = a * b`; items: elements. Args: out, a, b. */
export const OP_MUL: i32 = 1;
/** `y += alpha x`; items: elements. Args: y, x, alpha. */
export const OP_AXPY: i32 = 2;
/** `x = value`; items: elements. Args: x, value. */
export const OP_FILL: i32 = 3;
/** `dst = src`; items: elements. Args: dst, src. */
export const OP_COPY: i32 = 4;
/** `out = scale f(x)`; items: elements. Args: kind, out, x, scale. */
export const OP_ACTIVATION_FORWARD: i32 = 5;
/** `dx += dOut scale f'(x)`; items: elements. Args: kind, dx, dOut, x, scale. */
export const OP_ACTIVATION_BACKWARD: i32 = 6;
/** `out = silu(gate) up`; items: elements. Args: out, gate, up. */
export const OP_SWIGLU_FORWARD: i32 = 7;
/** SwiGLU backward (accumulates); items: elements. Args: dGate, dUp, dOut, gate, up. */
export const OP_SWIGLU_BACKWARD: i32 = 8;
/** One AdamW step; items: elements. Args: param, grad, m, v, lr, beta1, beta2, eps, decay, step, gradScale. */
export const OP_ADAMW: i32 = 9;
/** RMSNorm forward; items: rows. Args: out, rstd, x, weight (0: none), D, eps. */
export const OP_RMSNORM_FORWARD: i32 = 10;
/** RMSNorm backward into dx (accumulates); items: rows. Args: dx, dOut, x, weight (0: none), rstd, D. */
export const OP_RMSNORM_BACKWARD_INPUT: i32 = 11;
/** RMSNorm backward into dWeight (accumulates, rows in order); items: columns. Args: dWeight, dOut, x, rstd, N, D. */
export const OP_RMSNORM_BACKWARD_WEIGHT: i32 = 12;
/** Short convolution forward; items: channels. Args: out, x, weight, starts (0: none), B, T, C, W. */
export const OP_SHORTCONV_FORWARD: i32 = 13;
/** Short convolution backward (accumulates); items: channels. Args: dx, dWeight, dOut, x, weight, starts, B, T, C, W. */
export const OP_SHORTCONV_BACKWARD: i32 = 14;
/** Embedding lookup `out[n] = table[ids[n]]`; items: rows. Args: out, table, ids (int32), D. */
export const OP_EMBEDDING_FORWARD: i32 = 15;
/** Embedding backward `dTable[ids[n]] += dOut[n]` (rows in order); items: columns. Args: dTable, dOut, ids, N, D. */
export const OP_EMBEDDING_BACKWARD: i32 = 16;
/** Cross-entropy forward; items: rows. Args: losses, logits, targets (int32), weights (float32), V. */
export const OP_CROSS_ENTROPY_FORWARD: i32 = 17;
/** Cross-entropy backward (accumulates); items: rows. Args: dLogits, logits, targets, weights, V. */
export const OP_CROSS_ENTROPY_BACKWARD: i32 = 18;
