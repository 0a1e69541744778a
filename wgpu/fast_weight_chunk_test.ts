/**
 * The chunk-parallel WebGPU kernels (`shaders/fast_weight_chunk_additive.ts`, additive rules;
 * `shaders/fast_weight_chunk_delta.ts`, delta rules; `shaders/fast_weight_chunk_per_column.ts`, the
 * per-column rules falcon2 and falcon2a; `shaders/fast_weight_chunk_window_delta.ts`, falcon3) against
 * the float64 reference backend and against the WebGPU recurrent kernels: both alignments, chunk
 * sizes 1, 5 and 16 with `T` not a multiple of `C`, packed starts mid-chunk, a non-zero S0,
 * continuation from a carry, `Dk != Dv` (odd sizes), and the clamp binding at every step.
 * Tolerances (SPEC section 4): relative L2 1e-5 for outputs and carries, 1e-4 for gradients.
 */

import type { Backend, FastWeightGrads, FormOptions, Tensor } from "../src/rules/backend.ts";
import { ALIGNMENTS, isFalconRule, type RuleConfig, ruleConfig, type RuleName } from "../src/rules/config.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { recurrentTrace } from "../src/rules/reference/recurrent.ts";
import { assertRelL2 } from "../src/testing/compare.ts";
import { type CaseSpec, headOf, randomCase, uploadCase } from "./_fast_weight_case.ts";
import { usesChunkKernels } from "./fast_weight.ts";
import { chunkWorkspaceBytes } from "./fast_weight_chunk.ts";
import { gpuTest } from "./_test_util.ts";

const ref = createRefBackend();
/**
 * `FALCON_TEST_LEVEL=full` (the GPU machine) runs every case below; the default level keeps every code
 * path with fewer kernel shapes, since each new shape compiles slowly on a software adapter: C = 1 and 5
 * (C = 16 > T at the first shape is the single partial chunk that T = 37, C = 16 also has), the carry and
 * parallel cases under prefix alignment (lastKey carried) and T = 37 under same-step, the clamp cases
 * against the reference under prefix alignment without the recurrent kernel (tested in
 * fast_weight_test.ts).
 */
const FULL = Deno.env.get("FALCON_TEST_LEVEL") === "full";
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
  const frec = recurrent ? gpu.fastWeightForward(config, g.inputs, { form: "recurrent" }) : undefined;
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
  const brec = recurrent ? gpu.fastWeightBackward(config, g.inputs, g.dO, { form: "recurrent" }) : undefined;
  const br: FastWeightGrads = ref.fastWeightBackward(config, r.inputs, r.dO);
  for (const name of GRAD_NAMES) {
    await expectBoth(gpu, `${label} ${name}`, bc[name], br[name], brec?.[name], GRAD);
  }
}

const SHAPE = { B: 2, T: 13, H: 2, dk: 5, dv: 3 };

for (const rule of CHUNK_RULES) {
  gpuTest(
    `webgpu chunk kernels of ${rule} match the reference: C = 1 and 5 (and 16 at the full level), packed starts, S0`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        for (const C of FULL ? [1, 5, 16] : [1, 5]) {
          const spec = { ...SHAPE, seed: 21 + C, packed: true, s0: true };
          await compareChunk(
            gpu,
            config,
            spec,
            { form: "chunk", chunkSize: C },
            `${rule}/${alignment}/C=${C}`,
          );
        }
      }
    },
  );

  gpuTest(
    `webgpu chunk kernels of ${rule} continue from a carry, run the parallel form, and take T = 37, Dk = 7, Dv = 9`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        const label = `${rule}/${alignment}`;
        const carried = { ...SHAPE, T: 17, seed: 31, packed: true, s0: true };
        if (FULL || alignment === "prefix") {
          await compareChunk(gpu, config, carried, { form: "chunk", chunkSize: 3 }, `${label} carry C=3`, {
            from: 6,
          });
          await compareChunk(gpu, config, carried, { form: "parallel" }, `${label} parallel carry`, {
            from: 6,
          });
        }
        const wide = { B: 1, T: 37, H: 2, dk: 7, dv: 9, seed: 32, packed: true };
        if (FULL || alignment === "same-step") {
          await compareChunk(gpu, config, wide, { form: "chunk", chunkSize: 16 }, `${label} T=37 C=16`);
        }
      }
    },
  );
}

