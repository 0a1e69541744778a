/**
 * Training throughput benchmark: tokens/s and peak memory of a preset's model on each backend,
 * training addition for a fixed number of steps (the first `--warmup` steps, which include shader
 * compilation and cache warm-up, are left out of `tokensPerSecond`, and so is the final checkpoint, timed as
 * `finalCheckpointSeconds`). Prints one JSON report; `--out FILE` also writes it.
 *
 * `--profile` adds a `breakdown` to each result: the steady steps' time per Backend op (host time
 * inside each call, src/testing/profiled_backend.ts; `source` says so, and a breakdown from another
 * source, such as GPU timestamps, can sit beside it under its own `source`), per op and per shape of
 * the products and fast-weight calls, with the FLOPs counted from the shapes, the step time the ops do
 * not account for (batch packing, the metrics log, JS between calls), and the CPU time of each op and
 * of the whole step (all threads), which a shared machine disturbs less than wall time. It also times
 * a 1024^3 GEMM on the same backend and threads right after the run (`gemmReference`) and gives the
 * GEMM-bound rate (`gemmBound`: the step's product FLOPs at that rate, all else free).
 * `--threads N` sets the WASM backend's threads (default: every core).
 *
 * ```
 * deno run --allow-read --allow-write bench/train_bench.ts --backends wasm,webgpu --presets tiny,lab \
 *   --rule falcon1 --steps 40 --warmup 5 [--profile] [--threads N] [--out FILE]
 * ```
 *
 * Imports nothing from npm, so it runs on a machine with no registry (the GPU machine).
 *
 * @module
 */

import { parseArgs } from "node:util";
import type { Backend } from "../src/rules/backend.ts";
import { Rng } from "../src/testing/compare.ts";
import { type BackendChoice, releaseBackend, selectBackend } from "../backend_select.ts";
import { modelConfig } from "../src/model/config.ts";
import type { MixerName } from "../src/model/types.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../src/tasks/mod.ts";
import { trainConfig } from "../src/train/config.ts";
import { preset } from "../src/train/presets.ts";
import { train } from "../src/train/trainer.ts";
import {
  BackendProfiler,
  type OpTotals,
  processCpuMs,
  type ProfileSnapshot,
} from "../src/testing/profiled_backend.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    backends: { type: "string", default: "wasm" },
    presets: { type: "string", default: "tiny,lab" },
    rule: { type: "string", default: "falcon1" },
    steps: { type: "string", default: "40" },
    warmup: { type: "string", default: "5" },
    out: { type: "string" },
    profile: { type: "boolean", default: false },
    threads: { type: "string" },
  },
});

const steps = Number(values.steps);
const warmup = Number(values.warmup);
if (!Number.isInteger(steps) || !Number.isInteger(warmup) || steps <= warmup || warmup < 1) {
  throw new RangeError(`--steps (${values.steps}) must be an integer above --warmup (${values.warmup}) >= 1`);
}

/** One op's share of a steady step. */
function perStep(totals: OpTotals, steps: number, stepMs: number) {
  return {
    msPerStep: totals.ms / steps,
    share: totals.ms / steps / stepMs,
    cpuMsPerStep: totals.cpuMs / steps,
    callsPerStep: totals.calls / steps,
    gflopPerStep: totals.flops / steps / 1e9,
  };
}

/** The `breakdown` of a result: the profiler's totals over `steps` steady steps of `stepMs` each. */
function breakdown(profile: ProfileSnapshot, steps: number, stepMs: number, stepCpuMs: number) {
  const table = (t: Record<string, OpTotals>) =>
    Object.fromEntries(Object.entries(t).map(([k, v]) => [k, perStep(v, steps, stepMs)]));
  const opsMs = Object.values(profile.ops).reduce((n, t) => n + t.ms, 0) / steps;
  const flops = Object.values(profile.ops).reduce((n, t) => n + t.flops, 0) / steps;
  const matmulFlops = (profile.ops.matmul?.flops ?? 0) / steps;
  return {
    source: "host time inside each Backend call (src/testing/profiled_backend.ts)",
    steps,
    stepMs,
    stepCpuMs,
    opsMsPerStep: opsMs,
    outsideOpsMsPerStep: stepMs - opsMs,
    gflopPerStep: flops / 1e9,
    matmulGflopPerStep: matmulFlops / 1e9,
    ops: table(profile.ops),
    shapes: table(profile.shapes),
  };
}

/**
 * The GEMM rate of `backend` on its threads right now: `out[n, n] = a b` at n = 1024, median wall and
 * process-CPU milliseconds of 5 products after 200 ms of warm-up.
 */
