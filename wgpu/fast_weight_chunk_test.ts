/**
 * The chunk-parallel WebGPU kernels (`shaders/fast_weight_chunk_additive.ts`, additive rules;
 * `shaders/fast_weight_chunk_delta.ts`, delta rules; `shaders/fast_weight_chunk_per_column.ts`, the
 * per-column rules falcon2 and falcon2a; `shaders/fast_weight_chunk_window_delta.ts`, falcon3) against
 * the float64 reference backend and against the WebGPU recurrent kernels: both alignments, several
 * chunks with a partial last one, partial tiles, packed starts mid-chunk, a non-zero S0,
 * continuation from a carry, the parallel form (one chunk), `Dk != Dv`, and the clamp binding at
 * every step. Tolerances (SPEC section 4): relative L2 1e-5 for outputs and carries, 1e-4 for gradients.
 * A backward without dS0 (`s0Grad: false`: the `_no_s0` passes, no `s0_grad_*` passes) gives every other
 * gradient bit for bit, whole and in batch slices.
 *
 * Sizes: the small level (the default) uses the shared small sizes of `src/testing/shapes.ts`
 * (`H = 2, Dk = 5, Dv = 6`, chunk size 3: compiled once per run on a software adapter);
 * `FALCON_TEST_LEVEL=full` adds the larger chunk sizes (5, 16, 64) and head sizes (up to 9) for a real
 * GPU. falcon3 at other windows and at its panel / solve sizes: `fast_weight_chunk_falcon3_test.ts`.
 */

import type { FormOptions } from "../src/rules/backend.ts";
import { ALIGNMENTS, isFalconRule, isWindowRule, ruleConfig } from "../src/rules/config.ts";
import { recurrentTrace } from "../src/rules/reference/recurrent.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";
import { type CaseSpec, CHUNK_RULES, headOf, randomCase, uploadCase } from "./_fast_weight_case.ts";
import { chunkWorkspaceBytes } from "./fast_weight_chunk.ts";
import { createFastWeightOps } from "./fast_weight.ts";
import { assertS0GradOptOut } from "../src/testing/s0_grad.ts";
import { chunkForm, compareChunk, deviceChunkShape, FULL_LEVEL } from "./_chunk_compare.ts";
import { STAGED_WG } from "./shaders/chunk_staged_tiles.ts";
import {
  bindsVec4,
  type ChunkPass,
  COLUMN_SPLIT_SCAN,
  columnGramLayout,
  columnIncrementLayout,
  columnReadoutLayout,
  decayGradLayout,
  pairColumnTiling,
  splitsColumnScan,
} from "./shaders/chunk_wgsl.ts";
import { gpuTest } from "./_test_util.ts";
import { COLUMN_SCAN_COLUMNS, columnScanLayout } from "./shaders/fast_weight_chunk_per_column.ts";

/** The small problem (`B` and `T` are not compile-time sizes: tests vary them freely). */
const SHAPE = { B: 2, T: 13, ...SMALL_HEADS };
const C = SMALL_CHUNK;
/** The problem of the full level's extra cases (the sizes of the suite before the small level). */
const FULL_SHAPE = { B: 2, T: 13, H: 2, dk: 5, dv: 3 };

/** One problem of a test: sizes, options and label. */
interface Problem {
  spec: CaseSpec;
  opts: FormOptions;
  label: string;
  from?: number;
}

/** The problems of the level: the small ones, and at the full level the extra ones too. */
function atLevel(small: Problem[], full: Problem[]): Problem[] {
  return FULL_LEVEL ? [...small, ...full] : small;
}

