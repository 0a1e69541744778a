/**
 * The chunk-parallel WebGPU kernels (`shaders/fast_weight_chunk.ts`, additive rules;
 * `shaders/fast_weight_chunk_delta.ts`, delta rules; `shaders/fast_weight_chunk_column.ts`, the
 * per-column rules falcon2 and falcon2a; `shaders/fast_weight_chunk_window_reg.ts`, falcon3) against
 * the float64 reference backend and against the WebGPU recurrent kernels: both alignments, several
 * chunks with a partial last one, partial tiles, packed starts mid-chunk, a non-zero S0,
 * continuation from a carry, the parallel form (one chunk), `Dk != Dv`, and the clamp binding at
 * every step. Tolerances (SPEC section 4): relative L2 1e-5 for outputs and carries, 1e-4 for gradients.
 *
 * Sizes: the small level (the default) uses the shared small sizes of `src/testing/shapes.ts`
 * (`H = 2, Dk = 5, Dv = 6`, chunk size 3: compiled once per run on a software adapter) and, for
 * falcon3, four window / size combinations that reach its column panels, partial blocks and
 * multi-workgroup solves; `FALCON_TEST_LEVEL=full` adds the larger chunk sizes (5, 16, 64) and head
 * sizes (up to 9) for a real GPU.
 */

import type { Backend, FastWeightGrads, FormOptions, Tensor } from "../src/rules/backend.ts";
import {
  type Alignment,
  ALIGNMENTS,
  isFalconRule,
  isWindowRule,
  type RuleConfig,
  ruleConfig,
  type RuleName,
} from "../src/rules/config.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { recurrentTrace } from "../src/rules/reference/recurrent.ts";
import { assertRelL2 } from "../src/testing/compare.ts";
import { testLevelFromEnv } from "../src/testing/level.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";
import { type CaseSpec, headOf, randomCase, uploadCase } from "./_fast_weight_case.ts";
import { usesChunkKernels } from "./fast_weight.ts";
import { chunkWorkspaceBytes } from "./fast_weight_chunk.ts";
import { gpuTest } from "./_test_util.ts";

const ref = createRefBackend();
const FWD = 1e-5;
const GRAD = 1e-4;
const GRAD_NAMES = ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const;
const CHUNK_RULES: RuleName[] = [
  "falcon1a",
  "falcon3a",
  "linear",
  "retnet",
  "mamba2",
  "falcon1",
  "deltanet",
  "gated_deltanet",
  "falcon2",
  "falcon2a",
  "falcon3",
];

function expectClose(
  name: string,
  x: Float32Array | Float64Array,
  y: Float32Array | Float64Array,
  tol: number,
) {
  if (!x.every(Number.isFinite)) throw new Error(`${name}: non-finite values`);
  // a reference that is zero to float32 resolution (decays that underflow) is compared shifted by 1
  if (y.every((v) => Math.abs(v) < 1e-30)) {
    assertRelL2(`${name} (zero)`, x.map((v) => v + 1), y.map((v) => v + 1), tol);
  } else assertRelL2(name, x, y, tol);
}

/** Compare one GPU tensor with a reference tensor and, when given, another GPU tensor (the recurrent kernel's). */
async function expectBoth(
  gpu: Backend,
  label: string,
  got: Tensor,
  want: Tensor,
  recurrent: Tensor | undefined,
  tol: number,
) {
  const x = await gpu.read(got);
  expectClose(`${label} vs reference`, x, await ref.read(want), tol);
  if (recurrent) expectClose(`${label} vs recurrent`, x, await gpu.read(recurrent), tol);
}

/**
 * Forward, carry and backward of one problem (optionally continued from a carry of positions
 * `[0, from)`): the GPU chunk form against the reference and, when `recurrent`, the GPU recurrent
 * form (whose unrolled kernels take long to compile on a software adapter, so only at one shape).
 */
async function compareChunk(
  gpu: Backend,
  config: RuleConfig,
  spec: CaseSpec,
  opts: FormOptions,
  label: string,
  { from = 0, recurrent = false } = {},
) {
  if (!usesChunkKernels(config, opts)) throw new Error(`${label}: not routed to the chunk kernels`);
  const data = randomCase(config, spec);
  let carryGpu, carryRef;
  if (from > 0) {
    carryGpu = gpu.fastWeightForward(config, uploadCase(gpu, config, spec, data, 0, from).inputs, opts).carry;
    carryRef = ref.fastWeightForward(config, uploadCase(ref, config, spec, data, 0, from).inputs).carry;
  }
  const g = uploadCase(gpu, config, spec, data, from, spec.T, carryGpu);
  const r = uploadCase(ref, config, spec, data, from, spec.T, carryRef);
  const fc = gpu.fastWeightForward(config, g.inputs, opts);
  // the recurrent kernel at the call's chunk size as its checkpoint interval (the pipelines the other
  // small tests compile)
  const rec: FormOptions = { form: "recurrent", chunkSize: opts.chunkSize };
  const frec = recurrent ? gpu.fastWeightForward(config, g.inputs, rec) : undefined;
  const fr = ref.fastWeightForward(config, r.inputs);
  await expectBoth(gpu, `${label} o`, fc.o, fr.o, frec?.o, FWD);
  await expectBoth(gpu, `${label} carry.state`, fc.carry.state, fr.carry.state, frec?.carry.state, FWD);
  await expectBoth(
    gpu,
    `${label} carry.lastKey`,
    fc.carry.lastKey,
    fr.carry.lastKey,
    frec?.carry.lastKey,
    FWD,
  );
  await expectBoth(
    gpu,
    `${label} carry.windowX`,
    fc.carry.windowX,
    fr.carry.windowX,
    frec?.carry.windowX,
    FWD,
  );
  const bc: FastWeightGrads = gpu.fastWeightBackward(config, g.inputs, g.dO, opts);
  const brec = recurrent ? gpu.fastWeightBackward(config, g.inputs, g.dO, rec) : undefined;
  const br: FastWeightGrads = ref.fastWeightBackward(config, r.inputs, r.dO);
  for (const name of GRAD_NAMES) {
    await expectBoth(gpu, `${label} ${name}`, bc[name], br[name], brec?.[name], GRAD);
  }
}

