/**
 * Types of pool_layout.js (the thread pool's control block and kernel table).
 *
 * @module
 */

/** Word index of the generation counter (workers wait on it). */
export declare const CTL_GEN: 0;
/** Word index of the task counter word. */
export declare const CTL_COUNTER: 1;
/** Word index of the count of finished tasks (the main thread waits on it). */
export declare const CTL_DONE: 2;
/** Word index of the worker epoch: a worker started in another epoch exits. */
export declare const CTL_EPOCH: 3;
/** Word index of the error flag: set when a task threw (the job still completes). */
export declare const CTL_ERROR: 12;
/** Word index of the two job slots (4 words each). */
export declare const CTL_SLOTS: 4;
/** Word index of the per-thread scratch pointers (thread 0 is the main thread). */
export declare const CTL_SCRATCH: 16;
/** Most threads a pool may have. */
export declare const MAX_THREADS: 64;
/** Bytes of the control block. */
export declare const CTL_BYTES: number;
/** Kernels callable as `(params, task, scratch)`, by id. */
export declare const KERNELS: readonly ["fw_forward_f32", "fw_backward_f32", "gemm_f32", "dense_task_f32"];
/** A kernel name. */
export type KernelName = typeof KERNELS[number];
/**
 * Claim and run tasks of generation `gen` until none is left; returns the first error a task threw.
 * A task that throws still counts as done (so no thread waits forever) and sets the error flag.
 */
export declare function claimTasks(
  i32: Int32Array,
  base: number,
  gen: number,
  run: (kernel: number, params: number, task: number) => void,
): unknown;
