/**
 * A simple allocator over the shared WebAssembly memory: sizes are rounded up to 64 bytes, freed
 * blocks go to an exact-size free list and are reused first, otherwise a bump pointer advances and
 * the memory grows. With `poison` every block handed out is filled with NaN first, so a kernel that
 * reads memory it did not write produces NaN that tests catch.
 *
 * @module
 */

import { MAX_PAGES } from "./module.ts";

const ALIGN = 64;
const PAGE = 65536;

/** Byte allocator with free lists on a `WebAssembly.Memory`. */
export class Heap {
  /** The memory every thread shares. */
  readonly memory: WebAssembly.Memory;
  /** Fill every block with NaN when handed out. */
  readonly poison: boolean;
  #top: number;
  #free = new Map<number, number[]>();
  #sizes = new Map<number, number>();

  /** Manage `memory` from byte `base` upwards. */
  constructor(memory: WebAssembly.Memory, base: number, poison = false) {
    this.memory = memory;
    this.poison = poison;
    this.#top = Math.ceil(base / ALIGN) * ALIGN;
  }

  #views: { f32: Float32Array; i32: Int32Array; u8: Uint8Array; f64: Float64Array } | undefined;

  /** Views of the whole memory, recreated only after the memory grew. */
  #current() {
    const buffer = this.memory.buffer;
    if (!this.#views || this.#views.u8.byteLength !== buffer.byteLength) {
      this.#views = {
        f32: new Float32Array(buffer),
        i32: new Int32Array(buffer),
        u8: new Uint8Array(buffer),
        f64: new Float64Array(buffer),
      };
    }
    return this.#views;
  }

  /** A float32 view of the whole memory. */
  get f32(): Float32Array {
    return this.#current().f32;
  }

  /** An int32 view of the whole memory. */
  get i32(): Int32Array {
    return this.#current().i32;
  }

  /** A byte view of the whole memory. */
  get u8(): Uint8Array {
    return this.#current().u8;
  }

  /** A float64 view of the whole memory. */
  get f64(): Float64Array {
    return this.#current().f64;
  }

  /** Allocate `bytes` (at least 64) and return the byte address. */
  alloc(bytes: number): number {
    if (!Number.isInteger(bytes) || bytes < 0) throw new RangeError(`alloc: invalid size ${bytes}`);
    const size = Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    const list = this.#free.get(size);
    let ptr: number;
    if (list && list.length > 0) {
      ptr = list.pop()!;
    } else {
      ptr = this.#top;
      const end = ptr + size;
      const have = this.memory.buffer.byteLength;
      if (end > have) {
        const need = Math.ceil((end - have) / PAGE);
        const pages = Math.max(need, Math.min(have / PAGE, MAX_PAGES - have / PAGE)); // at least double
        if (have / PAGE + pages > MAX_PAGES) {
          throw new RangeError(`out of WASM memory allocating ${bytes} bytes`);
        }
        this.memory.grow(pages);
      }
      this.#top = end;
    }
    this.#sizes.set(ptr, size);
    if (this.poison) this.f32.fill(NaN, ptr >>> 2, (ptr + size) >>> 2);
    return ptr;
  }

  /** Return a block to its free list. */
  free(ptr: number): void {
    const size = this.#sizes.get(ptr);
    if (size === undefined) throw new RangeError(`free: ${ptr} is not an allocated block`);
    this.#sizes.delete(ptr);
    let list = this.#free.get(size);
    if (!list) this.#free.set(size, list = []);
    list.push(ptr);
  }

  /** Bytes handed out and not freed. */
  get inUse(): number {
    let n = 0;
    for (const s of this.#sizes.values()) n += s;
    return n;
  }
}
