/**
 * A chunk forward that keeps its workspaces for the backward (`keepForBackward`, `kept_forward.ts`) gives
 * the outputs of a plain forward, and the backward given them (`saved`, which skips the recompute of the
 * forward) gives exactly the gradients of a backward that recomputes: every chunk rule, packed starts, S0
 * and a carry in; whole and in batch slices. A saved forward serves one backward of the same call only.
 */

import {
  type BackwardOptions,
  type FastWeightGrads,
  type ForwardOptions,
  gradOf,
  type Tensor,
} from "../src/rules/backend.ts";
import { type RuleConfig, ruleConfig } from "../src/rules/config.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";
import { type CaseSpec, CHUNK_RULES, randomCase, uploadCase } from "./_fast_weight_case.ts";
import type { WebGpuBackend } from "./backend.ts";
import { chunkWorkspaceBytes } from "./fast_weight_chunk.ts";
import { createFastWeightOps } from "./fast_weight.ts";
import { expectIdentical, gpuTest } from "./_test_util.ts";

// the shared small sizes (the chunk pipelines the other small tests compile)
const C = SMALL_CHUNK;
const SPEC: CaseSpec = { B: 3, T: 11, ...SMALL_HEADS, seed: 91, packed: true, s0: true };
const SPLIT = 5;
const FORM = { form: "chunk", chunkSize: C } as const;
const GRADS = ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const;

function expectSame(gpu: WebGpuBackend, x: Tensor, y: Tensor, name: string) {
  return expectIdentical(gpu, x, y, name, ["with the kept forward", "recomputed"]);
}

/** Positions `[SPLIT, T)` of a problem, entering with the carry of `[0, SPLIT)`, on `gpu`. */
function secondHalf(gpu: WebGpuBackend, config: RuleConfig) {
  const data = randomCase(config, SPEC);
  const first = gpu.fastWeightForward(config, uploadCase(gpu, config, SPEC, data, 0, SPLIT).inputs, FORM);
  return uploadCase(gpu, config, SPEC, data, SPLIT, SPEC.T, first.carry);
}

/** `ops` (default: the backend's) forward with and without keeping, backward with and without `saved`: identical. */
async function compareKept(
  gpu: WebGpuBackend,
  config: RuleConfig,
  ops: Pick<WebGpuBackend, "fastWeightForward" | "fastWeightBackward"> = gpu,
) {
  const label = config.rule;
  const { inputs, dO } = secondHalf(gpu, config);
  const plain = gpu.fastWeightForward(config, inputs, FORM);
  const keep: ForwardOptions = { ...FORM, keepForBackward: true };
  const kept = ops.fastWeightForward(config, inputs, keep);
  if (!kept.saved) throw new Error(`${label}: a chunk forward with keepForBackward returned nothing saved`);
  await expectSame(gpu, kept.o, plain.o, `${label} o`);
  await expectSame(gpu, kept.carry.state, plain.carry.state, `${label} carry.state`);
  // the saved backward first: a workspace the recomputing backward released could hold the same states
  const fromSaved: FastWeightGrads = ops.fastWeightBackward(config, inputs, dO, {
    ...FORM,
    saved: kept.saved,
  });
  const recomputed = gpu.fastWeightBackward(config, inputs, dO, FORM);
  for (const k of GRADS) await expectSame(gpu, gradOf(fromSaved, k), gradOf(recomputed, k), `${label} ${k}`);
}

gpuTest(
  "a backward given the kept forward matches the recomputing backward exactly, every chunk rule",
  async (gpu) => {
    for (const rule of CHUNK_RULES) await compareKept(gpu, ruleConfig(rule));
  },
);

gpuTest(
  "a kept forward in batch slices serves the sliced backward, exactly as the whole recomputing call",
  async (gpu) => {
    for (const rule of ["falcon1", "falcon3", "falcon2a", "falcon1a"] as const) {
      const config = ruleConfig(rule);
      // backward workspaces of 2 rows at once: slices 2 + 1 of B = 3 (the kept forward slices as the backward)
      const limit = 2 * chunkWorkspaceBytes(config, { ...SPEC, B: 1, T: SPEC.T - SPLIT }, C, true);
      await compareKept(gpu, config, createFastWeightOps(gpu.runtime, { maxChunkWorkspaceBytes: limit }));
    }
  },
);

/** The error `fn` throws (a failure if it returns). */
function thrown(fn: () => unknown, what: string): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error(`${what}: expected an error`);
}

gpuTest("a saved forward serves one backward of its own call; others are errors naming why", (gpu) => {
  const config = ruleConfig("falcon1");
  const { inputs, dO } = secondHalf(gpu, config);
  const keep: ForwardOptions = { ...FORM, keepForBackward: true };
  const backward = (options: BackwardOptions) => gpu.fastWeightBackward(config, inputs, dO, options);

  const once = gpu.fastWeightForward(config, inputs, keep).saved;
  backward({ ...FORM, saved: once });
  const again = thrown(() => backward({ ...FORM, saved: once }), "second use");
  if (!again.message.includes("already used")) throw new Error(`second use: "${again.message}"`);

  const other = uploadCase(gpu, config, SPEC, randomCase(config, { ...SPEC, seed: 5 }), SPLIT, SPEC.T);
  const foreign = gpu.fastWeightForward(config, other.inputs, keep).saved;
  const wrongInputs = thrown(() => backward({ ...FORM, saved: foreign }), "other inputs");
  if (!(wrongInputs instanceof RangeError) || !wrongInputs.message.includes("other inputs")) {
    throw new Error(`other inputs: "${wrongInputs.message}"`);
  }

  const sized = gpu.fastWeightForward(config, inputs, keep).saved;
  const wrongSize = thrown(() => backward({ form: "chunk", chunkSize: C + 1, saved: sized }), "chunk size");
  if (!(wrongSize instanceof RangeError) || !wrongSize.message.includes(`chunkSize = ${C}`)) {
    throw new Error(`chunk size: "${wrongSize.message}"`);
  }

  const notOurs = thrown(() => backward({ ...FORM, saved: { dispose() {} } }), "foreign object");
  if (!(notOurs instanceof TypeError)) throw new Error(`foreign object: "${notOurs.message}"`);

  const recurrent = gpu.fastWeightForward(config, inputs, { form: "recurrent", keepForBackward: true });
  if (recurrent.saved) throw new Error("the recurrent form keeps nothing, yet returned a saved forward");
  return Promise.resolve();
});