for (const rule of CHUNK_RULES) {
  // a window of 4 pairs reaches 3 chunks back at chunk size 1 (the pairs of the steps before a chunk
  // are then spread over several earlier chunks); without a window chunk size 1 is the same code as 3.
  // Those new pipelines also take Dk = Dv = 8: whole 4 x 4 blocks only, no partial one, and the readout and
  // dq kernels' vec4 bindings of the workspace rows and dO (`bindsVec4`; the other shapes bind floats).
  // The window's pad also picks the kernels' forms: falcon3a's readout and dq are the direct-load row kernels
  // (`rowsKernelForm`) and its pair-column kernels stage 4 entries per load; the pad-free rules' readout and dq
  // are the staged ones and their pair-column kernels stage one entry per load
  const windowed = isWindowRule(rule);
  const problems = atLevel(
    [
      { spec: { ...SHAPE, seed: 21 + C, packed: true, s0: true }, opts: chunkForm(C), label: `C=${C}` },
      ...(windowed
        ? [{
          spec: { ...SHAPE, dk: 8, dv: 8, seed: 22, packed: true, s0: true },
          opts: chunkForm(1),
          label: "C=1 Dk=Dv=8",
        }]
        : []),
    ],
    [1, 5, 16].map((c) => ({
      spec: { ...FULL_SHAPE, seed: 21 + c, packed: true, s0: true },
      opts: chunkForm(c),
      label: `C=${c} Dk=5 Dv=3`,
    })),
  );
  gpuTest(
    `webgpu chunk kernels of ${rule} match the reference: packed starts, S0, chunk sizes ${
      [...new Set(problems.map((p) => p.opts.chunkSize ?? 64))].sort((a, b) => a - b).join(", ")
    }`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        for (const p of problems) {
          await compareChunk(gpu, config, p.spec, p.opts, `${rule}/${alignment}/${p.label}`);
        }
      }
    },
  );

  const carried = { ...SHAPE, T: 17, seed: 31, packed: true, s0: true };
  const continued = atLevel(
    [
      { spec: carried, opts: chunkForm(C), label: `carry C=${C}`, from: 6 },
      // the parallel form is the chunked form with one chunk: the 3 positions after the carry (two
      // row tiles), then 2 (a partial chunk)
      ...[9, 8].map((T) => ({
        spec: { ...carried, T },
        opts: { form: "parallel", chunkSize: C } as FormOptions,
        label: `parallel (one chunk of ${T - 6}) carry`,
        from: 6,
      })),
      { spec: { ...SHAPE, B: 1, T: 37, seed: 32, packed: true }, opts: chunkForm(C), label: `T=37 C=${C}` },
    ],
    [
      {
        spec: { ...FULL_SHAPE, T: 17, seed: 31, packed: true, s0: true },
        opts: chunkForm(3),
        label: "carry C=3 Dv=3",
        from: 6,
      },
      {
        spec: { ...FULL_SHAPE, T: 17, seed: 31, packed: true, s0: true },
        opts: { form: "parallel" },
        label: "parallel (C=64) carry",
        from: 6,
      },
      {
        spec: { B: 1, T: 37, H: 2, dk: 7, dv: 9, seed: 32, packed: true },
        opts: chunkForm(16),
        label: "T=37 C=16 Dk=7 Dv=9",
      },
    ],
  );
  gpuTest(
    `webgpu chunk kernels of ${rule} continue from a carry, run the parallel form, and take T = 37`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        for (const p of continued) {
          await compareChunk(gpu, config, p.spec, p.opts, `${rule}/${alignment} ${p.label}`, {
            from: p.from,
          });
        }
      }
    },
  );
}

for (const rule of ["falcon1a", "falcon3a", "falcon1", "falcon2", "falcon2a", "falcon3"] as const) {
  const problems = atLevel(
    [{ spec: { B: 1, T: 29, ...SMALL_HEADS, seed: 41 }, opts: chunkForm(C), label: `C=${C}` }],
    [{ spec: { B: 1, T: 29, H: 2, dk: 6, dv: 5, seed: 41 }, opts: chunkForm(16), label: "C=16 Dk=6 Dv=5" }],
  );
  gpuTest(
    `webgpu chunk kernels of ${rule} stay finite and match with the clamp binding at every step`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        for (const p of problems) {
          const label = `${rule}/${alignment} clamped ${p.label}`;
          const spec = { ...p.spec, packed: true, lambdaScale: 1e4, betaLo: 1.3 };
          // the clamp binds at every step that writes, per the reference trace
          for (let h = 0; h < spec.H; h++) {
            const trace = recurrentTrace(config, headOf(config, spec, randomCase(config, spec), 0, h));
            let writes = 0;
            for (let i = 0; i < trace.eta.length; i++) if (trace.eta[i] !== 0) writes++;
            if (writes === 0 || trace.clamped !== writes) {
              throw new Error(`${label}: clamp binds at ${trace.clamped} of ${writes} writing steps`);
            }
          }
          if (!isFalconRule(rule)) throw new Error("unreachable");
          await compareChunk(gpu, config, spec, p.opts, label, { recurrent: true });
        }
      }
    },
  );
}

