/**
 * WebGPU benchmark (`deno task bench:gpu`): GEMM TFLOP/s and fast-weight forward + backward
 * tokens/s. Prints one JSON report to stdout (and writes it to `--out FILE`).
 *
 * Flags: `--gemm 4096,2048,1024` (square sizes), `--gemm-inner 10` (GEMMs per timed batch),
 * `--gemm-precision f32,f16` (the GEMM's `matmulPrecision`s to time; f16 needs `shader-f16`),
 * `--rules falcon1,falcon3a`, `--B 8 --T 4096 --H 8 --dk 64 --dv 64`, `--fw-inner 16` (fast-weight
 * calls per timed batch: a device sync costs ~11 ms in Deno 2.9 on the H200, which at 4 calls per batch
 * added up to ~10 ms per call, a multiple of the kernels' time), `--reps 5`, `--chunk 64`, `--form chunk` (or `recurrent`, `parallel`; the
 * every rule runs the chunk-parallel kernels in `chunk`/`parallel`), `--skip-gemm`, `--skip-rules`,
 * `--s0-grad` (every backward also computes the gradient with respect to `S0`, as in reports before 2026-12-02
 * 16:00 UTC; by default the backwards run as a training step does, with `s0Grad: false`; the report's
 * `fastWeight.s0_grad` says which), `--profile` (also time every kernel of one forward + backward per rule with GPU
 * timestamps: `profile_ms`,
 * busiest first; `profile_kernel_ms` their sum; `profile_span_ms` from the first kernel's start to the last
 * one's end; needs `timestamp-query`; `forward_batch_*_ms`: per call of a batch of `--fw-inner` forwards,
 * the wall time, the device's span from the first kernel to the last and the kernels' sum), `--flush-ms MS`
 * (the runtime's `flushAfterMs`, default `FLUSH_AFTER_MS`; `inf`: submit by dispatch count only), `--out FILE`. `*_host_seconds`: time per call spent recording and
 * submitting on the host.
 * Each timed batch ends with one device sync; `sync_overhead_seconds` is that sync alone. `*_streamed_*`: the
 * same calls with each batch submitted before the one before it is waited for (`timeStreamed`: Deno's ~11 ms
 * per wait overlaps the next batch's work instead of adding to it). Before its timed reps,
 * each figure runs untimed batches for `--warm-ms 300` (at least one): on the H200 the first 100-250 ms of work
 * after a pause (a rule's pipelines compiling) ran 2-3x slower (2026-12-02 15:55 UTC: falcon1a's forward reps
 * 6.45, 6.17, then 2.02 ms per call), which made the median forward vary 2-3x from run to run.
 * `*_rep_seconds`: every timed rep's time per call, in order (the figure is their median).
 * `forward_backward_*`: batches of a forward that keeps its workspaces (`keepForBackward`) and the backward
 * given them (as a training step runs them, and as fla's peer times its `fwd+bwd`: autograd keeps the forward's
 * tensors); `forward_backward_recompute_*`: the same pairs with a backward that recomputes the forward (the
 * `forward_backward_*` of reports from 2026-12-02 05:20 to 07:15 UTC); `forward_plus_backward_tokens_per_s`:
 * the plain forward and backward batches' times added (two syncs' shares: the `forward_backward_tokens_per_s`
 * of reports before 2026-12-02 05:20 UTC). `--profile` times the kept pair's kernels.
 * Small shapes (e.g. `--gemm 256 --T 64 --B 1 --H 2 --dk 16 --dv 16`) run on software adapters.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createWebGpuBackend, type WebGpuBackend } from "../wgpu/backend.ts";
import type { ProfileEntry } from "../wgpu/runtime.ts";
import type { MatmulPrecision } from "../wgpu/shaders/matmul.ts";
import { type Form, FORMS, isPerColumnRule, ruleConfig, type RuleName, RULES } from "../src/rules/config.ts";
import { usesChunkKernels } from "../wgpu/fast_weight.ts";
import { Rng } from "../src/testing/compare.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    gemm: { type: "string", default: "4096,2048,1024" },
    "gemm-precision": { type: "string", default: "f32" },
    rules: { type: "string", default: "falcon1,falcon3a" },
    B: { type: "string", default: "8" },
    T: { type: "string", default: "4096" },
    H: { type: "string", default: "8" },
    dk: { type: "string", default: "64" },
    dv: { type: "string", default: "64" },
    reps: { type: "string", default: "5" },
    chunk: { type: "string", default: "64" },
    form: { type: "string", default: "chunk" },
    "skip-gemm": { type: "boolean", default: false },
    "skip-rules": { type: "boolean", default: false },
    profile: { type: "boolean", default: false },
    "s0-grad": { type: "boolean", default: false },
    "gemm-inner": { type: "string", default: "10" },
    "fw-inner": { type: "string", default: "16" },
    "flush-ms": { type: "string" },
    "warm-ms": { type: "string", default: "300" },
    out: { type: "string" },
  },
});

function int(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--${name} must be a positive integer, got "${v}"`);
  return n;
}

/** Median of a list of numbers. */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * Median over `reps` of the time per call of `fn`, in seconds: each rep records `inner` calls back
 * to back, then waits for the device (amortising the fixed submit-and-wait latency). `host`: the
 * median time per call spent in `fn` itself (recording and submitting on the host, before the wait).
 */
