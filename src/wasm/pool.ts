/**
 * The thread pool: Deno Workers sharing the one WebAssembly.Memory. Jobs are synchronous for the
 * caller: the main thread publishes a job in the control block, claims tasks itself, polls for `spinMs`
 * and then blocks in `Atomics.wait` until every task is done; a worker polls as long after each job, so
 * back-to-back jobs (the GEMMs of a training step) start without a futex wake-up. Workers that are
 * not yet started simply do not take part.
 *
 * Idle workers are terminated after `idleMs` without a job (an unref'd timer checks), so a program
 * that created a backend can exit; the next multi-task job starts them again (they join when ready).
 *
 * @module
 */

import type { Heap } from "./heap.ts";
import {
  claimTasks,
  CTL_BYTES,
  CTL_COUNTER,
  CTL_DONE,
  CTL_EPOCH,
  CTL_ERROR,
  CTL_GEN,
  CTL_SCRATCH,
  CTL_SLOTS,
  type KernelName,
  KERNELS,
  MAX_THREADS,
} from "./pool_layout.js";
import type { WasmExports } from "./module.ts";

import { type WorkerStart, workerUrl } from "./worker_source.ts";

/** Default of {@linkcode PoolOptions.spinMs}. */
const DEFAULT_SPIN_MS = 0.05;

/** Options of {@linkcode ThreadPool}. */
export interface PoolOptions {
  /** Threads including the main thread (1 = no workers). */
  threads: number;
  /** Terminate workers after this many milliseconds without a job (default 1000). */
  idleMs?: number;
  /**
   * Milliseconds a thread polls before it sleeps: a worker after its job (a back-to-back job then starts
   * without a futex wake-up), the caller while the last tasks finish (default 0.05; 0 = sleep at once).
   */
  spinMs?: number;
  /** The compiled kernels the workers instantiate (the caller's instance runs the same module). */
  module: WebAssembly.Module;
}

/** Runs kernels over tasks on the main thread plus `threads - 1` workers. */
export class ThreadPool {
  /** Threads including the main thread. */
  readonly threads: number;
  readonly #heap: Heap;
  readonly #exports: WasmExports;
  readonly #fns: ((p: number, t: number, s: number) => void)[];
  readonly #ctl: number;
  readonly #module: WebAssembly.Module;
  #gen = 0;
  #workers: (Worker | undefined)[] = [];
  #scratch: number[] = [];
  #scratchBytes = 0;
  #lastUse = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #idleMs: number;
  #spinMs: number;
  #closed = false;