for (const rule of ["gated_deltanet", "mamba2"] as const) {
  const problems = atLevel(
    [{ spec: { ...SHAPE, T: 29, seed: 43 }, opts: chunkForm(C), label: `C=${C}` }],
    [{ spec: { ...FULL_SHAPE, T: 29, seed: 43 }, opts: chunkForm(16), label: "C=16 Dv=3" }],
  );
  gpuTest(
    `webgpu chunk kernels of ${rule} stay finite and match where the decay underflows to 0`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment, mambaA: [200, 1] });
        // gated_deltanet: exp(-lambdabar), lambdabar uniform in [0, 1e3] (underflowing, tiny and moderate decays mixed); mamba2: exp(-dt A) with A = 200 in head 0
        for (const p of problems) {
          const spec = { ...p.spec, packed: true, lambdaScale: 1e3 };
          await compareChunk(gpu, config, spec, p.opts, `${rule}/${alignment} underflow ${p.label}`);
        }
      }
    },
  );
}

gpuTest(
  "a chunk backward without dS0 returns no ds0 and every other gradient bit for bit, every chunk rule, whole and in batch slices",
  async (gpu) => {
    for (const rule of CHUNK_RULES) {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        await assertS0GradOptOut(gpu, config, chunkForm(C));
        // the full level: head sizes that bind the workspace rows as vec4 (as at Dk = Dv = 64)
        if (FULL_LEVEL) await assertS0GradOptOut(gpu, config, chunkForm(4), gpu, { H: 2, dk: 8, dv: 8 });
      }
    }
    // one batch row per slice (the cases' calls have B = 2, T <= 11)
    for (const rule of ["falcon1a", "falcon1", "falcon3"] as const) {
      const config = ruleConfig(rule);
      const limit = chunkWorkspaceBytes(config, { ...SHAPE, B: 1, T: 11 }, C, true);
      const sliced = createFastWeightOps(gpu.runtime, { maxChunkWorkspaceBytes: limit });
      await assertS0GradOptOut(gpu, config, chunkForm(C), sliced);
      // flushes inside each slice's call (a host clock that ticks per dispatch): its step table, an upload bound
      // in every pass, stays its own until the next slice's upload (the next slice's writeBuffer overwrote
      // it under the slice's last passes, intermittently where a slow host flushed there)
      if (rule !== "falcon3") continue;
      const rt = gpu.runtime;
      const [clock, flushAfterMs] = [rt.clock, rt.flushAfterMs];
      let ticks = 0;
      rt.clock = () => ticks++;
      rt.flushAfterMs = 3;
      try {
        await assertS0GradOptOut(gpu, config, chunkForm(C), sliced);
      } finally {
        rt.clock = clock;
        rt.flushAfterMs = flushAfterMs;
      }
    }
  },
);

