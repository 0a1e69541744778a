/**
 * Slice sums into the tensors of a block, held back and recorded as one dispatch. The second pass of a
 * split-K GEMM or of a row-sliced weight gradient (`shaders/slices.ts`) writes a gradient that nothing
 * reads until the optimizer, so the sums of a backward pass wait ({@linkcode GpuRuntime.hold}) until a
 * command may touch the gradient block (or any copy, read or flush), and then run together, each
 * computing exactly what its own dispatch computed. Their partial sums live in one arena buffer.
 *
 * @module
 */

import { type Binding, type GpuRuntime, grid } from "./runtime.ts";
import type { GpuTensor } from "./tensor.ts";
import { multiSliceSumShader, SLICE_SUM_WG } from "./shaders/slices.ts";

/** Smallest arena of partial sums, in bytes. */
export const ARENA_MIN_BYTES = 1 << 20;

/** Most workgroup tables kept before the cache starts over. */
export const TABLE_ENTRIES = 256;

/** Bytes each partial starts at a multiple of (a binding offset). */
const PARTIAL_ALIGNMENT = 256;

/** One held slice sum: `out[outOffset + i] (+)= sum_s partial[partialOffset + s * n + i]`, in elements. */
interface Job {
  readonly outOffset: number;
  readonly partialOffset: number;
  readonly n: number;
  readonly S: number;
  readonly accumulate: boolean;
}

/** The held slice sums of a runtime. */
export function createDeferredSliceSums(rt: GpuRuntime) {
  let arena: GPUBuffer | null = null;
  let used = 0;
  let jobs: Job[] = [];
  let target: GPUBuffer | null = null;
  /** Bindings of arena ranges, one object per range (bind groups are cached by binding identity). */
  let ranges = new Map<string, Binding>();
  /** Workgroup tables by job list (a step holds the same groups of sums every step), with their sizes. */
  const tables = new Map<string, { buffer: GPUBuffer; workgroups: number }>();

  function tableOf(held: readonly Job[]): { buffer: GPUBuffer; workgroups: number } {
    const key = held.map((j) => `${j.outOffset},${j.partialOffset},${j.n},${j.S},${j.accumulate ? 1 : 0}`)
      .join(";");
    let table = tables.get(key);
    if (!table) {
      const rows: number[] = [];
      for (const j of held) {
        for (let base = 0; base < j.n; base += SLICE_SUM_WG) {
          rows.push(j.outOffset, j.partialOffset, j.n, j.S, j.accumulate ? 1 : 0, base, 0, 0);
        }
      }
      if (tables.size >= TABLE_ENTRIES) {
        for (const t of tables.values()) rt.retire(t.buffer);
        tables.clear();
      }
      table = { buffer: rt.storageBuffer(Uint32Array.from(rows)), workgroups: rows.length / 8 };
      tables.set(key, table);
    }
    return table;
  }

  /**
   * Bytes of partials the sums held since the last release asked for, over every release the arena's
   * filling up forced; when held work runs for another reason and this exceeds the arena, the arena
   * grows to it, so the same pass next step holds all its sums (one dispatch).
   */
  let demand = 0;
  let overflowing = false;

  /** Record every held sum as one dispatch. */
  function run(): void {
    if (jobs.length === 0 || !target || !arena) return;
    const table = tableOf(jobs);
    const out = target;
    jobs = [];
    target = null;
    used = 0;
    rt.dispatch(rt.pipeline("multi_slice_sum_f32", multiSliceSumShader), [
      out,
      arena,
      table.buffer,
      rt.uniform([{ u: table.workgroups }]),
    ], grid(table.workgroups));
    if (overflowing) return;
    const wanted = Math.min(rt.device.limits.maxStorageBufferBindingSize, demand);
    demand = 0;
    if (wanted > arena.size) {
      // the recorded sum still reads the old arena; commands recorded later come after it
      rt.pool.release(arena);
      ranges = new Map();
      arena = rt.pool.acquire(Math.floor(wanted / PARTIAL_ALIGNMENT) * PARTIAL_ALIGNMENT);
    }
  }

  return {
    /**
     * `out (+)= sum over S slices of partial[S, n]` where `produce` writes `partial` (bound from the
     * returned binding): held back when `out` is a tensor of a block, else recorded now like one slice sum.
     * `now` records the sum at once (a pooled partial buffer).
     */
    into(
      out: GpuTensor,
      n: number,
      S: number,
      accumulate: boolean,
      produce: (partial: Binding) => void,
      now: (out: Binding, partial: GPUBuffer) => void,
    ): void {
      if (!out.block) {
        const partial = rt.tensor([S * n], false).buffer;
        produce(partial);
        now(out.binding, partial);
        rt.pool.release(partial);
        return;
      }
      const bytes = Math.ceil((S * n * 4) / PARTIAL_ALIGNMENT) * PARTIAL_ALIGNMENT;
      // another block, or a range a held sum writes (two sums of one dispatch must not write the same
      // elements): what is held runs first
      const start = out.offset / 4;
      if (target !== null && target !== out.buffer) rt.releaseHeld();
      else if (jobs.some((j) => j.outOffset < start + n && start < j.outOffset + j.n)) rt.releaseHeld();
      demand += bytes;
      if (!arena || used + bytes > arena.size) {
        overflowing = true;
        if (jobs.length > 0) rt.releaseHeld();
        overflowing = false;
        if (!arena || bytes > arena.size) {
          if (arena) rt.pool.release(arena);
          ranges = new Map();
          const limit = rt.device.limits.maxStorageBufferBindingSize;
          const grown = Math.min(limit, Math.max(ARENA_MIN_BYTES, arena ? 2 * arena.size : 0));
          arena = rt.pool.acquire(Math.max(bytes, Math.floor(grown / PARTIAL_ALIGNMENT) * PARTIAL_ALIGNMENT));
        }
      }
      const offset = used;
      used += bytes;
      const size = Math.max(16, Math.ceil((S * n * 4) / 16) * 16);
      const rangeKey = `${offset}:${size}`;
      let range = ranges.get(rangeKey);
      if (!range) ranges.set(rangeKey, range = { buffer: arena, offset, size });
      produce(range);
      // producing may have run the held sums (a dispatch past the flush interval flushes, and a flush runs
      // them), which starts the arena over: keep this job's partials out of the ranges handed out next
      used = Math.max(used, offset + bytes);
      jobs.push({ outOffset: start, partialOffset: offset / 4, n, S, accumulate });
      if (target === null) {
        target = out.buffer;
        rt.hold(out.buffer, run);
      }
    },
  };
}
