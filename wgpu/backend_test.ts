/**
 * The WebGPU backend's storage and runtime: adapter summary, round trips, copies, the buffer pool,
 * the pipeline cache, and the errors it raises (wrong backend, disposed tensors, bad shapes,
 * shader validation errors surfacing at the next read).
 */

import { createRefBackend } from "../src/rules/reference/backend.ts";
import { NoWebGpuAdapterError } from "./device.ts";
import { gpuTest } from "./_test_util.ts";

function expectThrows(what: string, fn: () => unknown, type: ErrorConstructor, text: string) {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof type)) throw new Error(`${what}: threw ${e}, expected a ${type.name}`);
    if (!String(e.message).includes(text)) throw new Error(`${what}: message "${e.message}" lacks "${text}"`);
    return;
  }
  throw new Error(`${what}: did not throw`);
}

Deno.test("NoWebGpuAdapterError names the reason", () => {
  const e = new NoWebGpuAdapterError("requestAdapter returned null");
  if (!e.message.includes("no WebGPU adapter") || !e.message.includes("requestAdapter returned null")) {
    throw new Error(`unexpected message: ${e.message}`);
  }
});

gpuTest("webgpu backend reports its adapter (name, fallback flag, features, limits)", async (gpu) => {
  const info = gpu.adapterInfo;
  if (!info.name) throw new Error("adapter name is empty");
  if (typeof info.isFallbackAdapter !== "boolean") throw new Error("isFallbackAdapter is not a boolean");
  if (!Array.isArray(info.features)) throw new Error("features is not an array");
  if (!(info.limits.maxComputeWorkgroupStorageSize >= 16384)) {
    throw new Error(`maxComputeWorkgroupStorageSize ${info.limits.maxComputeWorkgroupStorageSize}`);
  }
  if (gpu.name !== "webgpu" || gpu.dtype !== "f32") throw new Error(`backend is ${gpu.name}/${gpu.dtype}`);
  await Promise.resolve();
});

gpuTest("webgpu tensors round-trip, copy and zero-fill (also reused pooled buffers)", async (gpu) => {
  const a = gpu.fromArray([1, -2, 3.5, 4, 5], [5]);
  const got = await gpu.read(a);
  if (got.join() !== "1,-2,3.5,4,5") throw new Error(`read gave ${got}`);
  const b = gpu.zeros([5]);
  gpu.copy(b, a);
  if ((await gpu.read(b)).join() !== "1,-2,3.5,4,5") throw new Error("copy failed");
  const buffer = (b as unknown as { buffer: GPUBuffer }).buffer;
  gpu.dispose(b);
  const c = gpu.zeros([5]); // same size: takes the pooled buffer back, and must still read zeros
  if ((c as unknown as { buffer: GPUBuffer }).buffer !== buffer) {
    throw new Error("pool did not reuse the buffer");
  }
  if ((await gpu.read(c)).some((x) => x !== 0)) throw new Error("zeros() on a reused buffer is not zero");
  expectThrows("read disposed", () => gpu.copy(c, b), TypeError, "disposed");
  expectThrows("fromArray size", () => gpu.fromArray([1, 2, 3], [2, 2]), RangeError, "[2,2]");
  const tooBig = gpu.adapterInfo.limits.maxStorageBufferBindingSize / 4 + 1;
  expectThrows("oversized tensor", () => gpu.zeros([tooBig]), RangeError, "maxStorageBufferBindingSize");
  const foreign = createRefBackend().zeros([5]);
  expectThrows("foreign tensor", () => gpu.copy(c, foreign), TypeError, "another backend");
});

gpuTest("webgpu pipelines are compiled once per variant and reused", async (gpu) => {
  const x = gpu.fromArray([1, 2, 3], [3]);
  const y = gpu.zeros([3]);
  gpu.add(y, x, x);
  const before = gpu.runtime.pipelineCount;
  for (let i = 0; i < 3; i++) gpu.add(y, y, x);
  if (gpu.runtime.pipelineCount !== before) throw new Error("add compiled a second pipeline");
  if ((await gpu.read(y)).join() !== "5,10,15") throw new Error("add results wrong");
});

gpuTest("webgpu shader validation errors are thrown by the next read", async (gpu) => {
  const rt = gpu.runtime;
  const bad = rt.pipeline(
    "broken_test_shader",
    () => "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }",
  );
  rt.dispatch(bad, [], [1]);
  const t = gpu.zeros([1]);
  let message = "";
  try {
    await gpu.read(t);
  } catch (e) {
    message = e instanceof Error ? e.message : String(e);
  }
  if (!message.startsWith("webgpu:")) throw new Error(`expected a webgpu validation error, got "${message}"`);
  await gpu.read(t); // the error was reported once and cleared
});
