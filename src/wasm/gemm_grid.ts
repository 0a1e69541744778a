/**
 * How a GEMM `C[M, N]` is cut into tasks for the thread pool: a grid of row bands (multiples of the
 * micro-kernel's {@linkcode GEMM_MR} rows) times column bands (multiples of {@linkcode GEMM_NR}
 * columns). Every task packs the rows of A and the columns of B it needs, so the grid trades the
 * largest task's products against the packing each task repeats: row bands alone for tall products
 * (the activations' `[B*T, D]`), column bands for thin ones (decoding's `M = 1`), and both for the
 * weight gradients `x^T dy` (`[D, F]` from a long `K = B*T`), where row bands alone would make every
 * thread pack all of `dy`. Mirrors the band arithmetic of `gemm_f32` in assembly/gemm.ts.
 *
 * The grid never changes results: each element of C is summed over the same K blocks in the same
 * order whatever its band, and no grid makes a band of at most {@linkcode GEMM_THIN_ROWS} rows (which
 * `gemm_f32` sums another way) unless the product itself is that thin, so the thread count changes
 * no bit.
 *
 * @module
 */

/** Rows of the micro-kernel tile (assembly/gemm.ts MR). */
export const GEMM_MR = 6;
/** Columns of the micro-kernel tile (assembly/gemm.ts NR). */
export const GEMM_NR = 8;
/** Row bands of at most this many rows take the kernel's thin path (assembly/gemm.ts THIN_ROWS). */
export const GEMM_THIN_ROWS = 2;

/** Cost of packing one row of A or one column of B, per unit of K, in multiply-adds (a rough ratio). */
const PACK_COST = 16;

/** A grid that is not clearly cheaper than the row bands alone (by this factor) loses to them. */
const ROW_BAND_PREFERENCE = 1.1;

/** A task grid: `tasksM` row bands times `tasksN` column bands. */
export interface GemmGrid {
  /** Row bands. */
  readonly tasksM: number;
  /** Column bands. */
  readonly tasksN: number;
}

/** Blocks per band when `blocks` blocks are cut into `bands` bands (as `bandStart` of assembly/gemm.ts). */
function perBand(blocks: number, bands: number): number {
  return Math.ceil(blocks / bands);
}

/** Rows of the last non-empty row band when `M` rows are cut into `bands` row bands. */
function lastBandRows(M: number, bands: number): number {
  const rows = perBand(Math.ceil(M / GEMM_MR), bands) * GEMM_MR;
  return M - (Math.ceil(M / rows) - 1) * rows;
}

/**
 * The cost of one task of the `tasksM x tasksN` grid per unit of K: the multiply-adds of the largest
 * task plus the packing of its rows of A and columns of B.
 */
function taskCost(M: number, N: number, tasksM: number, tasksN: number): number {
  const blockRows = perBand(Math.ceil(M / GEMM_MR), tasksM);
  const blockColumns = perBand(Math.ceil(N / GEMM_NR), tasksN);
  const rows = Math.min(M, blockRows * GEMM_MR);
  const columns = Math.min(N, blockColumns * GEMM_NR);
  return blockRows * blockColumns * GEMM_MR * GEMM_NR + PACK_COST * (rows + columns);
}

/** The task grid of an `M x N` product on `threads` threads (1 x 1 for one thread or no work). */
export function gemmGrid(M: number, N: number, threads: number): GemmGrid {
  const blocksM = Math.ceil(M / GEMM_MR);
  const blocksN = Math.ceil(N / GEMM_NR);
  if (threads <= 1 || blocksM === 0 || blocksN === 0) return { tasksM: 1, tasksN: 1 };
  const allowed = (tasksM: number) => M <= GEMM_THIN_ROWS || lastBandRows(M, tasksM) > GEMM_THIN_ROWS;
  let rowBands = Math.min(threads, blocksM);
  while (rowBands > 1 && !allowed(rowBands)) rowBands--;
  let best: GemmGrid = { tasksM: rowBands, tasksN: 1 };
  let bestCost = taskCost(M, N, rowBands, 1) / ROW_BAND_PREFERENCE;
  for (let tasksM = 1; tasksM <= Math.min(threads, blocksM); tasksM++) {
    if (!allowed(tasksM)) continue;
    const tasksN = Math.min(blocksN, Math.floor(threads / tasksM));
    const cost = taskCost(M, N, tasksM, tasksN);
    if (cost < bestCost) [best, bestCost] = [{ tasksM, tasksN }, cost];
  }
  return best;
}