// the delta rules' staged products (the solve's key Gram: 4 x 4 blocks on and below the diagonal; [U0 | V] = T R
// over several slices) and the forward scan's factor panels (two of V's columns, two of Xe's rows at C = 40):
// several blocks per chunk and per state, blocks above the diagonal, several slices, a partial last one and a partial last chunk (C, Dk, Dv not multiples
// of 32 or 16), entered from a carry, with and without starts (and S0). The forward alone: the backward
// recomputes it with the same kernels, and its pipelines at these sizes take minutes to compile on a
// software adapter
gpuTest(
  "webgpu chunk kernels of falcon1 match the reference over several staged blocks (C = 40, Dk = 36, Dv = 34; Dk = 72)",
  async (gpu) => {
    const config = ruleConfig("falcon1");
    // unpacked, the state crosses every chunk boundary (a start in a chunk zeroes its transition);
    // packed, S0 enters at the starts
    for (const packed of [false, true]) {
      const spec = { B: 1, T: 97, H: 1, dk: 36, dv: 34, seed: 51, packed, s0: true };
      const label = `falcon1 C=40 Dk=36 Dv=34 carry packed=${packed}`;
      await compareChunk(gpu, config, spec, chunkForm(40), label, { from: 7, forwardOnly: true });
    }
    // Dk = 72: two key rows per invocation in the scan, its panels 16 columns wide, three row blocks of
    // the transition (about 2 minutes of compiling on a software adapter: at the full level only)
    if (!FULL_LEVEL) return;
    const wide = { B: 1, T: 50, H: 1, dk: 72, dv: 8, seed: 52, s0: true };
    await compareChunk(gpu, config, wide, chunkForm(16), "falcon1 C=16 Dk=72 Dv=8 carry", {
      from: 5,
      forwardOnly: true,
    });
  },
);

// the per-column rules' staged column_gram and tiled column_readout (COLUMN_GRAM_STAGED, COLUMN_READOUT_TILED of
// chunk_wgsl.ts): several staged slices of the key entries and of the chunk's steps, partial ones and partial 4 x 4
// blocks (C, Dk, Dv not multiples of 8 or 4), a partial last chunk; Dv = 68: two tiles of value columns; C = 72: two
// tiles of rows and 2 x 2 Gram tiles; entered from a carry, unpacked (one segment per chunk) and packed (starts
// inside chunks, S0 after them). The forward alone: the backward's recompute runs the same column_gram (the small
// level's tests above compare it), and its pipelines at these sizes compile slowly on a software adapter
gpuTest(
  `webgpu chunk kernels of falcon2 and falcon2a match the reference over several staged slices and tiles (C = 40, Dk = 36, Dv = ${
    FULL_LEVEL ? 34 : 3
  }; Dv = 68; C = 72)`,
  async (gpu) => {
    const tiling = [
      columnReadoutLayout({ C: 40, dv: 68 }).colTiles,
      columnReadoutLayout({ C: 72, dv: 4 }).rowTiles,
    ];
    if (tiling[0] !== 2 || tiling[1] !== 2 || columnGramLayout(72).side !== 2) {
      throw new Error(`column tiles ${tiling}, Gram tiles ${columnGramLayout(72).side}: expected 2 each`);
    }
    const cases = [
      // Dv = 34 at the full level; CI takes Dv = 3 (the grouped scans of Dv = 34 compiled for minutes on llvmpipe)
      {
        spec: { B: 1, T: 97, H: 1, dk: 36, dv: FULL_LEVEL ? 34 : 3, seed: 54 },
        C: 40,
        packed: [false, true],
      },
      { spec: { B: 1, T: 61, H: 1, dk: 8, dv: 68, seed: 55 }, C: 40, packed: [true] },
      { spec: { B: 1, T: 160, H: 1, dk: 12, dv: 4, seed: 56 }, C: 72, packed: [true] },
    ];
    // falcon2a's readout and Gram are falcon2's kernels with other coefficients: CI runs it at the first shape only
    // (each new shape compiles its grouped scan for 10-20 s on a software adapter); with its split scans
    // (COLUMN_SPLIT_SCAN: no grouped scan in the forward, and a Gram kernel of Kq alone) also at C = 72, its Gram
    // kernel's 2 x 2 tiles
    for (const rule of ["falcon2", "falcon2a"] as const) {
      const config = ruleConfig(rule);
      const some = splitsColumnScan(config) ? [cases[0], cases[2]] : cases.slice(0, 1);
      for (const { spec, C, packed } of rule === "falcon2" || FULL_LEVEL ? cases : some) {
        for (const p of packed) {
          const label = `${rule} C=${C} Dk=${spec.dk} Dv=${spec.dv} carry packed=${p}`;
          await compareChunk(gpu, config, { ...spec, packed: p, s0: true }, chunkForm(C), label, {
            from: 7,
            forwardOnly: true,
          });
        }
      }
    }
  },
);

