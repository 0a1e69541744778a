/**
 * `@falcon/falcon/webgpu`: the GPU backend, WGSL kernels through WebGPU, float32.
 * {@linkcode createWebGpuBackend} throws {@linkcode NoWebGpuAdapterError} where no adapter exists.
 *
 * @example Multiply two matrices on the GPU
 * ```ts
 * import { createWebGpuBackend } from "./webgpu.ts";
 *
 * const gpu = await createWebGpuBackend();
 * const a = gpu.fromArray([1, 2, 3, 4], [2, 2]);
 * const c = gpu.zeros([2, 2]);
 * gpu.matmul(c, a, a);
 * const out = await gpu.read(c);
 * if (out[3] !== 22) throw new Error(`expected 22, got ${out[3]}`);
 * ```
 *
 * @module
 */

export * from "./wgpu/mod.ts";
export type { Binding, GpuRuntime, ProfileEntry } from "./wgpu/runtime.ts";
export type { GpuBlock, GpuBufferPool, GpuTensor } from "./wgpu/tensor.ts";
export type * from "./src/rules/mod.ts";
