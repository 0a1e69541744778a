/**
 * falcon3's chunk-parallel kernels (`shaders/fast_weight_chunk_window_delta.ts`) at windows other than
 * the default 4 and at the sizes where their tiling changes: windows 1 and 2 (closed-form top
 * eigenpairs) and 5 (Jacobi, and more instance rows per step than `window_solve_transposed`'s
 * invocations per column), `window_solve_input_grads`' column panels, partial 4 x 4 blocks, and
 * `window_solve` / `window_solve_transposed` over several workgroups per chunk, and `coef`'s window dot
 * products shared across its workgroups' edge (`WINDOW_COEF_SHARED_DOTS`, after a carry, with sequence
 * starts); against the float64 reference, both alignments (the panel test: prefix). The default window at the shared small sizes
 * runs in `fast_weight_chunk_test.ts`; these tests have a file of their own so that `deno test
 * --parallel` runs them beside it (each file is about a minute of compiling on a software adapter; this
 * one sorts first, so it starts first). `FALCON_TEST_LEVEL=full` adds the earlier sizes: windows 1-3 at
 * chunk size 5, window 4 at chunk size 20, window 3 at chunk size 2, window 5 at chunk size 3.
 * Tolerances (SPEC section 4): relative L2 1e-5 for outputs and carries, 1e-4 for gradients.
 */

import type { Backend } from "../src/rules/backend.ts";
import { type Alignment, ALIGNMENTS, ruleConfig } from "../src/rules/config.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";
import { chunkForm, compareChunk, deviceChunkShape, FULL_LEVEL } from "./_chunk_compare.ts";
import {
  WINDOW_SOLVE,
  WINDOW_SOLVE_COLUMNS,
  WINDOW_SOLVE_PREFETCH_COLUMNS,
  type WindowSolveForm,
} from "./shaders/chunk_wgsl.ts";
import { gpuTest } from "./_test_util.ts";

/** A falcon3 problem with window `window` at chunk size `C` (prefix and same-step alignment). */
interface WindowProblem {
  window: number;
  C: number;
  T: number;
  dk: number;
  dv: number;
}

// Each (window, C, Dk, Dv) is a new set of falcon3 pipelines (tens of seconds to compile on a software
// adapter): the window test and the panel test share the window of 2. The Jacobi eigenpairs (windows
// of 3 and more) run at the default window 4 in fast_weight_chunk_test.ts and at window 5 here.
/**
 * Dk + Dv = 73, Dv = 33: window_solve's columns over two workgroups per chunk, window_solve_transposed's
 * over three, and the 4 x 4 blocks of the state (window_scan_link, window_s0_grad_parts) and of
 * window_transition over two and three workgroups (its staged form, `WINDOW_TRANSITION_STAGED`: partial blocks, and
 * Bv's columns past Dv staged as 0).
 */
const WIDE_SOLVE: WindowProblem = { window: 2, C: 5, T: 13, dk: 40, dv: 33 };

async function compareWindow(gpu: Backend, p: WindowProblem, alignment: Alignment, seed: number) {
  const config = ruleConfig("falcon3", { alignment, window: p.window });
  const spec = { B: 2, T: p.T, H: 2, dk: p.dk, dv: p.dv, seed, packed: true, s0: true };
  await compareChunk(
    gpu,
    config,
    spec,
    chunkForm(p.C),
    `falcon3/W=${p.window}/${alignment}/C=${p.C}/Dk=${p.dk}/Dv=${p.dv}`,
  );
}

gpuTest(
  `webgpu chunk kernels of falcon3 match the reference with windows 1, 2${
    FULL_LEVEL ? " and 3" : ""
  } (closed-form eigenpairs${FULL_LEVEL ? ", and Jacobi" : ""})`,
  async (gpu) => {
    const windows: WindowProblem[] = [
      { window: 1, C: SMALL_CHUNK, T: 13, ...SMALL_HEADS },
      WIDE_SOLVE,
      ...(FULL_LEVEL ? [1, 2, 3].map((window) => ({ window, C: 5, T: 13, dk: 5, dv: 3 })) : []),
    ];
    for (const p of windows) {
      for (const alignment of ALIGNMENTS) await compareWindow(gpu, p, alignment, 51 + p.window);
    }
  },
);

