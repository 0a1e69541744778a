/**
 * Where one WebGPU training step's time goes: host recording, GPU kernels (timestamps per pipeline)
 * and the wait for the step's reads. Builds a preset's model on the addition task, runs `--warmup`
 * steps (shader compilation), then times `--steps` steps split into recording (until the model and
 * optimizer calls return; `hostRecordMsPerStep` is that less the time inside `queue.submit`, which on a
 * software adapter runs the kernels; `hostRecordCpuMsPerStep` the same in CPU time of the recording
 * thread, with `--allow-ffi` on Linux) and waiting (until the loss and norm arrive), and profiles one more step's
 * kernels with GPU timestamps (each dispatch then gets a pass of its own, so the kernel sum is an upper
 * bound of what the same kernels take inside one pass). The steps cycle through `--batches` batches
 * (default 4; as many as the steps, as in training, give every step new data: new token ids, targets
 * and sequence starts to upload). Prints one JSON report; `--out FILE` writes it.
 *
 * ```
 * deno run --allow-read --allow-write bench/train_step_profile.ts --preset addition --rule falcon1 --out p.json
 * ```
 *
 * Imports nothing from npm (runs on the GPU machine).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { modelConfig } from "../src/model/config.ts";
import { createModel } from "../src/model/falcon_lm.ts";
import type { MixerName } from "../src/model/types.ts";
import { ADDITION_VOCAB_SIZE, additionConfig, createTask, packBatch } from "../src/tasks/mod.ts";
import { DataRng } from "../src/tasks/rng.ts";
import { trainConfig } from "../src/train/config.ts";
import { createTrainStep } from "../src/train/train_step.ts";
import { preset } from "../src/train/presets.ts";
import { createWebGpuBackend } from "../wgpu/backend.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    preset: { type: "string", default: "addition" },
    rule: { type: "string", default: "falcon1" },
    steps: { type: "string", default: "10" },
    warmup: { type: "string", default: "3" },
    batches: { type: "string", default: "4" },
    out: { type: "string" },
  },
});

const p = preset(values.preset);
const model = modelConfig({ ...p.model, vocabSize: ADDITION_VOCAB_SIZE, mixer: values.rule as MixerName });
const tc = trainConfig({ ...p.train, warmupSteps: 1, checkpointEvery: 0 });
const task = createTask(additionConfig(p.addition));
const gpu = await createWebGpuBackend({ timestamps: true });
// time spent inside queue.submit: on a software adapter (llvmpipe) a submit runs the kernels before it
// returns, so recording minus submitting is the host's own share (what a real GPU's host pays)
const queue = gpu.runtime.device.queue;
const submitOnce = queue.submit.bind(queue);
const threadCpu = threadCpuClock();
let submitMs = 0;
let submitCpuUs = 0;
let submits = 0;
queue.submit = (buffers: Iterable<GPUCommandBuffer>) => {
  const s0 = performance.now();
  const c0 = threadCpu?.() ?? 0;
  submitOnce(buffers);
  submitCpuUs += (threadCpu?.() ?? 0) - c0;
  submitMs += performance.now() - s0;
  submits++;
};

/**
 * Microseconds of CPU time of the calling thread (Linux `getrusage(RUSAGE_THREAD)` through FFI), or null
 * without FFI permission or elsewhere: on a shared machine, less noisy than wall-clock recording time.
 */
function threadCpuClock(): (() => number) | null {
  if (Deno.build.os !== "linux" || Deno.permissions.querySync({ name: "ffi" }).state !== "granted") {
    return null;
  }
  try {
    const libc = Deno.dlopen("libc.so.6", { getrusage: { parameters: ["i32", "buffer"], result: "i32" } });
    const usage = new BigInt64Array(18); // struct rusage: ru_utime, ru_stime (timeval), then longs
    return () => {
      libc.symbols.getrusage(1, usage); // RUSAGE_THREAD
      return Number(usage[0]) * 1e6 + Number(usage[1]) + Number(usage[2]) * 1e6 + Number(usage[3]);
    };
  } catch {
    return null;
  }
}
const lm = createModel(gpu, model, 1);
const step = createTrainStep(gpu, lm, tc);
const rng = new DataRng(7);
const batchCount = Number(values.batches);
if (!Number.isInteger(batchCount) || batchCount < 1) {
  throw new RangeError(`--batches must be a positive integer, got "${values.batches}"`);
}
const batches = Array.from(
  { length: batchCount },
  () => packBatch(() => task.sample(rng, "train"), tc.batchSize, tc.seqLen, task.padId),
);

const warmup = Number(values.warmup);
const steps = Number(values.steps);
for (let s = 1; s <= warmup; s++) await step.run(batches[s % batches.length], s, 1e-3).outcome();
await gpu.sync();

let recordMs = 0;
let recordSubmitMs = 0;
let recordCpuUs = 0;
let recordSubmitCpuUs = 0;
const submitsBefore = submits;
const t0 = performance.now();
const pending = [];
for (let s = 1; s <= steps; s++) {
  const r0 = performance.now();
  const s0 = submitMs;
  const c0 = threadCpu?.() ?? 0;
  const sc0 = submitCpuUs;
  const handle = step.run(batches[(warmup + s) % batches.length], warmup + s, 1e-3);
  recordMs += performance.now() - r0;
  recordSubmitMs += submitMs - s0;
  recordCpuUs += (threadCpu?.() ?? 0) - c0;
  recordSubmitCpuUs += submitCpuUs - sc0;
  pending.push(handle);
  if (pending.length > step.lag) await pending.shift()!.outcome();
}
await Promise.all(pending.map((p) => p.outcome()));
const wallMs = performance.now() - t0;
const submitsPerStep = (submits - submitsBefore) / steps;

gpu.runtime.startProfile(2048);
await step.run(batches[0], warmup + steps + 1, 1e-3).outcome();
const profile = await gpu.runtime.stopProfile();
const tokens = tc.batchSize * tc.seqLen;
const report = {
  date: new Date().toISOString(),
  adapter: gpu.adapterInfo,
  preset: values.preset,
  rule: values.rule,
  batch: tc.batchSize,
  seqLen: tc.seqLen,
  batches: batchCount,
  stepMs: wallMs / steps,
  recordMsPerStep: recordMs / steps,
  recordSubmitMsPerStep: recordSubmitMs / steps,
  hostRecordMsPerStep: (recordMs - recordSubmitMs) / steps,
  hostRecordCpuMsPerStep: threadCpu ? (recordCpuUs - recordSubmitCpuUs) / steps / 1000 : null,
  submitsPerStep,
  tokensPerSecond: (tokens * steps) / (wallMs / 1000),
  kernelMsPerStep: profile.reduce((a, e) => a + e.ns, 0) / 1e6,
  spanMsPerStep: profile.spanNs / 1e6,
  dispatchesPerStep: profile.reduce((a, e) => a + e.dispatches, 0),
  kernels: profile.slice(0, 40).map((e) => ({ label: e.label, ms: e.ns / 1e6, dispatches: e.dispatches })),
};
const text = JSON.stringify(report, null, 2);
console.log(text);
if (values.out) await Deno.writeTextFile(values.out, text + "\n");
gpu.destroy();