async function timeCalls(
  gpu: WebGpuBackend,
  reps: number,
  fn: () => void,
  inner = 1,
): Promise<{ seconds: number; host: number; reps: number[] }> {
  fn();
  await gpu.sync(); // pipeline compile
  // untimed batches until the device has run warmMs of them
  const warmUntil = performance.now() + warmMs;
  do {
    for (let i = 0; i < inner; i++) fn();
    await gpu.sync();
  } while (performance.now() < warmUntil);
  const times: number[] = [];
  const hosts: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    for (let i = 0; i < inner; i++) fn();
    gpu.runtime.flush();
    hosts.push((performance.now() - t0) / 1000 / inner);
    await gpu.sync();
    times.push((performance.now() - t0) / 1000 / inner);
  }
  return { seconds: median(times), host: median(hosts), reps: times };
}

/**
 * Time per call of `fn` in seconds, streamed: `reps` batches of `inner` calls, each batch recorded and submitted
 * while the device still runs the one before, and waited for after that (the host never stalls the device
 * between batches, as a training step that reads its loss later runs). Deno 2.9's waits (`mapAsync`,
 * `onSubmittedWorkDone`: ext/webgpu polls the device, then sleeps 10 ms before it settles) cost ~11 ms even on
 * an idle device; streamed, that sleep overlaps the next batch's work. Run after {@linkcode timeCalls} of the same
 * `fn` (its pipelines compiled, the device warm).
 */
async function timeStreamed(
  gpu: WebGpuBackend,
  reps: number,
  fn: () => void,
  inner: number,
): Promise<number> {
  const done = () => {
    gpu.runtime.flush();
    return gpu.runtime.device.queue.onSubmittedWorkDone();
  };
  await gpu.sync();
  const t0 = performance.now();
  let previous = Promise.resolve();
  for (let r = 0; r < reps; r++) {
    for (let i = 0; i < inner; i++) fn();
    const batch = done();
    await previous;
    previous = batch;
  }
  await previous;
  const seconds = (performance.now() - t0) / 1000 / (reps * inner);
  await gpu.sync();
  return seconds;
}

/** {@linkcode timeCalls}' device-inclusive time alone. */
async function timeIt(gpu: WebGpuBackend, reps: number, fn: () => void, inner = 1): Promise<number> {
  return (await timeCalls(gpu, reps, fn, inner)).seconds;
}

async function gemm(gpu: WebGpuBackend, N: number, reps: number) {
  const rng = new Rng(N);
  const a = gpu.fromArray(rng.normals(N * N), [N, N]);
  const b = gpu.fromArray(rng.normals(N * N), [N, N]);
  const c = gpu.zeros([N, N]);
  const out: Record<string, number> = { N };
  for (const [name, o] of [["nn", {}], ["nt", { transB: true }], ["tn", { transA: true }]] as const) {
    const s = await timeIt(gpu, reps, () => gpu.matmul(c, a, b, o), gemmInner);
    out[`${name}_seconds`] = s;
    out[`${name}_tflops`] = (2 * N ** 3) / s / 1e12;
  }
  for (const t of [a, b, c]) gpu.dispose(t);
  return out;
}

