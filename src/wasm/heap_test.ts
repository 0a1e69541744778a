/** Tests of the shared-memory allocator. */

import { Heap } from "./heap.ts";
import { createMemory } from "./module.ts";

Deno.test("Heap reuses a freed block of the same size and grows the memory when needed", () => {
  const memory = createMemory(1);
  const heap = new Heap(memory, 100);
  const a = heap.alloc(10);
  if (a % 64 !== 0 || a < 100) throw new Error(`block ${a} is not 64-byte aligned above the base`);
  heap.free(a);
  const b = heap.alloc(64);
  if (b !== a) throw new Error(`expected the freed block ${a} back, got ${b}`);
  const big = heap.alloc(1 << 20);
  if (memory.buffer.byteLength < big + (1 << 20)) throw new Error("memory did not grow");
  heap.f32[(big >>> 2) + (1 << 18) - 1] = 3; // the last float of the block is writable
  if (heap.inUse !== 64 + (1 << 20)) throw new Error(`inUse ${heap.inUse}`);
});

Deno.test("Heap with poison hands out NaN-filled blocks and rejects a double free", () => {
  const heap = new Heap(createMemory(1), 0, true);
  const p = heap.alloc(40);
  const v = heap.f32.subarray(p >>> 2, (p >>> 2) + 10);
  if (!v.every(Number.isNaN)) throw new Error("block is not poisoned");
  heap.free(p);
  let threw = false;
  try {
    heap.free(p);
  } catch (e) {
    threw = e instanceof RangeError;
  }
  if (!threw) throw new Error("double free was not rejected with a RangeError");
});