async function gemmReference(backend: Backend, n = 1024) {
  const rng = new Rng(1);
  const a = backend.fromArray(rng.normals(n * n), [n, n]);
  const b = backend.fromArray(rng.normals(n * n), [n, n]);
  const c = backend.zeros([n, n]);
  const once = async () => {
    backend.matmul(c, a, b);
    await backend.sync();
  };
  const warmUntil = performance.now() + 200;
  do await once(); while (performance.now() < warmUntil);
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let r = 0; r < 5; r++) {
    const [t0, c0] = [performance.now(), processCpuMs()];
    await once();
    wall.push(performance.now() - t0);
    cpu.push(processCpuMs() - c0);
  }
  for (const t of [a, b, c]) backend.dispose(t);
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[2];
  const flops = 2 * n ** 3;
  return { n, gflops: flops / median(wall) / 1e6, cpuGflopsPerThreadSecond: flops / median(cpu) / 1e6 };
}

/**
 * The GEMM-bound rate: the tokens/s of a step whose products (their FLOPs counted from the shapes)
 * ran at the reference GEMM rate and everything else took no time; `actualOverBound` >= 0.5 means
 * within 2x of it.
 */
function gemmBound(
  tokensPerStep: number,
  matmulGflopPerStep: number,
  actual: number,
  gemm: { gflops: number },
) {
  const tokensPerSecond = tokensPerStep / (matmulGflopPerStep / gemm.gflops);
  return { tokensPerSecond, actualOverBound: actual / tokensPerSecond };
}

const results = [];
for (const backendName of values.backends.split(",")) {
  const selected = await selectBackend(backendName as BackendChoice, {
    threads: values.threads === undefined ? undefined : Number(values.threads),
    onNote: (n) => console.error(n),
  });
  const profiler = new BackendProfiler();
  const backend = values.profile ? profiler.wrap(selected) : selected;
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
    let profile: ProfileSnapshot | undefined;
    let warmupCpuMs = 0;
    let steadyCpuMs = 0;
    const full = await train({
      backend,
      model,
      task,
      train: trainConfig({ ...p.train, steps, warmupSteps: 1, checkpointEvery: 0 }),
      runDir,
      onProgress: (progress) => {
        if (progress.event === "step" && progress.step === warmup) {
          warmupSeconds = progress.elapsedSeconds;
          profiler.reset();
          warmupCpuMs = processCpuMs();
        }
        if (progress.event === "step" && progress.step === steps) {
          lastStepSeconds = progress.elapsedSeconds;
          profile = profiler.snapshot();
          steadyCpuMs = processCpuMs() - warmupCpuMs;
        }
      },
    });
    // steady state: the steps after the warm-up ones (which include shader compilation and caches),
    // up to the last step's end; the final checkpoint is timed on its own
    const tokensPerStep = p.train.batchSize! * p.train.seqLen!;
    const steadySeconds = lastStepSeconds - warmupSeconds;
    const tokensPerSecond = ((steps - warmup) * tokensPerStep) / steadySeconds;
    const details = profile
      ? breakdown(
        profile,
        steps - warmup,
        (steadySeconds * 1e3) / (steps - warmup),
        steadyCpuMs / (steps - warmup),
      )
      : undefined;
    const gemm = details ? await gemmReference(selected) : undefined;
    const result = {
      backend: backend.name,
      preset: presetName,
      rule: values.rule,
      parameters: full.parameterCount,
      batch: p.train.batchSize,
      seqLen: p.train.seqLen,
      steps,
      warmupSteps: warmup,
      tokensPerSecond,
      tokensPerSecondIncludingWarmup: full.tokensPerSecond,
      finalCheckpointSeconds: full.elapsedSeconds - lastStepSeconds,
      peakRssMiB: Math.round(full.peakRssBytes / 2 ** 20),
      ...(details && gemm
        ? {
          breakdown: {
            ...details,
            gemmReference: gemm,
            gemmBound: gemmBound(tokensPerStep, details.matmulGflopPerStep, tokensPerSecond, gemm),
          },
        }
        : {}),
    };
    console.error(JSON.stringify(result));
    results.push(result);
    await Deno.remove(runDir, { recursive: true });
  }
  releaseBackend(selected);
}

const report = JSON.stringify({ date: new Date().toISOString(), deno: Deno.version.deno, results }, null, 2);
console.log(report);
if (values.out) await Deno.writeTextFile(values.out, report + "\n");
