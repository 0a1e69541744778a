/**
 * The CPU backend: AssemblyScript kernels compiled to WASM SIMD (relaxed where available), float32,
 * with a pool of Deno Workers sharing one WebAssembly.Memory. Tensors live in that memory; the
 * TypeScript side owns allocation ({@linkcode Heap}) and passes pointers, sizes and strides.
 *
 * @example
 * ```ts
 * import { createWasmBackend } from "./backend.ts";
 * const be = await createWasmBackend({ threads: 1 });
 * const a = be.fromArray([1, 2, 3, 4], [2, 2]);
 * const out = be.zeros([2, 2]);
 * be.matmul(out, a, a);
 * console.log(await be.read(out)); // Float32Array [7, 10, 15, 22]
 * be.close();
 * ```
 *
 * @module
 */

import { type Backend, shapeSize, type Tensor } from "../rules/backend.ts";
import { WasmContext } from "./context.ts";
import { wasmDenseOps } from "./dense.ts";
import { DENSE_OP, DenseJobs } from "./dense_jobs.ts";
import { wasmFastWeightOps } from "./fast_weight.ts";
import { Heap } from "./heap.ts";
import { createMemory, instantiate, type WasmFlavour, wasmModule } from "./module.ts";
import { ThreadPool } from "./pool.ts";
import type { WasmTensor } from "./tensor.ts";

/** Options of {@linkcode createWasmBackend}. */
export interface WasmBackendOptions {
  /** Threads including the calling one (default `navigator.hardwareConcurrency`). */
  readonly threads?: number;
  /** Fill every newly allocated buffer (tensors and scratch) with NaN, to catch reads of unwritten memory. */
  readonly poison?: boolean;
  /** Terminate idle workers after this many milliseconds (default 1000); they restart on demand. */
  readonly idleMs?: number;
  /** Milliseconds a pool thread polls before sleeping, after a job or for its end (default 0.05). */
  readonly spinMs?: number;
  /** Force a build (default: `relaxed-simd` where the engine validates it, else `simd`). */
  readonly flavour?: WasmFlavour;
}

/** The WASM backend: a {@linkcode Backend} plus `close()` and a few facts about the build. */
export interface WasmBackend extends Backend {
  /** Which build runs (`relaxed-simd` when the engine validates it). */
  readonly flavour: WasmFlavour;
  /** Threads including the calling one. */
  readonly threads: number;
  /** Bytes of tensor and scratch storage in use. */
  readonly bytesInUse: number;
  /** Terminate the workers; the backend cannot be used afterwards. */
  close(): void;
}

/** Create the WASM CPU backend (float32). Resolves when every worker is ready. */
export async function createWasmBackend(options: WasmBackendOptions = {}): Promise<WasmBackend> {
  const threads = options.threads ?? navigator.hardwareConcurrency ?? 1;
  const { module, flavour } = wasmModule(options.flavour);
  const memory = createMemory();
  const exports = instantiate(memory, module);
  const heap = new Heap(memory, exports.heapBase(), options.poison ?? false);
  const pool = new ThreadPool(heap, exports, {
    threads,
    idleMs: options.idleMs,
    spinMs: options.spinMs,
    module,
  });
  await pool.ready();
  const ctx = new WasmContext(heap, pool, exports);
  const jobs = new DenseJobs(ctx);
  const fill = (t: WasmTensor, v: number) => heap.f32.fill(v, t.ptr >>> 2, (t.ptr >>> 2) + t.size);
  return {
    name: "wasm",
    queued: false,
    dtype: "f32",
    flavour,
    threads,
    get bytesInUse() {
      return heap.inUse;
    },
    zeros(shape: readonly number[]): Tensor {
      shapeSize(shape);
      const t = ctx.alloc(shape);
      fill(t, 0);
      return t;
    },
    fromArray(data: ArrayLike<number>, shape: readonly number[]): Tensor {
      const n = shapeSize(shape);
      if (data.length !== n) {
        throw new RangeError(`fromArray: ${data.length} values do not fit shape [${shape}] (${n})`);
      }
      const t = ctx.alloc(shape);
      heap.f32.set(data, t.ptr >>> 2);
      return t;
    },
    read(t: Tensor): Promise<Float32Array> {
      const p = ctx.ptr(t, "read") >>> 2;
      return Promise.resolve(heap.f32.slice(p, p + t.size));
    },
    readLater(t: Tensor) {
      const p = ctx.ptr(t, "readLater") >>> 2;
      const value = heap.f32.slice(p, p + t.size);
      return () => Promise.resolve(value);
    },
    copy(dst: Tensor, src: Tensor): void {
      const d = ctx.ptr(dst, "dst");
      const s = ctx.ptr(src, "src");
      if (dst.size !== src.size) throw new RangeError(`copy: sizes differ (${dst.size} vs ${src.size})`);
      jobs.elements(DENSE_OP.COPY, src.size, 1, [d, s]);
    },
    dispose(t: Tensor): void {
      const p = ctx.ptr(t, "dispose");
      (t as WasmTensor).disposed = true;
      heap.free(p);
    },
    sync: () => Promise.resolve(),
    close: () => pool.close(),
    ...wasmFastWeightOps(ctx),
    ...wasmDenseOps(ctx),
  };
}
