/**
 * Test helpers of the chunk-kernel tests: one problem on the WebGPU chunk form against the float64
 * reference (and, when asked, the WebGPU recurrent form), every output, carry field and gradient.
 * Tolerances (SPEC section 4): relative L2 1e-5 for outputs and carries, 1e-4 for gradients.
 *
 * @module
 */

import {
  type Backend,
  type FastWeightGrads,
  type FormOptions,
  gradOf,
  type Tensor,
} from "../src/rules/backend.ts";
import type { RuleConfig } from "../src/rules/config.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { assertRelL2 } from "../src/testing/compare.ts";
import { testLevelFromEnv } from "../src/testing/level.ts";
import { type CaseSpec, randomCase, uploadCase } from "./_fast_weight_case.ts";
import { usesChunkKernels } from "./fast_weight.ts";
import { type ChunkDims, chunkShape } from "./fast_weight_chunk.ts";
import type { ChunkShape } from "./shaders/chunk_wgsl.ts";
import type { WebGpuBackend } from "./backend.ts";

/** Whether the full test level runs (`FALCON_TEST_LEVEL=full`): the large sizes too. */
export const FULL_LEVEL: boolean = testLevelFromEnv() === "full";

/** The chunk shape a call of `config` at sizes `d` and chunk size `C` gets on `gpu`'s device (its limits). */
export function deviceChunkShape(
  gpu: WebGpuBackend,
  config: RuleConfig,
  d: ChunkDims,
  C: number,
): ChunkShape {
  const limits = gpu.runtime.device.limits;
  return chunkShape(
    config,
    d,
    C,
    limits.maxComputeWorkgroupStorageSize,
    limits.maxComputeInvocationsPerWorkgroup,
  );
}

/** The chunk form at `chunkSize`. */
export function chunkForm(chunkSize: number): FormOptions {
  return { form: "chunk", chunkSize };
}

const ref = createRefBackend();
const FWD = 1e-5;
const GRAD = 1e-4;
const GRAD_NAMES = ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const;

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
 * form (whose unrolled kernels take long to compile on a software adapter, so only at one shape);
 * with `forwardOnly`, the outputs and carry alone (for shapes whose backward pipelines would take minutes
 * to compile there). Throws naming `label`, the array and the error where one is off.
 */
export async function compareChunk(
  gpu: Backend,
  config: RuleConfig,
  spec: CaseSpec,
  opts: FormOptions,
  label: string,
  { from = 0, recurrent = false, forwardOnly = false } = {},
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
  for (const key of ["state", "lastKey", "windowX"] as const) {
    await expectBoth(gpu, `${label} carry.${key}`, fc.carry[key], fr.carry[key], frec?.carry[key], FWD);
  }
  if (forwardOnly) return;
  const bc: FastWeightGrads = gpu.fastWeightBackward(config, g.inputs, g.dO, opts);
  const brec = recurrent ? gpu.fastWeightBackward(config, g.inputs, g.dO, rec) : undefined;
  const br: FastWeightGrads = ref.fastWeightBackward(config, r.inputs, r.dO);
  for (const name of GRAD_NAMES) {
    await expectBoth(
      gpu,
      `${label} ${name}`,
      gradOf(bc, name),
      gradOf(br, name),
      brec && gradOf(brec, name),
      GRAD,
    );
  }
}
