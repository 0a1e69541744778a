/**
 * Training throughput benchmark: tokens/s and peak memory of a preset's model on each backend,
 * training addition for a fixed number of steps (the first `--warmup` steps, which include shader
 * compilation and cache warm-up, are left out of `tokensPerSecond`, and so is the final checkpoint, timed as
 * `finalCheckpointSeconds`). Prints one JSON report; `--out FILE` also writes it.
 *
 * ```
 * deno run --allow-read --allow-write bench/train_bench.ts --backends wasm,webgpu --presets tiny,lab \
 *   --rule falcon1 --steps 40 --warmup 5 [--out FILE]
 * ```
 *
 * Imports nothing from npm, so it runs on a machine with no registry (the GPU machine).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { type BackendChoice, releaseBackend, selectBackend } from "../src/backend_select.ts";
import { modelConfig } from "../src/model/config.ts";
import type { MixerName } from "../src/model/types.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../src/tasks/mod.ts";
import { trainConfig } from "../src/train/config.ts";
import { preset } from "../src/train/presets.ts";
import { train } from "../src/train/trainer.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    backends: { type: "string", default: "wasm" },
    presets: { type: "string", default: "tiny,lab" },
    rule: { type: "string", default: "falcon1" },
    steps: { type: "string", default: "40" },
    warmup: { type: "string", default: "5" },
    out: { type: "string" },
  },
});

const steps = Number(values.steps);
const warmup = Number(values.warmup);
if (!Number.isInteger(steps) || !Number.isInteger(warmup) || steps <= warmup || warmup < 1) {
  throw new RangeError(`--steps (${values.steps}) must be an integer above --warmup (${values.warmup}) >= 1`);
}

const results = [];
for (const backendName of values.backends.split(",")) {
  const backend = await selectBackend(backendName as BackendChoice, { onNote: (n) => console.error(n) });
  for (const presetName of values.presets.split(",")) {
    const p = preset(presetName);
    const model = modelConfig({
      ...p.model,
      vocabSize: ADDITION_VOCAB_SIZE,
      mixer: values.rule as MixerName,
    });
    const task = additionConfig(p.addition);
    const runDir = await Deno.makeTempDir({ prefix: "falcon_train_bench_" });
    let warmupSeconds = 0;
    let lastStepSeconds = 0;
    const full = await train({
      backend,
      model,
      task,
      train: trainConfig({ ...p.train, steps, warmupSteps: 1, checkpointEvery: 0 }),
      runDir,
      onProgress: (progress) => {
        if (progress.event === "step" && progress.step === warmup) warmupSeconds = progress.elapsedSeconds;
        if (progress.event === "step" && progress.step === steps) lastStepSeconds = progress.elapsedSeconds;
      },
    });
    // steady state: the steps after the warm-up ones (which include shader compilation and caches),
    // up to the last step's end; the final checkpoint is timed on its own
    const tokensPerStep = p.train.batchSize! * p.train.seqLen!;
    const steadySeconds = lastStepSeconds - warmupSeconds;
    const result = {
      backend: backend.name,
      preset: presetName,
      rule: values.rule,
      parameters: full.parameterCount,
      batch: p.train.batchSize,
      seqLen: p.train.seqLen,
      steps,
      warmupSteps: warmup,
      tokensPerSecond: ((steps - warmup) * tokensPerStep) / steadySeconds,
      tokensPerSecondIncludingWarmup: full.tokensPerSecond,
      finalCheckpointSeconds: full.elapsedSeconds - lastStepSeconds,
      peakRssMiB: Math.round(full.peakRssBytes / 2 ** 20),
    };
    console.error(JSON.stringify(result));
    results.push(result);
    await Deno.remove(runDir, { recursive: true });
  }
  releaseBackend(backend);
}

const report = JSON.stringify({ date: new Date().toISOString(), deno: Deno.version.deno, results }, null, 2);
console.log(report);
if (values.out) await Deno.writeTextFile(values.out, report + "\n");