async function fastWeight(
  gpu: WebGpuBackend,
  rule: RuleName,
  d: Record<string, number>,
  reps: number,
  chunk: number,
  inner: number,
  form: Form,
  s0Grad: boolean,
) {
  const { B, T, H, dk, dv } = d;
  const rng = new Rng(7);
  const config = ruleConfig(rule);
  const n = B * T * H;
  const inputs = {
    q: gpu.fromArray(rng.normals(n * dk), [B, T, H, dk]),
    k: gpu.fromArray(rng.normals(n * dk), [B, T, H, dk]),
    v: gpu.fromArray(rng.normals(n * dv), [B, T, H, dv]),
    beta: isPerColumnRule(rule)
      ? gpu.fromArray(rng.uniforms(n * dv, 0.1, 1.9), [B, T, H, dv])
      : gpu.fromArray(rng.uniforms(n, 0.1, 1.9), [B, T, H]),
    lambdabar: gpu.fromArray(rng.uniforms(n, 0, 0.5), [B, T, H]),
  };
  const dO = gpu.fromArray(rng.normals(n * dv), [B, T, H, dv]);
  // one call each, its outputs given back to the pool at once
  const forwardCall = () => {
    const r = gpu.fastWeightForward(config, inputs, { form, chunkSize: chunk });
    for (const t of [r.o, r.carry.state, r.carry.lastKey, r.carry.windowX, r.carry.windowY]) gpu.dispose(t);
  };
  const backwardCall = () => {
    const g = gpu.fastWeightBackward(config, inputs, dO, { form, chunkSize: chunk, s0Grad });
    for (const t of Object.values(g)) gpu.dispose(t);
  };
  // a forward that keeps its workspaces and the backward that uses them, as a training step runs them
  const pairCall = () => {
    const r = gpu.fastWeightForward(config, inputs, { form, chunkSize: chunk, keepForBackward: true });
    for (const t of [r.o, r.carry.state, r.carry.lastKey, r.carry.windowX, r.carry.windowY]) gpu.dispose(t);
    const g = gpu.fastWeightBackward(config, inputs, dO, { form, chunkSize: chunk, saved: r.saved, s0Grad });
    for (const t of Object.values(g)) gpu.dispose(t);
  };
  const fwd = await timeCalls(gpu, reps, forwardCall, inner);
  const bwd = await timeCalls(gpu, reps, backwardCall, inner);
  // one sync per `inner` pairs
  const both = await timeCalls(gpu, reps, pairCall, inner);
  // the same with the backward recomputing the forward (the figure of reports before 2026-12-02 07:15 UTC)
  const recomputing = await timeCalls(gpu, reps, () => {
    forwardCall();
    backwardCall();
  }, inner);
  const forwardStreamed = await timeStreamed(gpu, reps, forwardCall, inner);
  const bothStreamed = await timeStreamed(gpu, reps, pairCall, inner);
  const forward = fwd.seconds;
  const backward = bwd.seconds;
  const tokens = B * T;
  let profile: (ProfileEntry[] & { spanNs: number }) | undefined;
  let batchProfile: Record<string, number> = {};
  if (values.profile) {
    // one forward + backward with every dispatch timed on the GPU (timestamp queries)
    gpu.runtime.startProfile();
    pairCall();
    profile = await gpu.runtime.stopProfile();
    // a timed batch of `inner` forwards with every dispatch timed: the device's span per call against the
    // wall time per call of the same batch (their difference is time the device spent outside the kernels)
    const t0 = performance.now();
    gpu.runtime.startProfile();
    for (let i = 0; i < inner; i++) forwardCall();
    const batch = await gpu.runtime.stopProfile();
    batchProfile = {
      forward_batch_wall_ms: (performance.now() - t0) / inner,
      forward_batch_span_ms: batch.spanNs / 1e6 / inner,
      forward_batch_kernel_ms: batch.reduce((a, p) => a + p.ns, 0) / 1e6 / inner,
    };
  }
  return {
    ...(profile
      ? {
        profile_span_ms: profile.spanNs / 1e6,
        profile_kernel_ms: profile.reduce((a, p) => a + p.ns, 0) / 1e6,
        profile_ms: profile.map((p) => ({
          kernel: p.label.split(":")[0],
          dispatches: p.dispatches,
          ms: p.ns / 1e6,
        })),
        ...batchProfile,
      }
      : {}),
    rule,
    kernels: usesChunkKernels(config, { form }) ? "chunk-parallel" : "recurrent",
    forward_seconds: forward,
    forward_rep_seconds: fwd.reps,
    backward_seconds: backward,
    forward_host_seconds: fwd.host,
    backward_host_seconds: bwd.host,
    forward_tokens_per_s: tokens / forward,
    forward_streamed_seconds: forwardStreamed,
    forward_streamed_tokens_per_s: tokens / forwardStreamed,
    forward_backward_seconds: both.seconds,
    forward_backward_rep_seconds: both.reps,
    forward_backward_tokens_per_s: tokens / both.seconds,
    forward_backward_streamed_seconds: bothStreamed,
    forward_backward_streamed_tokens_per_s: tokens / bothStreamed,
    forward_backward_recompute_seconds: recomputing.seconds,
    forward_backward_recompute_tokens_per_s: tokens / recomputing.seconds,
    // the sum of the two batches above: a sync share in each (the figure of reports before 2026-12-02 05:20 UTC)
    forward_plus_backward_tokens_per_s: tokens / (forward + backward),
  };
}