// falcon2a's split state scan (COLUMN_SPLIT_SCAN of chunk_wgsl.ts: column_state_increment per chunk and tile of the
// state, column_increment_scan per state element): Dk = 70, two tiles of key rows (36 each, the last partial), Dv = 5
// (a partial 4 x 4 block), packed starts inside chunks with S0, entered from a carry, three whole chunks and a partial
// one, forward and backward (5 s on llvmpipe with an empty shader cache)
gpuTest(
  "webgpu chunk kernels of falcon2a match the reference with the split state scan over two tiles of the state (C = 8, Dk = 70, Dv = 5)",
  async (gpu) => {
    const config = ruleConfig("falcon2a");
    const spec = { B: 1, T: 31, H: 1, dk: 70, dv: 5, seed: 57, packed: true, s0: true };
    const shape = deviceChunkShape(gpu, config, spec, 8);
    if (COLUMN_SPLIT_SCAN && (!splitsColumnScan(config) || columnIncrementLayout(shape).rowTiles !== 2)) {
      throw new Error(
        `increment tiles ${JSON.stringify(columnIncrementLayout(shape))}: expected 2 row tiles`,
      );
    }
    await compareChunk(gpu, config, spec, chunkForm(8), "falcon2a C=8 Dk=70 Dv=5 carry", { from: 5 });
  },
);

// solve_input_grads with one workgroup per chunk (RP = C): the pair weights F mirrored in workgroup memory
// instead of a third product (the small level's C = 3 takes RP = 2 < C, two workgroups per chunk and three
// products); packed starts with S0, a carry (rows from S_in), a partial last chunk. Dk = 8, Dv = 4: the delta
// rules' readout, dq, solve and solve_input_grads with vec4 bindings of the workspace rows and dO (`bindsVec4`)
gpuTest(
  "webgpu chunk kernels of falcon1 match the reference with solve_input_grads over the whole chunk (RP = C = 4)",
  async (gpu) => {
    const config = ruleConfig("falcon1");
    const spec = { B: 1, T: 15, H: 2, dk: 8, dv: 4, seed: 53, packed: true, s0: true };
    const shape = deviceChunkShape(gpu, config, spec, 4);
    if (shape.RP !== 4) throw new Error(`RP = ${shape.RP} at C = 4, expected the whole chunk`);
    const vec4Passes: ChunkPass[] = ["readout", "query_grads", "solve", "solve_input_grads"];
    if (!vec4Passes.every((pass) => bindsVec4(pass, spec))) {
      throw new Error("expected vec4 loads");
    }
    await compareChunk(gpu, config, spec, chunkForm(4), "falcon1 C=4 RP=4 carry", { from: 2 });
  },
);

// pair_column_grads (and the delta rules' readout_dw) take the chunk's pair columns past their whole RC tiles in a
// tail pipeline (RT columns, one workgroup per chunk; none where RC divides them): the small level's C = 3 reaches
// it for falcon3a (6 = 4 + 2 pair columns) and the pad-0 rules (3 = 2 + 1), so the tests above compare it; the
// falcon3a C = 1 case (4 columns) and the falcon1 RP = 4 test below (a pad-0 rule, 4 columns) run without one
gpuTest(
  "the small level's chunk tests reach the pair-column tail pipelines at C = 3, and run without them at C = 1 and 4",
  (gpu) => {
    const cases = [
      ["falcon3a", SHAPE, C, 4, 2],
      ["falcon1a", SHAPE, C, 2, 1],
      ["falcon1", SHAPE, C, 2, 1],
      ["falcon3a", { ...SHAPE, dk: 8, dv: 8 }, 1, 4, 0],
      ["falcon1", { B: 1, T: 15, H: 2, dk: 8, dv: 4 }, 4, 4, 0],
    ] as const;
    for (const [rule, d, c, RC, RT] of cases) {
      const shape = deviceChunkShape(gpu, ruleConfig(rule), d, c);
      if (shape.RC !== RC || shape.RT !== RT) {
        throw new Error(`${rule} at C = ${c}: RC = ${shape.RC}, RT = ${shape.RT}, expected ${RC}, ${RT}`);
      }
    }
    return Promise.resolve();
  },
);

