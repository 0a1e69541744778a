/**
 * The head sizes and chunk size that the small-level fast-weight tests of every backend share.
 *
 * Why one set: on a software GPU adapter (Mesa's llvmpipe) every distinct `(H, Dk, Dv, chunk size,
 * window)` is a new set of WebGPU pipelines, and compiling one set takes seconds to a minute per rule
 * family (the kernels unroll their compile-time loops; the machine's shader cache is cold on a fresh
 * clone). Test files that use the same sizes compile the same shaders once per run: Mesa's disk cache
 * serves the next file. Running them costs little at these sizes, so `B` and `T` are free to vary.
 *
 * What the sizes reach (see `wgpu/shaders/chunk_wgsl.ts`):
 * - `Dk = 5`, `Dv = 6`: two 4 x 4 register blocks in each dimension, the second partial; two
 *   workgroups of the delta rules' scans (4 value columns each), the second partial; `Dk != Dv`.
 * - `H = 2`: per-head constants (RetNet's decays, Mamba-2's `A`) and head indexing.
 * - chunk size 3: row, column and pair tiles of 2 steps, so two per chunk, the second partial; with a
 *   window of 4 (falcon3, falcon3a) the 3 window pairs before a chunk fill the whole previous chunk.
 *   `T` not a multiple of 3 gives a partial last chunk.
 * The recurrent kernels take the same chunk size as their checkpoint interval (backward), so the
 * small tests pass it to every form.
 *
 * @module
 */

/** Heads and head sizes of the small-level fast-weight tests. */
export const SMALL_HEADS = { H: 2, dk: 5, dv: 6 } as const;

/** Chunk size (and recurrent checkpoint interval) of the small-level fast-weight tests. */
export const SMALL_CHUNK = 3;
