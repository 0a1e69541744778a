/**
 * The WebGPU kernels of every rule and alignment (recurrent; at `FALCON_TEST_LEVEL=full` also the
 * chunk-parallel kernels where `form: "chunk"` routes to them) against the float64 test vectors of
 * `fixtures/vectors/` (one head batched as `[1, T, 1, D]`, loaded by `src/vectors/load.ts`): outputs
 * and final state to relative L2 1e-5, gradients of `sum(o * G)` to 1e-4. The forms take the small
 * chunk size (`src/testing/shapes.ts`; the recurrent backward's checkpoint interval), as does the webgpu
 * run of `cli/commands/verify_test.ts`: the same recurrent pipelines, compiled once per run on a
 * software adapter. The chunk kernels at the vectors' sizes (`H = 1, Dk = 8, Dv = 6`) would be another
 * minute of compiling there, so the small level leaves them to the parity tests at the shared small sizes.
 */

import type { Form } from "../src/rules/config.ts";
import { assertMatchesVector, fixtureVectors } from "../src/testing/vector_fixtures.ts";
import { usesChunkKernels } from "./fast_weight.ts";
import { gpuTest } from "./_test_util.ts";
import { SMALL_CHUNK } from "../src/testing/shapes.ts";
import { testLevelFromEnv } from "../src/testing/level.ts";

const FULL = testLevelFromEnv() === "full";

// every catalog rule x alignment; a rule without its vector files fails here, naming the rule
for (const vector of fixtureVectors()) {
  gpuTest(
    `webgpu kernels match vector ${vector.name}: recurrent${
      FULL ? `, and chunk C=${SMALL_CHUNK} where routed` : ""
    } (forward, state, gradients)`,
    async (gpu) => {
      const forms: Form[] = FULL && usesChunkKernels(vector.config, { form: "chunk" })
        ? ["recurrent", "chunk"]
        : ["recurrent"];
      for (const form of forms) {
        // inputs a rule does not use have zero gradient (to 1e-6 relative to one)
        await assertMatchesVector(gpu, vector, { form, chunkSize: SMALL_CHUNK }, form, { zeros: "near" });
      }
    },
  );
}
