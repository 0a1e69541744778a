/**
 * The WebGPU backend of falcon (float32): {@linkcode createWebGpuBackend} and the adapter summary
 * for `falcon info`.
 *
 * @module
 */

export { createWebGpuBackend, type WebGpuBackend, type WebGpuBackendOptions } from "./backend.ts";
export type { FastWeightOpsOptions } from "./fast_weight.ts";
export type { DenseOpsOptions } from "./dense.ts";
export { MATMUL_PRECISIONS, type MatmulPrecision } from "./shaders/matmul.ts";
export {
  describeAdapter,
  NoWebGpuAdapterError,
  requestWebGpuAdapter,
  type WebGpuAdapterInfo,
  webGpuAdapterInfo,
  type WebGpuDeviceOptions,
} from "./device.ts";
export { type Binding, GpuRuntime, type ProfileEntry } from "./runtime.ts";
/** The kernel interface this backend implements (types only). */
export type * from "../src/rules/mod.ts";
export { GpuBufferPool, GpuTensor } from "./tensor.ts";
