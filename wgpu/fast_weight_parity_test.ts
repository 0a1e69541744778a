/**
 * The WebGPU fast-weight kernels against the float64 reference backend (`createRefBackend`) for
 * every rule and both alignments, at the shared small sizes (`src/testing/shapes.ts`; its chunk size is
 * the recurrent backward's checkpoint interval): packed sequence starts with a random S0,
 * continuation from a carry, and the positive-decay clamp binding at every step.
 * Tolerances (SPEC section 4): relative L2 1e-5 for outputs and carries, 1e-4 for gradients.
 */

import {
  type Backend,
  type FastWeightGrads,
  type FormOptions,
  gradOf,
  type Tensor,
} from "../src/rules/backend.ts";
import { ALIGNMENTS, isFalconRule, type RuleConfig, ruleConfig, RULES } from "../src/rules/config.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { assertRelL2 } from "../src/testing/compare.ts";
import { recurrentTrace } from "../src/rules/reference/recurrent.ts";
import { type CaseSpec, headOf, randomCase, transferCarry, uploadCase } from "./_fast_weight_case.ts";
import { gpuTest } from "./_test_util.ts";
import { testLevelFromEnv } from "../src/testing/level.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";

const ref = createRefBackend();
const FWD = 1e-5;
const GRAD = 1e-4;
const GRAD_NAMES = ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const;

/** Sizes of a run: the problem and the options of the forward and backward calls (recurrent form). */
interface Sizes {
  shape: { B: number; T: number; H: number; dk: number; dv: number };
  forward: FormOptions;
  backward: FormOptions;
}

// the small sizes, the small chunk size as the checkpoint interval (the pipelines the other small tests
// compile); the full level adds the earlier sizes (Dv = 3, the default options forward, interval 4)
const SIZES: Sizes[] = [
  {
    shape: { B: 2, T: 13, ...SMALL_HEADS },
    forward: { chunkSize: SMALL_CHUNK },
    backward: { chunkSize: SMALL_CHUNK },
  },
  ...(testLevelFromEnv() === "full"
    ? [{ shape: { B: 2, T: 13, H: 2, dk: 5, dv: 3 }, forward: {}, backward: { chunkSize: 4 } }]
    : []),
];

async function expectClose(name: string, gpu: Backend, a: Tensor, b: Tensor, tol: number) {
  const x = await gpu.read(a);
  const y = await ref.read(b);
  if (!x.every(Number.isFinite)) throw new Error(`${name}: non-finite values`);
  if (y.every((v) => v === 0)) assertRelL2(`${name} (zero)`, x.map((v) => v + 1), y.map((v) => v + 1), tol);
  else assertRelL2(name, x, y, tol);
}

/** Forward, carry and backward of one problem on both backends. */
async function compareCall(gpu: Backend, config: RuleConfig, spec: CaseSpec, sizes: Sizes, label: string) {
  const data = randomCase(config, spec);
  const g = uploadCase(gpu, config, spec, data);
  const r = uploadCase(ref, config, spec, data);
  const fg = gpu.fastWeightForward(config, g.inputs, sizes.forward);
  const fr = ref.fastWeightForward(config, r.inputs);
  await expectClose(`${label} o`, gpu, fg.o, fr.o, FWD);
  await expectClose(`${label} carry.state`, gpu, fg.carry.state, fr.carry.state, FWD);
  await expectClose(`${label} carry.lastKey`, gpu, fg.carry.lastKey, fr.carry.lastKey, FWD);
  if (config.rule === "falcon3" || config.rule === "falcon3a") {
    await expectClose(`${label} carry.windowX`, gpu, fg.carry.windowX, fr.carry.windowX, FWD);
    await expectClose(`${label} carry.windowY`, gpu, fg.carry.windowY, fr.carry.windowY, FWD);
    if (fg.carry.windowCount.join() !== fr.carry.windowCount.join()) {
      throw new Error(`${label} windowCount ${fg.carry.windowCount} vs ${fr.carry.windowCount}`);
    }
  }
  const bg: FastWeightGrads = gpu.fastWeightBackward(config, g.inputs, g.dO, sizes.backward);
  const br: FastWeightGrads = ref.fastWeightBackward(config, r.inputs, r.dO);
  for (const name of GRAD_NAMES) {
    await expectClose(`${label} ${name}`, gpu, gradOf(bg, name), gradOf(br, name), GRAD);
  }
}

