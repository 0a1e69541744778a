import assert from "node:assert/strict";
import { loadCheckpoint } from "../checkpoint/checkpoint.ts";
import { modelConfig } from "../model/config.ts";
import { createModel } from "../model/falcon_lm.ts";
import type { LanguageModel } from "../model/types.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { additionConfig } from "../tasks/addition.ts";
import { trainConfig } from "./config.ts";
import { DEVICE_STEP_LAG } from "./train_step.ts";
import { CHECKPOINT_FILE, train, TrainingDivergedError, type TrainSetup } from "./trainer.ts";
import { withTempDir } from "../testing/temp_dir.ts";

const MODEL = modelConfig({ vocabSize: 14, dModel: 16, heads: 2, layers: 1, ffnHidden: 16, chunkSize: 4 });

function setup(runDir: string, extra: Partial<TrainSetup> = {}): TrainSetup {
  return {
    backend: createRefBackend(),
    model: MODEL,
    task: additionConfig({ maxDigits: 3 }),
    // clipNorm 0.5: the clipping factor is below 1 on most steps, so the device's factor is exercised
    // steps > 3 + DEVICE_STEP_LAG: the run interrupted at step 3 (below) still has steps left to resume
    train: trainConfig({
      steps: 14,
      batchSize: 2,
      seqLen: 16,
      lr: 0.01,
      warmupSteps: 2,
      seed: 4,
      clipNorm: 0.5,
    }),
    runDir,
    ...extra,
  };
}

Deno.test("the device step (clipping on the backend, settled late) trains as the host step does, and resumes bit for bit", async () => {
  await withTempDir(async (dir) => {
    const host = await train(setup(`${dir}/host`, { stepStrategy: "host" }));
    const device = await train(setup(`${dir}/device`, { stepStrategy: "device" }));
    assert.equal(device.losses.length, 14);
    // the same float64 loss sums; the updates differ only by the rounding of (1/w) * clip vs clip / w
    assert.equal(device.losses[0], host.losses[0]);
    device.losses.forEach((l, i) =>
      assert.ok(
        Math.abs(l - host.losses[i]) <= 1e-9 * Math.abs(host.losses[i]),
        `step ${i + 1}: ${l} vs ${host.losses[i]}`,
      )
    );
    const controller = new AbortController();
    const first = await train(setup(`${dir}/part`, {
      stepStrategy: "device",
      signal: controller.signal,
      onProgress: (p) => p.event === "step" && p.step === 3 && controller.abort(),
    }));
    // the steps recorded behind step 3 when it settled are finished before the checkpoint
    assert.equal(first.status, "interrupted");
    assert.equal(first.step, 3 + DEVICE_STEP_LAG);
    const rest = await train(setup(`${dir}/part`, {
      stepStrategy: "device",
      resumeFrom: await loadCheckpoint(first.checkpointPath),
    }));
    assert.deepEqual([...first.losses, ...rest.losses], device.losses);
  });
});

Deno.test("the device step stops at the first non-finite loss; the steps queued behind it change nothing", async () => {
  await withTempDir(async (dir) => {
    let model: LanguageModel | null = null;
    let calls = 0;
    const s = setup(dir, {
      stepStrategy: "device",
      train: trainConfig({
        steps: 12,
        batchSize: 2,
        seqLen: 16,
        lr: 0.01,
        warmupSteps: 2,
        checkpointEvery: 4,
      }),
      createModel: (backend, config, seed) => {
        const real = createModel(backend, config, seed);
        const wrapped: LanguageModel = {
          config: real.config,
          backend,
          parameters: () => real.parameters(),
          forwardBackward: (batch) => real.forwardBackward(batch),
          logits: (batch) => real.logits(batch),
          recordForwardBackward(batch) {
            const losses = real.recordForwardBackward(batch);
            if (++calls === 5) backend.fill(losses, NaN); // step 5's loss (and so its statistics) is NaN
            return losses;
          },
        };
        model = wrapped;
        return wrapped;
      },
    });
    await assert.rejects(() => train(s), (e: Error) => {
      assert.ok(e instanceof TrainingDivergedError);
      assert.equal(e.step, 5);
      assert.match(e.message, /diverged at step 5: loss is NaN/);
      return true;
    });
    // steps 6.. were recorded before step 5 settled: up to the lag, or to the checkpoint at step 8 (which
    // settles every step in flight first)
    assert.equal(calls, Math.min(5 + DEVICE_STEP_LAG, 8));
    const kept = await loadCheckpoint(`${dir}/${CHECKPOINT_FILE}`);
    assert.equal(kept.step, 4);
    // the parameters in memory are still those of step 4: step 5 and those behind it were refused on the device
    for (const p of model!.parameters()) {
      const now = await model!.backend.read(p.value);
      assert.deepEqual(Array.from(now), Array.from(kept.params[p.name].data), p.name);
    }
  });
});
