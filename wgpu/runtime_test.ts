import assert from "node:assert/strict";
import { gpuTest } from "./_test_util.ts";
import { CONSTANT_CACHE_BYTES } from "./runtime.ts";

gpuTest("temp() hands out one cached buffer per small content and a fresh one for large data", (gpu) => {
  const rt = gpu.runtime;
  const a = rt.uniform([{ u: 3 }, { f: 0.5 }]);
  assert.equal(rt.uniform([{ u: 3 }, { f: 0.5 }]), a);
  assert.notEqual(rt.uniform([{ u: 4 }, { f: 0.5 }]), a);
  // same bytes, other usage: another buffer
  assert.notEqual(rt.temp(new Uint32Array([3, 0x3f000000]), "storage"), a);
  const big = new Int32Array(CONSTANT_CACHE_BYTES / 4 + 1);
  assert.notEqual(rt.temp(big, "storage"), rt.temp(big, "storage"));
  rt.flush();
  return Promise.resolve();
});

gpuTest("dispatches recorded into one compute pass see each other's writes, around copies", async (gpu) => {
  // x -> 2x -> 2x + x -> copy -> (2x + x) * x, all recorded before one read
  const x = gpu.fromArray([1, 2, 3, 4, 5], [5]);
  const y = gpu.zeros([5]);
  const z = gpu.zeros([5]);
  gpu.add(y, x, x);
  gpu.add(y, y, x);
  gpu.copy(z, y);
  gpu.mul(z, z, x);
  assert.deepEqual(Array.from(await gpu.read(z)), [3, 12, 27, 48, 75]);
});