/** Run positions [0, T1) then [T1, T) from the carry, on both backends. */
async function compareContinuation(
  gpu: Backend,
  config: RuleConfig,
  spec: CaseSpec,
  sizes: Sizes,
  label: string,
) {
  const data = randomCase(config, spec);
  const T1 = 5;
  const first = gpu.fastWeightForward(
    config,
    uploadCase(gpu, config, spec, data, 0, T1).inputs,
    sizes.forward,
  );
  const firstRef = ref.fastWeightForward(config, uploadCase(ref, config, spec, data, 0, T1).inputs);
  const carryRef = await transferCarry(gpu, ref, first.carry);
  const g = uploadCase(gpu, config, spec, data, T1, spec.T, first.carry);
  const r = uploadCase(ref, config, spec, data, T1, spec.T, firstRef.carry);
  const fg = gpu.fastWeightForward(config, g.inputs, sizes.forward);
  const fr = ref.fastWeightForward(config, r.inputs);
  await expectClose(`${label} continued o`, gpu, fg.o, fr.o, FWD);
  // the carry the GPU produced drives the reference to the same result
  const fr2 = ref.fastWeightForward(config, uploadCase(ref, config, spec, data, T1, spec.T, carryRef).inputs);
  await expectClose(`${label} continued o (gpu carry)`, gpu, fg.o, fr2.o, FWD);
  // the whole run equals the two halves
  const whole = gpu.fastWeightForward(config, uploadCase(gpu, config, spec, data).inputs, sizes.forward);
  const w = await gpu.read(whole.o);
  const tail = await gpu.read(fg.o);
  const { B, T, H, dv } = spec;
  const expected: number[] = [];
  const got: number[] = [];
  for (let b = 0; b < B; b++) {
    for (let t = T1; t < T; t++) {
      for (let x = 0; x < H * dv; x++) {
        expected.push(w[(b * T + t) * H * dv + x]);
        got.push(tail[(b * (T - T1) + t - T1) * H * dv + x]);
      }
    }
  }
  assertRelL2(`${label} halves vs whole`, got, expected, FWD);
  const bg = gpu.fastWeightBackward(config, g.inputs, g.dO, sizes.backward);
  const br = ref.fastWeightBackward(config, r.inputs, r.dO);
  for (const name of GRAD_NAMES) {
    await expectClose(`${label} continued ${name}`, gpu, gradOf(bg, name), gradOf(br, name), GRAD);
  }
}

for (const rule of RULES) {
  gpuTest(
    `webgpu ${rule} matches the reference: packed starts, S0, carry, clamp (both alignments)`,
    async (gpu) => {
      for (const sizes of SIZES) {
        const { shape } = sizes;
        for (const alignment of ALIGNMENTS) {
          const config = ruleConfig(rule, { alignment });
          const label = `${rule}/${alignment} Dk=${shape.dk} Dv=${shape.dv}`;
          await compareCall(
            gpu,
            config,
            { ...shape, seed: 11, packed: true, s0: true },
            sizes,
            `${label} packed`,
          );
          await compareContinuation(
            gpu,
            config,
            { ...shape, seed: 12, packed: false, s0: true },
            sizes,
            `${label} carry`,
          );
          if (isFalconRule(rule)) {
            const spec = { ...shape, seed: 13, packed: true, lambdaScale: 60, betaLo: 1.3 };
            // the clamp binds at every step that writes (all value columns), per the reference trace
            const trace = recurrentTrace(config, headOf(config, spec, randomCase(config, spec), 0, 0));
            let writes = 0;
            for (let i = 0; i < trace.eta.length; i++) if (trace.eta[i] !== 0) writes++;
            if (writes === 0 || trace.clamped !== writes) {
              throw new Error(
                `${label}: clamp binds at ${trace.clamped} of ${writes} writing (step, column) entries`,
              );
            }
            await compareCall(gpu, config, spec, sizes, `${label} clamped`);
          }
        }
      }
    },
  );
}