const FULL = testLevelFromEnv() === "full";
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
  recurrent?: boolean;
}

/** The problems of the level: the small ones, and at the full level the extra ones too. */
function atLevel(small: Problem[], full: Problem[]): Problem[] {
  return FULL ? [...small, ...full] : small;
}

const chunk = (chunkSize: number): FormOptions => ({ form: "chunk", chunkSize });

for (const rule of CHUNK_RULES) {
  // a window of 4 pairs reaches 3 chunks back at chunk size 1 (the pairs of the steps before a chunk
  // are then spread over several earlier chunks); without a window chunk size 1 is the same code as 3.
  // Those new pipelines also take Dk = 8: whole 4 x 4 blocks only, no partial one
  const windowed = isWindowRule(rule);
  const problems = atLevel(
    [
      { spec: { ...SHAPE, seed: 21 + C, packed: true, s0: true }, opts: chunk(C), label: `C=${C}` },
      ...(windowed
        ? [{ spec: { ...SHAPE, dk: 8, seed: 22, packed: true, s0: true }, opts: chunk(1), label: "C=1 Dk=8" }]
        : []),
    ],
    [1, 5, 16].map((c) => ({
      spec: { ...FULL_SHAPE, seed: 21 + c, packed: true, s0: true },
      opts: chunk(c),
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
      { spec: carried, opts: chunk(C), label: `carry C=${C}`, from: 6 },
      // the parallel form is the chunked form with one chunk: the 3 positions after the carry (two
      // row tiles), then 2 (a partial chunk)
      ...[9, 8].map((T) => ({
        spec: { ...carried, T },
        opts: { form: "parallel", chunkSize: C } as FormOptions,
        label: `parallel (one chunk of ${T - 6}) carry`,
        from: 6,
      })),
      { spec: { ...SHAPE, B: 1, T: 37, seed: 32, packed: true }, opts: chunk(C), label: `T=37 C=${C}` },
    ],
    [
      {
        spec: { ...FULL_SHAPE, T: 17, seed: 31, packed: true, s0: true },
        opts: chunk(3),
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
        opts: chunk(16),
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
// of 3 and more) run at the default window 4 in the tests above and at window 5 in the panel test.
/** Dk + Dv = 73, Dv = 33: wsolve's columns over two workgroups per chunk, wsolvet's over three. */
const WIDE_SOLVE: WindowProblem = { window: 2, C: 5, T: 13, dk: 40, dv: 33 };

async function compareWindow(gpu: Backend, p: WindowProblem, alignment: Alignment, seed: number) {
  const config = ruleConfig("falcon3", { alignment, window: p.window });
  const spec = { B: 2, T: p.T, H: 2, dk: p.dk, dv: p.dv, seed, packed: true, s0: true };
  await compareChunk(
    gpu,
    config,
    spec,
    chunk(p.C),
    `falcon3/W=${p.window}/${alignment}/C=${p.C}/Dk=${p.dk}/Dv=${p.dv}`,
  );
}

gpuTest(
  `webgpu chunk kernels of falcon3 match the reference with windows 1, 2${
    FULL ? " and 3" : ""
  } (closed-form eigenpairs${FULL ? ", and Jacobi" : ""})`,
  async (gpu) => {
    const windows: WindowProblem[] = [
      { window: 1, C, T: 13, ...SMALL_HEADS },
      WIDE_SOLVE,
      ...(FULL ? [1, 2, 3].map((window) => ({ window, C: 5, T: 13, dk: 5, dv: 3 })) : []),
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
      // window 5, C = 13: wpairs' panels of 12 steps (a full one, then 1 step; the last chunk 1
      // step), wcols / wpairs tiles of 2 steps (10 rows, 6 pairs per wcols tile: neither a multiple
      // of 4), and more rows per step than wsolvet's 4 invocations per column
      { window: 5, C: 13, T: 27, dk: 3, dv: 2 },
      WIDE_SOLVE,
      ...(FULL
        ? [
          // window 4, C = 20: panels of 16 steps (a full one, then 4; the last chunk 5 steps)
          { window: 4, C: 20, T: 45, dk: 5, dv: 3 },
          // window 3, C = 2: 6-row tiles, 6-row panels and 4 pairs per wcols tile
          { window: 3, C: 2, T: 13, dk: 5, dv: 3 },
          { window: 5, C: 3, T: 11, dk: 3, dv: 2 },
        ]
        : []),
    ];
    for (const p of problems) await compareWindow(gpu, p, "prefix", 61 + p.window);
  },
);

for (const rule of ["falcon1a", "falcon3a", "falcon1", "falcon2", "falcon2a", "falcon3"] as const) {
  const problems = atLevel(
    [{ spec: { B: 1, T: 29, ...SMALL_HEADS, seed: 41 }, opts: chunk(C), label: `C=${C}` }],
    [{ spec: { B: 1, T: 29, H: 2, dk: 6, dv: 5, seed: 41 }, opts: chunk(16), label: "C=16 Dk=6 Dv=5" }],
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
    [{ spec: { ...SHAPE, T: 29, seed: 43 }, opts: chunk(C), label: `C=${C}` }],
    [{ spec: { ...FULL_SHAPE, T: 29, seed: 43 }, opts: chunk(16), label: "C=16 Dv=3" }],
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
