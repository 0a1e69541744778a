/**
 * The shared parity suite (src/testing/) on the WebGPU backend, whatever adapter this machine has
 * (a software adapter in CI, the H200 on the GPU machine). Skips, saying so, only when no adapter exists.
 */

import { createWebGpuBackend, type WebGpuBackend } from "../wgpu/mod.ts";
import { registerFastWeightParity } from "../src/testing/parity.ts";
import { registerDenseParity } from "../src/testing/dense_parity.ts";
import { registerModelParity } from "../src/testing/model_parity.ts";
import { probeGpuAdapter } from "../src/info/gpu_adapter.ts";

const available = (await probeGpuAdapter()).ok;
const make = () => available ? createWebGpuBackend() : Promise.resolve(null);
// finish the device's work before destroying it (destroying with work in flight has crashed Deno)
const close = async (b: unknown) => {
  await (b as WebGpuBackend).sync();
  (b as WebGpuBackend).destroy();
};

// one kernel shape per rule at the small level, the shared small sizes (src/testing/shapes.ts): each
// new head or chunk size is a slow compile on a software adapter, and at these sizes the other WebGPU
// tests (wgpu/fast_weight_parity_test.ts, wgpu/fast_weight_chunk_test.ts) compile the same kernels (the
// varied sizes run on the other backends and here at FALCON_TEST_LEVEL=full)
await registerFastWeightParity("webgpu", make, {
  forms: ["recurrent", "chunk"],
  close,
  oneKernelShape: true,
});
await registerDenseParity("webgpu", make, close);
await registerModelParity("webgpu", make, close);
