/**
 * Dense ops as thread-pool jobs: fills the one parameter block of `dense_task_f32`
 * (assembly/dense_tasks.ts; layout generated from assembly/dense_params.ts) and runs it on as many
 * threads as the op's work pays for. The block is allocated once per backend and reused by every job
 * (jobs are synchronous and never nested), so an op allocates nothing.
 *
 * Bands never change results: each item (element, row or channel) is computed exactly as by the whole
 * op on one thread, so the thread count does not change a single bit.
 *
 * @module
 */

import { DENSE_OP, DENSE_SLOT } from "./_generated_wasm.ts";
import type { WasmContext } from "./context.ts";

/** Op ids of `dense_task_f32`. */
export { DENSE_OP };

/** Work units (about one cheap element operation each) below which a job gets no extra thread. */
const WORK_PER_TASK = 1 << 14;

/** Element bands start at multiples of 16 floats (64 bytes: no two threads write one cache line). */
export const ELEMENT_ALIGN = 16;

/** Runs dense ops on the thread pool through one reused parameter block. */
export class DenseJobs {
  readonly #ctx: WasmContext;
  readonly #params: number;

  /** Allocate the parameter block on `ctx`'s heap. */
  constructor(ctx: WasmContext) {
    this.#ctx = ctx;
    this.#params = ctx.heap.alloc(DENSE_SLOT.SLOTS * 8);
  }

  /**
   * Run `op` over `count` items in bands starting at multiples of `align` items; `work` estimates the
   * whole op's cost (in cheap element operations) and sets how many threads it gets; `args` fill the
   * op's argument slots in order (assembly/dense_params.ts); every thread gets `scratchBytes` of scratch.
   */
  run(
    op: number,
    count: number,
    align: number,
    work: number,
    args: readonly number[],
    scratchBytes = 0,
  ): void {
    if (args.length > DENSE_SLOT.SLOTS - DENSE_SLOT.ARGS) {
      throw new RangeError(`dense op ${op}: ${args.length} arguments do not fit the parameter block`);
    }
    if (count === 0) return;
    const pool = this.#ctx.pool;
    const units = Math.ceil(count / align);
    const tasks = Math.max(1, Math.min(pool.threads, units, Math.floor(work / WORK_PER_TASK)));
    const f64 = this.#ctx.heap.f64;
    const base = this.#params >>> 3;
    f64[base + DENSE_SLOT.OP] = op;
    f64[base + DENSE_SLOT.TASKS] = tasks;
    f64[base + DENSE_SLOT.COUNT] = count;
    f64[base + DENSE_SLOT.ALIGN] = align;
    for (let i = 0; i < args.length; i++) f64[base + DENSE_SLOT.ARGS + i] = args[i];
    pool.run("dense_task_f32", this.#params, tasks, scratchBytes);
  }

  /** Run an element-wise `op` over `n` floats costing `costPerElement` each. */
  elements(op: number, n: number, costPerElement: number, args: readonly number[]): void {
    this.run(op, n, ELEMENT_ALIGN, n * costPerElement, args);
  }
}
