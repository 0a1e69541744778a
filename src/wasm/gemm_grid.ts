/**
 * How a GEMM `C[M, N]` is cut into tasks for the thread pool: row bands (multiples of the micro-kernel's
 * {@linkcode GEMM_MR} rows) when there are enough rows for every thread, otherwise column bands
 * (multiples of {@linkcode GEMM_NR} columns), so that thin products such as decoding's `M = 1` still use
 * every thread. Mirrors the band arithmetic of `gemm_f32` in assembly/gemm.ts.
 *
 * @module
 */

/** Rows of the micro-kernel tile (assembly/gemm.ts MR). */
export const GEMM_MR = 6;
/** Columns of the micro-kernel tile (assembly/gemm.ts NR). */
export const GEMM_NR = 8;

/** Row blocks per thread below which the columns are split instead. */
const MIN_BLOCKS_PER_THREAD = 4;

/** A task grid: `tasksM` row bands times `tasksN` column bands. */
export interface GemmGrid {
  /** Row bands. */
  readonly tasksM: number;
  /** Column bands. */
  readonly tasksN: number;
}

/** The task grid of an `M x N` product on `threads` threads (1 x 1 for one thread or no work). */
export function gemmGrid(M: number, N: number, threads: number): GemmGrid {
  const blocksM = Math.ceil(M / GEMM_MR);
  const blocksN = Math.ceil(N / GEMM_NR);
  if (threads <= 1 || blocksM === 0 || blocksN === 0) return { tasksM: 1, tasksN: 1 };
  if (blocksM >= MIN_BLOCKS_PER_THREAD * threads || blocksM >= blocksN) {
    return { tasksM: Math.min(threads, blocksM), tasksN: 1 };
  }
  return { tasksM: 1, tasksN: Math.min(threads, blocksN) };
}