gpuTest(
  "webgpu chunk kernels of falcon3 walk several column panels, partial 4 x 4 blocks and solve workgroups",
  async (gpu) => {
    const problems: WindowProblem[] = [
      // window 5, C = 13: window_solve_input_grads' panels of 12 steps (a full one, then 1 step; the
      // last chunk 1 step), window_row_grads / window_solve_input_grads tiles of 2 steps (10 rows, 6
      // pairs per window_row_grads tile: neither a multiple of 4), and more rows per step than
      // window_solve_transposed's 4 invocations per column
      { window: 5, C: 13, T: 27, dk: 3, dv: 2 },
      WIDE_SOLVE,
      ...(FULL_LEVEL
        ? [
          // window 4, C = 20: panels of 16 steps (a full one, then 4; the last chunk 5 steps)
          { window: 4, C: 20, T: 45, dk: 5, dv: 3 },
          // window 3, C = 2: 6-row tiles, 6-row panels and 4 pairs per window_row_grads tile
          { window: 3, C: 2, T: 13, dk: 5, dv: 3 },
          { window: 5, C: 3, T: 11, dk: 3, dv: 2 },
          // Dk = 72: the staged window_transition's 18 x 18 blocks, two per invocation (the second for 68 of its
          // 256), Bv's columns past Dv = 5 staged as 0 (about 30 s to compile cold on a software adapter)
          { window: 2, C: 3, T: 11, dk: 72, dv: 5 },
        ]
        : []),
    ];
    for (const p of problems) await compareWindow(gpu, p, "prefix", 61 + p.window);
  },
);

// the sweep window_solve at the preset chunk size C = 64 (window 4: 256 instance rows), forward only: the carry of
// the first 37 steps enters (a segment on the entering state), packed sequences start inside the chunks (segments on
// S0), T - 37 = 113 steps (a full chunk, then 49 steps), and Dk + Dv = 11 columns: WINDOW_SOLVE = "sweep_prefetch" in
// one partial workgroup of 32 that straddles the value and state-factor columns (WIDE_SOLVE runs its 73 columns in
// three); "sweep" in two workgroups of 8 (the first straddles, the second is partial)
gpuTest(
  "webgpu chunk kernels of falcon3 sweep window_solve's columns at C = 64 with S0, a carry and a partial column group",
  async (gpu) => {
    const config = ruleConfig("falcon3", { alignment: "prefix" });
    const spec = { B: 1, T: 150, H: 2, dk: 5, dv: 6, seed: 71, packed: true, s0: true };
    const shape = deviceChunkShape(gpu, config, spec, 64);
    const form = WINDOW_SOLVE as WindowSolveForm;
    const columns = form === "serial"
      ? 0
      : form === "sweep_prefetch"
      ? Math.min(WINDOW_SOLVE_PREFETCH_COLUMNS, 32)
      : Math.min(WINDOW_SOLVE_COLUMNS, 8);
    if (shape.WS !== columns) {
      throw new Error(`window_solve columns per workgroup ${shape.WS}, expected ${columns}`);
    }
    await compareChunk(gpu, config, spec, chunkForm(64), "falcon3/sweep/C=64/Dk=5/Dv=6", {
      from: 37,
      forwardOnly: true,
    });
  },
);

// coef's shared lag dot products (WINDOW_COEF_SHARED_DOTS) at the default window 4: B H (T - 6) = 78 flat steps in the
// continuation, so its workgroups of 64 steps split a head and flat step 64 (head 4, step 12) reads the lag dot
// products of flat steps 61-63, staged by the workgroup before (the slots below PAD); the carry's 6 steps feed the
// pairs before the sequence (summed on the spot), packed sequences start inside the window, with S0
gpuTest(
  "webgpu chunk kernels of falcon3 share coef's window dot products across workgroups, a carry and sequence starts",
  async (gpu) => {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig("falcon3", { alignment });
      const spec = { B: 3, T: 19, ...SMALL_HEADS, seed: 81, packed: true, s0: true };
      await compareChunk(gpu, config, spec, chunkForm(SMALL_CHUNK), `falcon3/shared dots/${alignment}`, {
        from: 6,
      });
    }
  },
);
