/**
 * The WebGPU backend of falcon (float32): {@linkcode createWebGpuBackend} and the adapter summary
 * for `falcon info`.
 *
 * @module
 */

export { createWebGpuBackend, type WebGpuBackend } from "./backend.ts";
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
