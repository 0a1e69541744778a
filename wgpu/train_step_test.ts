/**
 * The trainer's device step on the WebGPU backend: the host records the next steps before it waits
 * for a step's loss, and a step costs one batched read and no queue sync.
 */

import assert from "node:assert/strict";
import { modelConfig } from "../src/model/config.ts";
import { createModel } from "../src/model/falcon_lm.ts";
import type { LanguageModel } from "../src/model/types.ts";
import { additionConfig } from "../src/tasks/addition.ts";
import { trainConfig } from "../src/train/config.ts";
import { DEVICE_STEP_LAG } from "../src/train/train_step.ts";
import { train } from "../src/train/trainer.ts";
import { gpuTest } from "./_test_util.ts";

gpuTest("a 10-step WebGPU training run never waits for the device between steps", async (gpu) => {
  const runDir = await Deno.makeTempDir({ prefix: "falcon_gpu_step_" });
  try {
    let recordedSteps = 0;
    const recordedWhenSettled: number[] = [];
    const before = { ...gpu.runtime.waits };
    const result = await train({
      backend: gpu,
      model: modelConfig({ vocabSize: 14, dModel: 8, heads: 2, layers: 1, ffnHidden: 8, chunkSize: 4 }),
      task: additionConfig({ maxDigits: 2 }),
      train: trainConfig({
        steps: 10,
        batchSize: 2,
        seqLen: 16,
        lr: 0.01,
        warmupSteps: 2,
        checkpointEvery: 0,
      }),
      runDir,
      createModel: (backend, config, seed) => {
        const real = createModel(backend, config, seed, { form: "recurrent" });
        const counted: LanguageModel = {
          config: real.config,
          backend,
          parameters: () => real.parameters(),
          forwardBackward: (batch) => real.forwardBackward(batch),
          logits: (batch) => real.logits(batch),
          recordForwardBackward(batch) {
            recordedSteps++;
            return real.recordForwardBackward(batch);
          },
        };
        return counted;
      },
      onProgress: (p) => p.event === "step" && recordedWhenSettled.push(recordedSteps),
    });
    assert.equal(result.status, "completed");
    assert.equal(result.losses.length, 10);
    assert.ok(result.losses.every(Number.isFinite), `losses ${result.losses}`);
    // step k settled only after steps k+1 .. k+lag were recorded (the last ones at the end of the run)
    assert.deepEqual(
      recordedWhenSettled,
      Array.from({ length: 10 }, (_, i) => Math.min(10, i + 1 + DEVICE_STEP_LAG)),
    );
    const maps = gpu.runtime.waits.maps - before.maps;
    const syncs = gpu.runtime.waits.syncs - before.syncs;
    assert.equal(syncs, 0, "the trainer synced the queue");
    // one batched read (loss, statistics, halt flag) per lag + 1 steps and one for the final checkpoint
    const most = Math.ceil(10 / (DEVICE_STEP_LAG + 1)) + 1;
    assert.ok(
      maps >= 2 && maps <= most,
      `expected 2..${most} device round trips for 10 steps and a checkpoint, got ${maps}`,
    );
  } finally {
    await Deno.remove(runDir, { recursive: true });
  }
});
