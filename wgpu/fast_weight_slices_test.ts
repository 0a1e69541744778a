/**
 * Batch slicing (`fast_weight_slices.ts`): fast-weight ops whose chunk workspace limit holds fewer batch
 * rows than a call has runs the call in slices, and gives exactly what the unsliced backend gives
 * (every output, carry field and gradient, bit for bit: rows are independent and each slice runs
 * the same kernels), with packed starts, S0, a carry in and uneven slices.
 */

import { type FormOptions, gradOf, type Tensor } from "../src/rules/backend.ts";
import { type RuleConfig, ruleConfig } from "../src/rules/config.ts";
import { type CaseSpec, randomCase, uploadCase } from "./_fast_weight_case.ts";
import type { WebGpuBackend } from "./backend.ts";
import { createFastWeightOps } from "./fast_weight.ts";
import { batchSlices } from "./fast_weight_slices.ts";
import { chunkWorkspaceBytes } from "./fast_weight_chunk.ts";
import { expectIdentical, gpuTest } from "./_test_util.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";

Deno.test("batchSlices covers B rows in order, the last slice holding the rest", () => {
  const got = JSON.stringify(batchSlices(5, 2));
  const want = JSON.stringify([{ b0: 0, n: 2 }, { b0: 2, n: 2 }, { b0: 4, n: 1 }]);
  if (got !== want) throw new Error(`batchSlices(5, 2) = ${got}, expected ${want}`);
  if (batchSlices(3, 8).length !== 1) throw new Error("rows >= B must give one slice");
  let threw = false;
  try {
    batchSlices(3, 0);
  } catch (e) {
    threw = e instanceof RangeError;
  }
  if (!threw) throw new Error("rows = 0 must be a RangeError");
});

function expectSame(gpu: WebGpuBackend, x: Tensor, y: Tensor, name: string) {
  return expectIdentical(gpu, x, y, name, ["sliced", "whole"]);
}

/** Bytes of one batch row's chunk workspace for the positions `[from, to)` of `spec`. */
function rowBytes(config: RuleConfig, spec: CaseSpec, from: number, to: number, backward: boolean): number {
  return chunkWorkspaceBytes(config, { ...spec, B: 1, T: to - from }, C, backward);
}

// the shared small sizes (the chunk pipelines the other small tests compile)
const C = SMALL_CHUNK;
const SPEC: CaseSpec = { B: 3, T: 11, ...SMALL_HEADS, seed: 77, packed: true, s0: true };
const SPLIT = 5;

/**
 * On `whole` and on a backend limited to `limit` bytes: positions `[0, SPLIT)`, then `[SPLIT, T)` from
 * each one's own carry, forward (and, when `backward`, backward); every result must be identical.
 */
async function compareSliced(whole: WebGpuBackend, config: RuleConfig, limit: number, backward: boolean) {
  const label = `${config.rule} (limit ${limit} bytes)`;
  const opts: FormOptions = { form: "chunk", chunkSize: C };
  const data = randomCase(config, SPEC);
  // the same device with a lower workspace limit (no second device: fewer native resources at exit)
  const sliced = createFastWeightOps(whole.runtime, { maxChunkWorkspaceBytes: limit });
  const carries = [whole, sliced].map((ops) =>
    ops.fastWeightForward(config, uploadCase(whole, config, SPEC, data, 0, SPLIT).inputs, opts).carry
  );
  for (const k of ["state", "lastKey", "windowX", "windowY"] as const) {
    await expectSame(whole, carries[1][k], carries[0][k], `${label} first carry.${k}`);
  }
  if (carries[1].windowCount.join() !== carries[0].windowCount.join()) {
    throw new Error(`${label}: windowCount ${carries[1].windowCount} vs ${carries[0].windowCount}`);
  }
  const w = uploadCase(whole, config, SPEC, data, SPLIT, SPEC.T, carries[0]);
  const s = uploadCase(whole, config, SPEC, data, SPLIT, SPEC.T, carries[1]);
  const fw = whole.fastWeightForward(config, w.inputs, opts);
  const fs = sliced.fastWeightForward(config, s.inputs, opts);
  await expectSame(whole, fs.o, fw.o, `${label} o`);
  await expectSame(whole, fs.carry.state, fw.carry.state, `${label} carry.state`);
  await expectSame(whole, fs.carry.windowX, fw.carry.windowX, `${label} carry.windowX`);
  if (!backward) return;
  const gw = whole.fastWeightBackward(config, w.inputs, w.dO, opts);
  const gs = sliced.fastWeightBackward(config, s.inputs, s.dO, opts);
  for (const k of ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const) {
    await expectSame(whole, gradOf(gs, k), gradOf(gw, k), `${label} ${k}`);
  }
}

gpuTest(
  "webgpu chunk calls above the workspace limit run in batch slices and match the unsliced call exactly",
  async (whole) => {
    for (const rule of ["falcon3", "falcon1", "falcon2a"] as const) {
      const config = ruleConfig(rule);
      // forward calls of 2 rows at once (slices 2 + 1 of B = 3), both calls
      const fwd = 2 *
        Math.max(rowBytes(config, SPEC, 0, SPLIT, false), rowBytes(config, SPEC, SPLIT, SPEC.T, false));
      if (Math.floor(fwd / rowBytes(config, SPEC, 0, SPLIT, false)) >= SPEC.B) {
        throw new Error(`${rule}: the forward limit does not slice B = ${SPEC.B}`);
      }
      await compareSliced(whole, config, fwd, false);
      // backward calls of 2 rows at once
      const bwd = 2 * rowBytes(config, SPEC, SPLIT, SPEC.T, true);
      await compareSliced(whole, config, bwd, true);
    }
  },
);

gpuTest("a sliced backward names the call's shapes when dO does not match", (whole) => {
  const config = ruleConfig("falcon1");
  const data = randomCase(config, SPEC);
  const ops = createFastWeightOps(whole.runtime, {
    maxChunkWorkspaceBytes: rowBytes(config, SPEC, 0, SPEC.T, true),
  });
  const { inputs } = uploadCase(whole, config, SPEC, data, 0, SPEC.T);
  const bad = whole.zeros([SPEC.B, SPEC.T, SPEC.H, SPEC.dv + 1]);
  let message = "";
  try {
    ops.fastWeightBackward(config, inputs, bad, { form: "chunk", chunkSize: C });
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  const want = `expected [${SPEC.B},${SPEC.T},${SPEC.H},${SPEC.dv}]`;
  if (!message.includes(want)) throw new Error(`expected a RangeError with "${want}", got "${message}"`);
  return Promise.resolve();
});

gpuTest("maxChunkWorkspaceBytes above the binding limit is a RangeError naming it", (gpu) => {
  const binding = gpu.runtime.device.limits.maxStorageBufferBindingSize;
  let message = "";
  try {
    createFastWeightOps(gpu.runtime, { maxChunkWorkspaceBytes: binding * 2 });
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  if (!message.includes("maxChunkWorkspaceBytes") || !message.includes(String(binding * 2))) {
    throw new Error(`expected a RangeError naming maxChunkWorkspaceBytes and the value, got "${message}"`);
  }
  return Promise.resolve();
});
