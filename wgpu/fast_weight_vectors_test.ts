/**
 * The WebGPU kernels of every rule and alignment (recurrent, and the chunk-parallel kernels where
 * `form: "chunk"` routes to them) against the float64 test vectors of
 * `fixtures/vectors/` (one head batched as `[1, T, 1, D]`, loaded by `src/vectors/load.ts`): outputs
 * and final state to relative L2 1e-5, gradients of `sum(o * G)` to 1e-4.
 */

import type { Form } from "../src/rules/config.ts";
import { assertMatchesVector, fixtureVectors } from "../src/testing/vector_fixtures.ts";
import { usesChunkKernels } from "./fast_weight.ts";
import { gpuTest } from "./_test_util.ts";

// every catalog rule x alignment; a rule without its vector files fails here, naming the rule
for (const vector of fixtureVectors()) {
  gpuTest(
    `webgpu kernels match vector ${vector.name}: recurrent, and chunk C=4 where routed (forward, state, gradients)`,
    async (gpu) => {
      const forms: Form[] = usesChunkKernels(vector.config, { form: "chunk" })
        ? ["recurrent", "chunk"]
        : ["recurrent"];
      for (const form of forms) {
        // inputs a rule does not use have zero gradient (to 1e-6 relative to one)
        await assertMatchesVector(gpu, vector, { form, chunkSize: 4 }, form, { zeros: "near" });
      }
    },
  );
}
