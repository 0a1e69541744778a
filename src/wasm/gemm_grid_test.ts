/**
 * The GEMM task grid: `gemmGrid` picks row bands for square products and column bands for thin ones,
 * and the kernel `gemm_f32` run task by task over ANY grid (row bands x column bands) reproduces the
 * float64 product at sizes that hit every tail of the 6 x 8 micro-kernel and of the thin-band paths
 * (M of 1, 2, 3, 5, 17, 255, 257; N, K of 1, 3, 5, 17, 255, 257), for every transpose of A and B, with
 * and without accumulate, with poisoned (NaN) scratch and untouched memory after C.
 */

import { assertRelL2, Rng } from "../testing/compare.ts";
import { GEMM_MR, GEMM_NR, GEMM_THIN_ROWS, gemmGrid } from "./gemm_grid.ts";
import { Heap } from "./heap.ts";
import { createMemory, instantiate } from "./module.ts";

const SIZES = [1, 3, 5, 17, 255, 257];

Deno.test("gemmGrid splits rows for square products and columns for thin ones", () => {
  const cases: [number, number, number, number, number][] = [
    // M, N, threads -> tasksM, tasksN
    [256, 256, 1, 1, 1],
    [256, 256, 2, 2, 1],
    [1024, 1024, 2, 2, 1],
    [1, 1024, 2, 1, 2],
    [17, 257, 2, 1, 2],
    [5, 3, 2, 1, 1],
    [0, 64, 2, 1, 1],
  ];
  for (const [M, N, threads, tm, tn] of cases) {
    const g = gemmGrid(M, N, threads);
    if (g.tasksM !== tm || g.tasksN !== tn) {
      throw new Error(`gemmGrid(${M}, ${N}, ${threads}) = ${JSON.stringify(g)}, expected ${tm} x ${tn}`);
    }
  }
  if (GEMM_MR * GEMM_NR !== 48) throw new Error(`micro tile ${GEMM_MR} x ${GEMM_NR}, expected 6 x 8`);
});

/** `C (+)= A B` in float64, row-major. */
function reference(a: Float64Array, b: Float64Array, c0: Float64Array, M: number, N: number, K: number) {
  const c = Float64Array.from(c0);
  for (let i = 0; i < M; i++) {
    for (let k = 0; k < K; k++) {
      const aik = a[i * K + k];
      for (let j = 0; j < N; j++) c[i * N + j] += aik * b[k * N + j];
    }
  }
  return c;
}