gpuTest(
  "webgpu chunk kernels of falcon3 match the reference with windows 1, 2 and 3 (closed-form and Jacobi eigenpairs)",
  async (gpu) => {
    for (const [window, alignment] of [[1, "prefix"], [2, "same-step"], [3, "prefix"]] as const) {
      const config = ruleConfig("falcon3", { alignment, window });
      const spec = { ...SHAPE, seed: 51 + window, packed: true, s0: true };
      await compareChunk(
        gpu,
        config,
        spec,
        { form: "chunk", chunkSize: 5 },
        `falcon3/W=${window}/${alignment}`,
      );
    }
  },
);

gpuTest(
  "webgpu chunk kernels of falcon3 walk several column panels, partial 4 x 4 blocks and solve workgroups",
  async (gpu) => {
    // window 4, C = 20: window_solve_input_grads' panels of 16 steps (a full one, then 4 steps; the last chunk 5 steps);
    // window 3, C = 2: 6-row tiles, 6-row panels and 4 pairs per window_row_grads tile (none a multiple of 4);
    // Dk + Dv = 73: window_solve's columns over two workgroups per chunk (the first mixing U0 and V columns,
    // the second partial), Dv = 33: window_solve_transposed's over three; window 5: more rows per step than window_solve_transposed's
    // invocations per column
    for (
      const [window, C, T, dk, dv] of [
        [4, 20, 45, 5, 3],
        [3, 2, 13, 5, 3],
        [2, 5, 13, 40, 33],
        [5, 3, 11, 3, 2],
      ] as const
    ) {
      const config = ruleConfig("falcon3", { alignment: "prefix", window });
      const spec = { ...SHAPE, T, dk, dv, seed: 61 + window, packed: true, s0: true };
      await compareChunk(
        gpu,
        config,
        spec,
        { form: "chunk", chunkSize: C },
        `falcon3/W=${window}/C=${C}/Dk=${dk}`,
      );
    }
  },
);

for (const rule of ["falcon1a", "falcon3a", "falcon1", "falcon2", "falcon2a", "falcon3"] as const) {
  gpuTest(
    `webgpu chunk kernels of ${rule} stay finite and match with the clamp binding at every step`,
    async (gpu) => {
      for (const alignment of FULL ? ALIGNMENTS : (["prefix"] as const)) {
        const config = ruleConfig(rule, { alignment });
        const label = `${rule}/${alignment} clamped`;
        const spec = {
          B: 1,
          T: 29,
          H: 2,
          dk: 6,
          dv: 5,
          seed: 41,
          packed: true,
          lambdaScale: 1e4,
          betaLo: 1.3,
        };
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
        await compareChunk(gpu, config, spec, { form: "chunk", chunkSize: 16 }, `${label} C=16`, {
          recurrent: FULL,
        });
      }
    },
  );
}

for (const rule of ["gated_deltanet", "mamba2"] as const) {
  gpuTest(
    `webgpu chunk kernels of ${rule} stay finite and match where the decay underflows to 0`,
    async (gpu) => {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment, mambaA: [200, 1] });
        // gated_deltanet: exp(-lambdabar), lambdabar uniform in [0, 1e3] (underflowing, tiny and moderate decays mixed); mamba2: exp(-dt A) with A = 200 in head 0
        const spec = { ...SHAPE, T: 29, seed: 43, packed: true, lambdaScale: 1e3 };
        await compareChunk(
          gpu,
          config,
          spec,
          { form: "chunk", chunkSize: 16 },
          `${rule}/${alignment} underflow`,
        );
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