const gpu = await createWebGpuBackend({ timestamps: values.profile });
if (values["flush-ms"] !== undefined) {
  const ms = values["flush-ms"] === "inf" ? Infinity : Number(values["flush-ms"]);
  if (!(ms >= 0)) {
    throw new RangeError(`--flush-ms must be a number of ms >= 0 or "inf", got "${values["flush-ms"]}"`);
  }
  gpu.runtime.flushAfterMs = ms;
}
const gemmInner = int("gemm-inner", values["gemm-inner"]);
const warmMs = Number(values["warm-ms"]);
if (!(warmMs >= 0)) throw new RangeError(`--warm-ms must be a number of ms >= 0, got "${values["warm-ms"]}"`);
const reps = int("reps", values.reps);
const dims = {
  B: int("B", values.B),
  T: int("T", values.T),
  H: int("H", values.H),
  dk: int("dk", values.dk),
  dv: int("dv", values.dv),
};
const report: Record<string, unknown> = {
  adapter: gpu.adapterInfo,
  sync_overhead_seconds: await timeIt(gpu, reps, () => {}),
  deno: Deno.version.deno,
  date: new Date().toISOString(),
  reps,
  flush_after_ms: String(gpu.runtime.flushAfterMs),
  warm_ms: warmMs,
};
if (!values["skip-gemm"]) {
  const sizes = values.gemm.split(",").map((s) => int("gemm", s.trim()));
  const results = [];
  const precisions = values["gemm-precision"].split(",").map((s) => s.trim());
  for (const precision of precisions) {
    // the f16 GEMM runs on a backend of its own (a RangeError names shader-f16 where the adapter lacks it)
    const on = precision === "f32"
      ? gpu
      : await createWebGpuBackend({ matmulPrecision: precision as MatmulPrecision });
    for (const N of sizes) results.push({ precision, ...(await gemm(on, N, reps)) });
    if (on !== gpu) on.destroy();
  }
  report.gemm = { inner: gemmInner, results };
}
if (!values["skip-rules"]) {
  const rules = values.rules.split(",").map((s) => s.trim());
  for (const r of rules) {
    if (!(RULES as readonly string[]).includes(r)) throw new RangeError(`unknown rule "${r}" in --rules`);
  }
  const results = [];
  const inner = int("fw-inner", values["fw-inner"]);
  const form = values.form as Form;
  if (!(FORMS as readonly string[]).includes(form)) throw new RangeError(`unknown --form "${form}"`);
  const chunk = int("chunk", values.chunk);
  const s0Grad = values["s0-grad"];
  for (const r of rules) {
    // a rule whose call does not fit this device (e.g. a chunk workspace above the binding limit) is
    // reported with its error; the other rules still run
    try {
      results.push(await fastWeight(gpu, r as RuleName, dims, reps, chunk, inner, form, s0Grad));
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
      results.push({ rule: r, error: e.message });
    }
  }
  report.fastWeight = { ...dims, inner, form, chunk, s0_grad: s0Grad, results };
}
const json = JSON.stringify(report, null, 2);
console.log(json);
if (values.out) await Deno.writeTextFile(values.out, json + "\n");
gpu.destroy();