/** `m` (rows x cols, row-major) as stored for the given transpose flag, with its two element strides. */
function layout(m: Float64Array, rows: number, cols: number, trans: boolean) {
  if (!trans) return { data: m, sRow: cols, sCol: 1 };
  const t = new Float64Array(m.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = m[r * cols + c];
  return { data: t, sRow: 1, sCol: rows };
}

Deno.test("gemm_f32 over any row x column task grid matches float64 at every tail size and transpose", () => {
  const memory = createMemory();
  const ex = instantiate(memory);
  const heap = new Heap(memory, ex.heapBase(), true);
  const scratch = heap.alloc(ex.gemmScratchBytes() as number);
  const params = heap.alloc(14 * 8);
  const rng = new Rng(11);
  let checked = 0;
  for (const M of [1, 2, ...SIZES.slice(1)]) {
    for (const N of SIZES) {
      for (const K of SIZES) {
        if (M * N * K > 257 * 257 * 17) continue; // keep the float64 reference quick
        const a = rng.normals(M * K);
        const b = rng.normals(K * N);
        const c0 = rng.normals(M * N);
        const pa = heap.alloc(4 * M * K);
        const pb = heap.alloc(4 * K * N);
        const pc = heap.alloc(4 * (M * N + 16));
        const grids = [[1, 1], [2, 1], [1, 2], [3, 2], [1, 5]];
        for (const [transA, transB] of [[false, false], [true, false], [false, true], [true, true]]) {
          const la = layout(a, M, K, transA);
          const lb = layout(b, K, N, transB);
          heap.f32.set(la.data, pa >>> 2);
          heap.f32.set(lb.data, pb >>> 2);
          for (const [tm, tn] of transA || transB ? grids.slice(0, 3) : grids) {
            for (const accumulate of [false, true]) {
              heap.f32.set(c0, pc >>> 2);
              heap.f32.fill(7, (pc >>> 2) + M * N, (pc >>> 2) + M * N + 16); // guard after C
              const v = [
                M,
                N,
                K,
                pa,
                la.sRow,
                la.sCol,
                pb,
                lb.sRow,
                lb.sCol,
                pc,
                N,
                accumulate ? 1 : 0,
                tm,
                tn,
              ];
              heap.f64.set(v, params >>> 3);
              for (let t = 0; t < tm * tn; t++) ex.gemm_f32(params, t, scratch);
              const got = heap.f32.slice(pc >>> 2, (pc >>> 2) + M * N);
              const want = reference(a, b, accumulate ? c0 : new Float64Array(M * N), M, N, K);
              const label =
                `gemm ${M}x${N}x${K} grid ${tm}x${tn} transA=${transA} transB=${transB} acc=${accumulate}`;
              assertRelL2(label, got, want, 2e-5);
              const guard = heap.f32.slice((pc >>> 2) + M * N, (pc >>> 2) + M * N + 16);
              if (guard.some((g) => g !== 7)) throw new Error(`${label}: wrote past C`);
              checked++;
            }
          }
        }
        heap.free(pa);
        heap.free(pb);
        heap.free(pc);
      }
    }
  }
  if (checked < 3000) throw new Error(`only ${checked} cases checked`);
});

Deno.test("gemmGrid makes no thin row band and GEMM results are bit-identical on 1 to 16 threads", () => {
  const memory = createMemory();
  const ex = instantiate(memory);
  const heap = new Heap(memory, ex.heapBase());
  const scratch = heap.alloc(ex.gemmScratchBytes() as number);
  const params = heap.alloc(14 * 8);
  const rng = new Rng(12);
  // M with M % 6 in {1, 2} (a last band of 1 or 2 rows is one split away), K past one 256-block
  const shapes: [number, number, number][] = [
    [13, 8, 300],
    [14, 256, 300],
    [20, 9, 513],
    [256, 256, 300],
    [
      688,
      40,
      260,
    ],
    [1, 70, 300],
    [2, 33, 300],
  ];
  for (const [M, N, K] of shapes) {
    const pa = heap.alloc(4 * M * K);
    const pb = heap.alloc(4 * K * N);
    const pc = heap.alloc(4 * M * N);
    heap.f32.set(rng.normals(M * K), pa >>> 2);
    heap.f32.set(rng.normals(K * N), pb >>> 2);
    const c0 = rng.normals(M * N);
    let first: Float32Array | undefined;
    for (let threads = 1; threads <= 16; threads++) {
      const { tasksM, tasksN } = gemmGrid(M, N, threads);
      if (tasksM * tasksN > threads) {
        throw new Error(`gemmGrid(${M}, ${N}, ${threads}) = ${tasksM} x ${tasksN}`);
      }
      const rows = Math.ceil(Math.ceil(M / GEMM_MR) / tasksM) * GEMM_MR;
      const last = M - (Math.ceil(M / rows) - 1) * rows;
      if (M > GEMM_THIN_ROWS && last <= GEMM_THIN_ROWS) {
        throw new Error(
          `gemmGrid(${M}, ${N}, ${threads}) = ${tasksM} x ${tasksN} leaves a band of ${last} rows`,
        );
      }
      heap.f32.set(c0, pc >>> 2);
      heap.f64.set([M, N, K, pa, K, 1, pb, N, 1, pc, N, 1, tasksM, tasksN], params >>> 3);
      for (let t = 0; t < tasksM * tasksN; t++) ex.gemm_f32(params, t, scratch);
      const got = heap.f32.slice(pc >>> 2, (pc >>> 2) + M * N);
      first ??= got;
      for (let i = 0; i < got.length; i++) {
        if (!Object.is(got[i], first[i])) {
          throw new Error(
            `${M}x${N}x${K} on ${threads} threads (${tasksM} x ${tasksN}): C[${i}] ${got[i]} vs ${first[i]}`,
          );
        }
      }
    }
    for (const p of [pa, pb, pc]) heap.free(p);
  }
});

Deno.test("gemmGrid cuts a weight gradient (long K, few rows and columns) both ways on many threads", () => {
  const cases: [number, number, number][] = [[256, 256, 16], [256, 688, 16], [688, 256, 16]];
  for (const [M, N, threads] of cases) {
    const g = gemmGrid(M, N, threads);
    if (g.tasksM < 2 || g.tasksN < 2 || g.tasksM * g.tasksN < threads - 1) {
      throw new Error(
        `gemmGrid(${M}, ${N}, ${threads}) = ${JSON.stringify(g)}, expected rows and columns both split`,
      );
    }
  }
  const tall = gemmGrid(4096, 256, 16);
  if (tall.tasksM !== 16 || tall.tasksN !== 1) {
    throw new Error(`gemmGrid(4096, 256, 16) = ${JSON.stringify(tall)}`);
  }
});
