/**
 * The WebGPU kernels of every rule and alignment (recurrent; at `FALCON_TEST_LEVEL=full` also the
 * chunk-parallel kernels where `form: "chunk"` routes to them) against the float64 test vectors of
 * `fixtures/vectors/` (one head batched as `[1, T, 1, D]`): outputs and final state to relative
 * L2 1e-5, gradients of `sum(o * G)` to 1e-4. The forms take the small chunk size
 * (`src/testing/shapes.ts`; the recurrent backward's checkpoint interval), as does the webgpu run of
 * `cli/commands/verify_test.ts`: the same recurrent pipelines, compiled once per run on a software
 * adapter. The chunk kernels at the vectors' sizes (`H = 1, Dk = 8, Dv = 6`) would be another minute
 * of compiling there, so the small level leaves them to the parity tests at the shared small sizes.
 */

import { type Form, ruleConfig, type RuleName } from "../src/rules/config.ts";
import { usesChunkKernels } from "./fast_weight.ts";
import { assertRelL2 } from "../src/testing/compare.ts";
import { gpuTest } from "./_test_util.ts";
import { SMALL_CHUNK } from "../src/testing/shapes.ts";
import { testLevelFromEnv } from "../src/testing/level.ts";

const FULL = testLevelFromEnv() === "full";

interface Vector {
  rule: RuleName;
  alignment: "prefix" | "same-step";
  shape: { T: number; d_k: number; d_v: number };
  params: {
    eps?: number;
    eps_gamma?: number;
    eps_rms?: number;
    coupling?: boolean;
    qk_norm: "rms" | "l2" | "none";
    B?: number;
    retnet_head?: number;
    mamba_A?: number;
  };
  inputs: Record<string, number[] | number[][] | boolean[]>;
  outputs: { o: number[][]; S_final: number[][] };
  grads: Record<string, number[] | number[][]>;
}

const DIR = new URL("../fixtures/vectors/", import.meta.url);
const index: { file: string }[] = JSON.parse(Deno.readTextFileSync(new URL("index.json", DIR)));
const flat = (x: unknown): number[] => (x as number[][]).flat(2).map(Number);

for (const { file } of index) {
  const vec: Vector = JSON.parse(Deno.readTextFileSync(new URL(file, DIR)));
  const { T, d_k: dk, d_v: dv } = vec.shape;
  const p = vec.params;
  gpuTest(
    `webgpu kernels match vector ${file}: recurrent${
      FULL ? `, and chunk C=${SMALL_CHUNK} where routed` : ""
    } (forward, state, gradients)`,
    async (gpu) => {
      const config = ruleConfig(vec.rule, {
        alignment: vec.alignment,
        qkNorm: p.qk_norm,
        ...(p.coupling !== undefined ? { coupling: p.coupling } : {}),
        ...(p.B !== undefined ? { window: p.B } : {}),
        ...(p.eps !== undefined ? { eps: p.eps } : {}),
        ...(p.eps_gamma !== undefined ? { epsGamma: p.eps_gamma } : {}),
        ...(p.eps_rms !== undefined ? { epsRms: p.eps_rms } : {}),
        ...(p.mamba_A !== undefined ? { mambaA: [p.mamba_A] } : {}),
        ...(p.retnet_head !== undefined ? { retnetHeads: [p.retnet_head] } : {}),
      });
      const perColumn = vec.rule === "falcon2" || vec.rule === "falcon2a";
      const inputs = {
        q: gpu.fromArray(flat(vec.inputs.q), [1, T, 1, dk]),
        k: gpu.fromArray(flat(vec.inputs.k), [1, T, 1, dk]),
        v: gpu.fromArray(flat(vec.inputs.v), [1, T, 1, dv]),
        beta: gpu.fromArray(flat(vec.inputs.beta), perColumn ? [1, T, 1, dv] : [1, T, 1]),
        lambdabar: gpu.fromArray(flat(vec.inputs.lambdabar), [1, T, 1]),
        s0: vec.inputs.S0 ? gpu.fromArray(flat(vec.inputs.S0), [1, 1, dk, dv]) : undefined,
        starts: vec.inputs.starts ? Uint8Array.from(vec.inputs.starts as boolean[], Number) : undefined,
      };
      const forms: Form[] = FULL && usesChunkKernels(config, { form: "chunk" })
        ? ["recurrent", "chunk"]
        : ["recurrent"];
      for (const form of forms) {
        const options = { form, chunkSize: SMALL_CHUNK };
        const fwd = gpu.fastWeightForward(config, inputs, options);
        assertRelL2(`${file} ${form} o`, await gpu.read(fwd.o), flat(vec.outputs.o), 1e-5);
        assertRelL2(
          `${file} ${form} S_final`,
          await gpu.read(fwd.carry.state),
          flat(vec.outputs.S_final),
          1e-5,
        );
        const G = gpu.fromArray(flat(vec.inputs.G), [1, T, 1, dv]);
        const grads = gpu.fastWeightBackward(config, inputs, G, options);
        const pairs = [
          ["dq", "q"],
          ["dk", "k"],
          ["dv", "v"],
          ["dbeta", "beta"],
          ["dlambdabar", "lambdabar"],
          [
            "ds0",
            "S0",
          ],
        ] as const;
        for (const [mine, theirs] of pairs) {
          const expected = flat(vec.grads[theirs]);
          const got = await gpu.read(grads[mine]);
          if (expected.every((x) => x === 0)) {
            // inputs a rule does not use have zero gradient
            assertRelL2(
              `${file} ${form} ${mine} (zero)`,
              got.map((x) => x + 1),
              expected.map((x) => x + 1),
              1e-6,
            );
          } else assertRelL2(`${file} ${form} ${mine}`, got, expected, 1e-4);
        }
      }
    },
  );
}
