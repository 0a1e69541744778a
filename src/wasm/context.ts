/**
 * What every op of the WASM backend needs: the heap, the thread pool, the kernels' exports, and
 * helpers to check tensors and copy host arrays into the shared memory for one call.
 *
 * @module
 */

import type { Tensor } from "../rules/backend.ts";
import type { Heap } from "./heap.ts";
import type { WasmExports } from "./module.ts";
import type { ThreadPool } from "./pool.ts";
import { ptrOf, WasmTensor } from "./tensor.ts";

/** Shared state of one WASM backend instance. */
export class WasmContext {
  /** The allocator over the shared memory. */
  readonly heap: Heap;
  /** The thread pool. */
  readonly pool: ThreadPool;
  /** The kernels. */
  readonly exports: WasmExports;
  /** Identity stamped on this backend's tensors. */
  readonly owner: symbol = Symbol("wasm-backend");

  /** Bundle the parts. */
  constructor(heap: Heap, pool: ThreadPool, exports: WasmExports) {
    this.heap = heap;
    this.pool = pool;
    this.exports = exports;
  }

  /** A new tensor (contents unspecified: NaN when the heap poisons). */
  alloc(shape: readonly number[]): WasmTensor {
    let n = 1;
    for (const d of shape) n *= d;
    return new WasmTensor(shape, this.heap.alloc(n * 4), this.owner);
  }

  /** Address of a tensor of this backend. */
  ptr(t: Tensor, name = "tensor"): number {
    return ptrOf(t, this.owner, name);
  }

  /** Check that `t` has `size` elements. */
  expectSize(t: Tensor, size: number, name: string): void {
    if (t.size !== size) {
      throw new RangeError(`${name} has ${t.size} elements ([${t.shape}]), expected ${size}`);
    }
  }

  /**
   * Run `fn` with host arrays copied into temporary heap blocks (their addresses, in order; 0 for an
   * undefined array); the blocks are freed afterwards.
   */
  withHost<R>(
    arrays: readonly (Uint8Array | Int32Array | Float32Array | Float64Array | undefined)[],
    fn: (...ptrs: number[]) => R,
  ): R {
    const ptrs: number[] = [];
    try {
      for (const a of arrays) {
        if (!a) {
          ptrs.push(0);
          continue;
        }
        const p = this.heap.alloc(a.byteLength);
        this.heap.u8.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), p);
        ptrs.push(p);
      }
      return fn(...ptrs);
    } finally {
      for (const p of ptrs) if (p !== 0) this.heap.free(p);
    }
  }
}
