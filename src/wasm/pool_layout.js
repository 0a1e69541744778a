/* @ts-self-types="./pool_layout.d.ts" */
/**
 * Layout of the thread pool's control block (int32 words in the shared memory) and the table of
 * kernels a job may name. Shared by the main thread (pool.ts) and the workers (worker_source.ts, which copies these exports into the worker source).
 *
 * Plain JavaScript (types in pool_layout.d.ts) on purpose: the worker's module graph must hold no
 * TypeScript to check. Under `deno test`, a worker whose graph needed a type-check at spawn time
 * sometimes never started (seen with Deno 2.9.6).
 *
 * A job is published as: slot (by generation parity) = kernel id, params pointer, task count; then the
 * task counter word = `(generation & 0x7ff) << 20 | next task`; then the generation word is bumped
 * and notified. Threads claim tasks by compare-exchange on the counter word, so a late thread can
 * never claim a task of a job that has already moved on.
 *
 * @module
 */

/** Word index of the generation counter (workers wait on it). */
export const CTL_GEN = 0;
/** Word index of the task counter word. */
export const CTL_COUNTER = 1;
/** Word index of the count of finished tasks (the main thread waits on it). */
export const CTL_DONE = 2;
/** Word index of the worker epoch: a worker started in another epoch exits. */
export const CTL_EPOCH = 3;
/** Word index of the error flag: set when a task threw (the job still completes). */
export const CTL_ERROR = 12;
/** Word index of the two job slots (4 words each: kernel, params, tasks, unused; words 4..11). */
export const CTL_SLOTS = 4;
/** Word index of the per-thread scratch pointers (thread 0 is the main thread). */
export const CTL_SCRATCH = 16;
/** Most threads a pool may have. */
export const MAX_THREADS = 64;
/** Bytes of the control block. */
export const CTL_BYTES = (CTL_SCRATCH + MAX_THREADS) * 4;

/** Kernels callable as `(params, task, scratch)`, by id. */
export const KERNELS = ["fw_forward_f32", "fw_backward_f32", "gemm_f32", "dense_task_f32"];

/**
 * Claim and run tasks of generation `gen` until none is left. `run(kernel, params, task)` executes one.
 * A task that throws still counts as done (so no thread waits forever); the error flag is set and the
 * first error is returned.
 */
export function claimTasks(i32, base, gen, run) {
  const g = gen & 0x7ff;
  const slot = base + CTL_SLOTS + (gen & 1) * 4;
  let error = undefined;
  for (;;) {
    const cur = Atomics.load(i32, base + CTL_COUNTER);
    if (cur >>> 20 !== g) return error;
    const idx = cur & 0xfffff;
    const n = Atomics.load(i32, slot + 2);
    if (idx >= n) return error;
    if (Atomics.compareExchange(i32, base + CTL_COUNTER, cur, cur + 1) !== cur) continue;
    try {
      run(Atomics.load(i32, slot), Atomics.load(i32, slot + 1), idx);
    } catch (e) {
      error ??= e;
      Atomics.store(i32, base + CTL_ERROR, 1);
    } finally {
      if (Atomics.add(i32, base + CTL_DONE, 1) + 1 === n) Atomics.notify(i32, base + CTL_DONE);
    }
  }
}
