/**
 * The WASM pool's worker, as JavaScript source for a `blob:` module Worker, so that starting threads
 * reads no file: the backend keeps all its threads under a narrowed `--allow-read`, from JSR and in a
 * `deno compile` binary without `--include`. The source is assembled at run time from the functions
 * themselves: every export of pool_layout.js (constants as literals, functions by their own text) and
 * {@linkcode workerMain}, which must therefore use nothing but those names and globals.
 *
 * A worker instantiates the kernels (the compiled module it receives) on the shared memory, then waits
 * on the control block's generation word and claims tasks of each published job (see pool_layout.js).
 * It never returns to its event loop until the pool bumps the epoch word (then it closes itself).
 * Handshake: it posts "loaded", receives a {@linkcode WorkerStart}, posts "ready". After a job it
 * polls the generation word for `spinMs` before it sleeps (a job that follows at once then needs no
 * futex wake-up). Every wait is timed, so that the thread regularly returns to V8.
 *
 * @module
 */

import * as layout from "./pool_layout.js";

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

// names of pool_layout.js that workerMain uses, declared for the type checker only: in the worker they
// are the top-level declarations workerSource() writes in front of it
declare const KERNELS: typeof layout.KERNELS;
declare const CTL_GEN: typeof layout.CTL_GEN;
declare const CTL_EPOCH: typeof layout.CTL_EPOCH;
declare const CTL_SCRATCH: typeof layout.CTL_SCRATCH;
declare const claimTasks: typeof layout.claimTasks;

/** The worker's program (runs inside the Worker; closes over nothing of this module). */
function workerMain(): void {
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
      const error = claimTasks(i32, base, seen, (kernel: number, params: number, task: number) => {
        fns[kernel](params, task, Atomics.load(i32, base + CTL_SCRATCH + id));
      });
      if (error !== undefined) console.error(`falcon WASM pool worker ${id}: a task failed:`, error);
    }
  };
  scope.postMessage("loaded");
}

/** The worker's whole program as JavaScript module source. */
export function workerSource(): string {
  const declarations = Object.entries(layout).map(([name, value]) => {
    if (typeof value !== "function") return `const ${name} = ${JSON.stringify(value)};`;
    const text = value.toString();
    return text.startsWith("function") ? text : `const ${name} = ${text};`;
  });
  return `${declarations.join("\n")}\n(${workerMain.toString()})();\n`;
}

let url: string | undefined;

/** A `blob:` URL of {@linkcode workerSource} (made once per process). */
export function workerUrl(): string {
  url ??= URL.createObjectURL(new Blob([workerSource()], { type: "text/javascript" }));
  return url;
}
