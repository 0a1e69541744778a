// @ts-nocheck -- the worker graph must need no type-check (module doc); pool.ts checks WorkerStart
/**
 * A pool worker: instantiates the kernels (the compiled module it receives) on the shared memory,
 * then waits on the control block's generation word and claims tasks of each published job (see
 * pool_layout.ts). It never returns to its event loop until the pool bumps the epoch word (then it
 * closes itself). Handshake: it posts "loaded", receives a {@linkcode WorkerStart}, posts "ready".
 *
 * After a job it polls the generation word for `spinMs` before it sleeps (a job that follows at once
 * then needs no futex wake-up). Every wait is timed, so that the thread regularly returns to V8. The
 * worker's module graph holds no TypeScript that needs checking (`@ts-nocheck` here, plain JavaScript in pool_layout.js): under
 * `deno test`, a worker whose graph needed a type-check at spawn time sometimes never started
 * (Deno 2.9.6). It imports nothing else: it receives the compiled module instead of decoding it.
 *
 * @module
 */

import { claimTasks, CTL_EPOCH, CTL_GEN, CTL_SCRATCH, KERNELS } from "./pool_layout.js";

/** The start message of a worker. */
export interface WorkerStart {
  /** The shared memory. */
  memory: WebAssembly.Memory;
  /** The compiled kernels (the main thread's, so every thread runs the same build). */
  module: WebAssembly.Module;
  /** Byte address of the control block. */
  ctl: number;
  /** Thread id (1..threads-1). */
  id: number;
  /** The pool's epoch at start; the worker exits once the epoch word differs. */
  epoch: number;
  /** Milliseconds to poll the generation word after a job before sleeping on it. */
  spinMs: number;
}

const scope = self as unknown as {
  onmessage: ((e: MessageEvent<WorkerStart>) => void) | null;
  postMessage(m: unknown): void;
  close(): void;
};

scope.onmessage = (e: MessageEvent<WorkerStart>) => {
  const { memory, module, ctl, id, epoch, spinMs } = e.data;
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  const fns = KERNELS.map((name) => instance.exports[name] as (p: number, t: number, s: number) => void);
  const i32 = new Int32Array(memory.buffer); // the control block sits below the heap: never moves
  const base = ctl >>> 2;
  let seen = Atomics.load(i32, base + CTL_GEN);
  scope.onmessage = null;
  scope.postMessage("ready");
  for (;;) {
    // poll briefly (a back-to-back job starts without a wake-up), then sleep until notified
    const spinUntil = performance.now() + spinMs;
    while (Atomics.load(i32, base + CTL_GEN) === seen && performance.now() < spinUntil);
    if (Atomics.load(i32, base + CTL_GEN) === seen) {
      if (Atomics.wait(i32, base + CTL_GEN, seen, 50) === "timed-out") continue;
    }
    seen = Atomics.load(i32, base + CTL_GEN);
    if (Atomics.load(i32, base + CTL_EPOCH) !== epoch) {
      scope.close();
      return;
    }
    const error = claimTasks(i32, base, seen, (kernel, params, task) => {
      fns[kernel](params, task, Atomics.load(i32, base + CTL_SCRATCH + id));
    });
    if (error !== undefined) console.error(`falcon WASM pool worker ${id}: a task failed:`, error);
  }
};
scope.postMessage("loaded");