  /** Create the pool (workers start in the background; await {@linkcode ThreadPool.ready}). */
  constructor(heap: Heap, exports: WasmExports, options: PoolOptions) {
    if (!Number.isInteger(options.threads) || options.threads < 1 || options.threads > MAX_THREADS) {
      throw new RangeError(`threads must be an integer in 1..${MAX_THREADS}, got ${options.threads}`);
    }
    this.threads = options.threads;
    this.#heap = heap;
    this.#exports = exports;
    this.#fns = KERNELS.map((name) => exports[name] as (p: number, t: number, s: number) => void);
    this.#ctl = heap.alloc(CTL_BYTES);
    heap.u8.fill(0, this.#ctl, this.#ctl + CTL_BYTES);
    this.#idleMs = options.idleMs ?? 1000;
    this.#spinMs = options.spinMs ?? DEFAULT_SPIN_MS;
    if (!(this.#spinMs >= 0 && this.#spinMs <= 10)) {
      throw new RangeError(`spinMs must be in 0..10, got ${options.spinMs}`);
    }
    this.#module = options.module;
  }

  #spawn(): Promise<void>[] {
    const ready: Promise<void>[] = [];
    for (let id = 1; id < this.threads; id++) {
      if (this.#workers[id]) continue;
      const w = new Worker(workerUrl(), { type: "module" });
      this.#workers[id] = w;
      const epoch = Atomics.load(this.#heap.i32, (this.#ctl >>> 2) + CTL_EPOCH);
      const start: WorkerStart = {
        memory: this.#heap.memory,
        module: this.#module,
        ctl: this.#ctl,
        id,
        epoch,
        spinMs: this.#spinMs,
      };
      // handshake: the worker says "loaded" once its module runs, gets the start message, then says "ready"
      // (a message posted while a slow-loading worker is still being prepared can be lost)
      ready.push(
        new Promise<void>((resolve, reject) => {
          w.onmessage = (e: MessageEvent<string>) => {
            if (e.data === "loaded") w.postMessage(start);
            else if (e.data === "ready") resolve();
          };
          w.onerror = (e) => {
            e.preventDefault();
            reject(new Error(`pool worker ${id} failed: ${e.message}`));
          };
        }),
      );
    }
    if (ready.length > 0 && this.#timer === undefined) {
      const timer = setInterval(() => this.#reapIdle(), Math.max(10, this.#idleMs / 2));
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
    return ready;
  }

  /**
   * Start the workers and wait until each has instantiated the kernels, or at most `timeoutMs`: the
   * pool never depends on a worker being up (tasks are claimed dynamically), and a worker that is late
   * (seen under `deno test` while its module graph was being checked) joins when it is ready.
   */
  async ready(timeoutMs = 5000): Promise<void> {
    // a ref'd timer keeps the event loop alive while workers load (their loading holds no op of ours)
    let timeout: ReturnType<typeof setTimeout> | undefined;
    const keepAlive = setInterval(() => {}, 500);
    try {
      await Promise.race([
        Promise.all(this.#spawn()),
        new Promise<void>((resolve) => (timeout = setTimeout(resolve, timeoutMs))),
      ]);
    } finally {
      clearInterval(keepAlive);
      clearTimeout(timeout);
    }
    this.#lastUse = performance.now();
  }

  #reapIdle(): void {
    if (performance.now() - this.#lastUse < this.#idleMs) return;
    this.#terminateWorkers();
  }

  #terminateWorkers(): void {
    // wake every worker into a new epoch: each sees it and closes itself
    const i32 = this.#heap.i32;
    const base = this.#ctl >>> 2;
    Atomics.add(i32, base + CTL_EPOCH, 1);
    Atomics.store(i32, base + CTL_GEN, ++this.#gen);
    Atomics.notify(i32, base + CTL_GEN);
    for (const w of this.#workers) w?.terminate();
    this.#workers = [];
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Make every thread's scratch area at least `bytes` long. */
  #ensureScratch(bytes: number): void {
    if (bytes <= this.#scratchBytes && this.#scratch.length === this.threads) return;
    const size = Math.max(bytes, this.#scratchBytes);
    const i32 = this.#heap.i32;
    for (let id = 0; id < this.threads; id++) {
      if (this.#scratch[id] !== undefined) this.#heap.free(this.#scratch[id]);
      this.#scratch[id] = this.#heap.alloc(size);
      i32[(this.#ctl >>> 2) + CTL_SCRATCH + id] = this.#scratch[id];
    }
    this.#scratchBytes = size;
  }

  /** Scratch pointer of the main thread (thread 0), at least `bytes` long. */
  mainScratch(bytes: number): number {
    this.#ensureScratch(bytes);
    return this.#scratch[0];
  }

  /** Run `kernel(params, task, scratch)` for `task = 0..tasks-1`; returns when all are done. */
  run(kernel: KernelName, params: number, tasks: number, scratchBytes: number): void {
    if (this.#closed) throw new Error("the WASM backend is closed");
    if (tasks > 0xfffff) throw new RangeError(`too many tasks in one job: ${tasks}`);
    this.#ensureScratch(scratchBytes);
    const id = KERNELS.indexOf(kernel);
    const fn = this.#fns[id];
    if (tasks <= 1 || this.threads === 1) {
      for (let t = 0; t < tasks; t++) fn(params, t, this.#scratch[0]);
      return;
    }
    if (this.#workers.length === 0) this.#spawn(); // restarted after idling; they join when ready
    const i32 = this.#heap.i32;
    const base = this.#ctl >>> 2;
    const gen = ++this.#gen;
    const slot = base + CTL_SLOTS + (gen & 1) * 4;
    Atomics.store(i32, slot, id);
    Atomics.store(i32, slot + 1, params);
    Atomics.store(i32, slot + 2, tasks);
    Atomics.store(i32, base + CTL_DONE, 0);
    Atomics.store(i32, base + CTL_ERROR, 0);
    Atomics.store(i32, base + CTL_COUNTER, (gen & 0x7ff) << 20);
    Atomics.store(i32, base + CTL_GEN, gen);
    Atomics.notify(i32, base + CTL_GEN);
    const scratch = this.#scratch[0];
    const error = claimTasks(i32, base, gen, (_k, p, task) => fn(p, task, scratch));
    const spinUntil = performance.now() + this.#spinMs;
    for (;;) {
      const done = Atomics.load(i32, base + CTL_DONE);
      if (done >= tasks) break;
      if (performance.now() < spinUntil) continue; // the workers' last tasks usually end within the spin
      Atomics.wait(i32, base + CTL_DONE, done, 2); // timed: return to V8 regularly (interrupts, safepoints)
    }
    this.#lastUse = performance.now();
    if (error !== undefined) throw error;
    if (Atomics.load(i32, base + CTL_ERROR) !== 0) {
      throw new Error(`kernel ${kernel} failed on a worker thread (see the worker's message on stderr)`);
    }
  }

  /** Terminate the workers; the pool cannot run jobs afterwards. */
  close(): void {
    this.#closed = true;
    this.#terminateWorkers();
  }

  /** The kernels' exports (for single-threaded calls). */
  get exports(): WasmExports {
    return this.#exports;
  }
}