// the log-decay gradient (decay_grads, delta_decay_grads) past one tile of chain weights: C = 72 takes 2 x 2 tiles
// (64 and 8 steps a side: the lower triangle's 3), with starts (segments) and a partial last chunk (minutes of
// compiling the backward pipelines per rule on a software adapter: at the full level only)
gpuTest(
  "webgpu decay gradients of falcon1a and falcon1 match over several tiles of chain weights (C = 72)",
  async (gpu) => {
    for (const rule of ["falcon1a", "falcon1"] as const) {
      const layout = decayGradLayout(72);
      if (layout.tiles < 2) throw new Error(`C = 72: ${layout.tiles} tiles per chunk side, expected several`);
      if (!FULL_LEVEL) continue;
      const spec = { B: 1, T: 160, H: 1, dk: 4, dv: 4, seed: 53, packed: true, s0: true };
      await compareChunk(gpu, ruleConfig(rule), spec, chunkForm(72), `${rule} C=72 Dk=4 Dv=4`);
    }
  },
);

// pair_column_grads with 32-column tiles and Dk = 132: 8 x 33 blocks of the dx products over 256 invocations
// (a second block for some), 17 staged slices of the key and value entries, 4 of the steps, a partial last
// chunk (the other variants and window pairs run at the small sizes above; a new shape compiles slowly on a
// software adapter, so one rule, and its compare, 85 s of compiling there with an empty shader cache, at the
// full level only: more blocks than invocations needs Dk > 64 at the largest tile)
gpuTest(
  `webgpu pair_column_grads of falcon1a ${
    FULL_LEVEL ? "matches" : "tiles (compared at the full level)"
  } with more 4 x 4 blocks than invocations (C = 32, Dk = 132, Dv = 4)`,
  async (gpu) => {
    const config = ruleConfig("falcon1a");
    const spec = { B: 1, T: 40, H: 1, dk: 132, dv: 4, seed: 51, packed: true, s0: true };
    const shape = deviceChunkShape(gpu, config, spec, 32);
    const blocks = Math.ceil(shape.RC / 4) * Math.ceil(spec.dk / 4);
    if (blocks <= STAGED_WG) {
      throw new Error(`RC = ${shape.RC} gives ${blocks} dx blocks, none a second per invocation`);
    }
    if (!FULL_LEVEL) return;
    await compareChunk(gpu, config, spec, chunkForm(32), "falcon1a C=32 Dk=132 Dv=4");
  },
);

// falcon3a's pair-column tail past the chunk's first steps: at C = 16 its 4 columns from chunk column 16 (19 = 16 + 3
// pair columns) are the chunk's last pairs, which no step before chunk step 13 meets, so its products start at
// step 8 (a whole slice); Dk = Dv = 8 stages its q, x, y, dO and G 16 bytes at a time (bindsVec4). Two whole chunks
// and a partial one; a new shape compiles slowly on a software adapter, so compared at the full level only
gpuTest(
  `webgpu pair_column_grads_tail of falcon3a ${
    FULL_LEVEL ? "matches" : "tiles (compared at the full level)"
  } from the chunk's later steps with 16-byte loads (C = 16, Dk = Dv = 8)`,
  async (gpu) => {
    const config = ruleConfig("falcon3a");
    const spec = { B: 1, T: 37, H: 2, dk: 8, dv: 8, seed: 33, packed: true, s0: true };
    const shape = deviceChunkShape(gpu, config, spec, 16);
    const tail = pairColumnTiling("pair_column_grads_tail", shape, 3);
    if (shape.RT !== 4 || tail.first !== 16 || !bindsVec4("pair_column_grads_tail", spec)) {
      throw new Error(
        `RC = ${shape.RC}, RT = ${shape.RT}, tail from column ${tail.first}: expected 16, 4, 16`,
      );
    }
    if (!FULL_LEVEL) return;
    await compareChunk(gpu, config, spec, chunkForm(16), "falcon3a C=16 Dk=Dv=8 tail from step 8");
  },
);

// the per-column rules' grouped scans (column_state_scan, column_reverse_scan: COLUMN_SCAN_COLUMNS value columns per
// workgroup, RL row lanes per column): a partial column group (its guard columns), more key rows and chunk rows than
// row lanes, and in 16 KiB of workgroup memory several staged slices of X per chunk; packed starts with S0, entered
// from a carry, whole chunks and a partial one, forward and backward. A grouped scan compiles in 10-40 s on a
// software adapter with an empty shader cache (its workgroup arrays grow with C and the columns), so CI compares
// falcon2 (the sweep; falcon2a runs the same kernels without it) at C = 40, Dk = 36, Dv = 9 (16 columns per
// workgroup, 32 row lanes each where the device takes 512 invocations); the full level both rules at C = 64,
// Dk = 132, Dv = 11 (16 slices in 16 KiB)
const SCAN_CASE = FULL_LEVEL ? { C: 64, dk: 132, dv: 11 } : { C: 40, dk: 36, dv: 9 };
gpuTest(
  `webgpu chunk kernels of falcon2${
    FULL_LEVEL ? " and falcon2a" : ""
  } match over staged key slices and a partial column group (C = ${SCAN_CASE.C}, Dk = ${SCAN_CASE.dk}, Dv = ${SCAN_CASE.dv})`,
  async (gpu) => {
    const { C, dk, dv } = SCAN_CASE;
    const spec = { B: 1, T: 150, H: 1, dk, dv, seed: 61, packed: true, s0: true };
    const shared = gpu.runtime.device.limits.maxComputeWorkgroupStorageSize;
    for (const rule of FULL_LEVEL ? ["falcon2", "falcon2a"] as const : ["falcon2"] as const) {
      const config = ruleConfig(rule);
      const shape = deviceChunkShape(gpu, config, spec, C);
      const layout = shape.CS > 1 ? columnScanLayout(shape) : undefined;
      const reached = layout !== undefined && spec.dv % shape.CS !== 0 && spec.dk > layout.RL &&
        C > layout.RL &&
        (shared > 16384 || layout.slices >= 2);
      if (COLUMN_SCAN_COLUMNS > 1 && !reached) {
        throw new Error(
          `CS = ${shape.CS}, ${
            JSON.stringify(layout)
          }: expected a partial column group, RL < Dk, RL < C, several slices`,
        );
      }
      const label = `${rule} C=${C} Dk=${spec.dk} Dv=${spec.dv} carry`;
      await compareChunk(gpu, config, spec, chunkForm(C), label, { from: 9 });
    }
  },
);

gpuTest(
  "a chunk workspace above the device's binding limit is a RangeError naming the rule, shape and way out",
  (gpu) => {
    const config = ruleConfig("falcon3");
    const limit = gpu.runtime.device.limits.maxStorageBufferBindingSize;
    // the workspace grows with T: the first power of two past the limit
    const spec = { B: 1, T: 1024, H: 1, dk: 64, dv: 64, seed: 3 };
    let T = spec.T;
    while (chunkWorkspaceBytes(config, { ...spec, T }, 64, false) <= limit) T *= 2;
    const data = randomCase(config, { ...spec, T });
    const { inputs } = uploadCase(gpu, config, { ...spec, T }, data, 0, T);
    let message = "";
    try {
      gpu.fastWeightForward(config, inputs, { form: "chunk", chunkSize: 64 });
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
      message = e.message;
    }
    gpu.runtime.flush();
    for (
      const part of ["falcon3 forward in chunk form", `T = ${T}`, "maxStorageBufferBindingSize", "recurrent"]
    ) {
      if (!message.includes(part)) throw new Error(`expected "${part}" in the error, got "${message}"`);
    }
    return Promise.resolve();
  },
);
