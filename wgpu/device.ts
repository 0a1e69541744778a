/**
 * WebGPU adapter and device acquisition for the `webgpu` backend, and a summary of the adapter for
 * `falcon info`. Requests the adapter's own limits for the few that compute kernels need (storage
 * bindings, workgroup memory, buffer sizes) instead of the WebGPU defaults, and the optional
 * `shader-f16` feature where the adapter has it (Deno 2.9 exposes no `subgroups` feature).
 *
 * @module
 */

/** Summary of the adapter the backend runs on. */
export interface WebGpuAdapterInfo {
  /** Adapter description, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)` or `NVIDIA H200`. */
  readonly name: string;
  /** Vendor as the driver reports it. */
  readonly vendor: string;
  /** Architecture, when reported. */
  readonly architecture: string;
  /** True for software / fallback adapters (llvmpipe, SwiftShader). */
  readonly isFallbackAdapter: boolean;
  /** Optional features, sorted. */
  readonly features: readonly string[];
  /** Key limits for compute kernels. */
  readonly limits: Readonly<Record<string, number>>;
}

/** Options of {@linkcode requestWebGpuDevice}. */
export interface WebGpuDeviceOptions {
  /** Power preference passed to `requestAdapter` (default `high-performance`). */
  readonly powerPreference?: GPUPowerPreference;
  /** Ask for `timestamp-query` when the adapter has it (per-kernel profiling, {@linkcode GpuRuntime.startProfile}). */
  readonly timestamps?: boolean;
}

/** An adapter, its device, and the adapter summary. */
export interface WebGpuContext {
  /** The adapter. */
  readonly adapter: GPUAdapter;
  /** The device, created with the limits in {@linkcode REQUESTED_LIMITS} raised to the adapter's. */
  readonly device: GPUDevice;
  /** What the adapter is. */
  readonly info: WebGpuAdapterInfo;
}

/** Limits raised from the WebGPU default to the adapter's value when the device is created. */
export const REQUESTED_LIMITS = [
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupsPerDimension",
  "maxStorageBuffersPerShaderStage",
] as const;

/** Error raised when no WebGPU adapter is available; the message names the reason. */
export class NoWebGpuAdapterError extends Error {
  /** Build the error from the reason. */
  constructor(reason: string) {
    super(`no WebGPU adapter: ${reason}`);
    this.name = "NoWebGpuAdapterError";
  }
}

/** `navigator.gpu`, or null where the runtime has none. */
function gpuOrNull(): GPU | null {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  return nav?.gpu ?? null;
}

/** Request an adapter, or throw {@linkcode NoWebGpuAdapterError} naming why there is none. */
export async function requestWebGpuAdapter(options: WebGpuDeviceOptions = {}): Promise<GPUAdapter> {
  const gpu = gpuOrNull();
  if (!gpu) {
    throw new NoWebGpuAdapterError(
      "navigator.gpu is undefined in this runtime (Deno needs WebGPU support; try --unstable-webgpu)",
    );
  }
  let adapter: GPUAdapter | null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference ?? "high-performance" });
  } catch (err) {
    throw new NoWebGpuAdapterError(`requestAdapter failed: ${err instanceof Error ? err.message : err}`);
  }
  if (!adapter) {
    throw new NoWebGpuAdapterError("requestAdapter returned null (no GPU driver or software adapter)");
  }
  return adapter;
}

/** Summarise an adapter (name, vendor, fallback flag, features, key limits). */
export function describeAdapter(adapter: GPUAdapter): WebGpuAdapterInfo {
  const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
  const limits: Record<string, number> = {};
  for (const key of REQUESTED_LIMITS) limits[key] = Number(adapter.limits[key]);
  return {
    name: info.description || info.device || "(unnamed adapter)",
    vendor: info.vendor,
    architecture: info.architecture,
    isFallbackAdapter: Boolean(info.isFallbackAdapter),
    features: [...adapter.features].sort(),
    limits,
  };
}

/** The adapter summary, or null with a reason when there is no adapter (for `falcon info`). */
export async function webGpuAdapterInfo(
  options: WebGpuDeviceOptions = {},
): Promise<{ ok: true; info: WebGpuAdapterInfo } | { ok: false; reason: string }> {
  try {
    return { ok: true, info: describeAdapter(await requestWebGpuAdapter(options)) };
  } catch (err) {
    return { ok: false, reason: err instanceof Error ? err.message : String(err) };
  }
}

/** Request an adapter and a device with the adapter's compute limits. */
export async function requestWebGpuDevice(options: WebGpuDeviceOptions = {}): Promise<WebGpuContext> {
  const adapter = await requestWebGpuAdapter(options);
  const requiredLimits: Record<string, number> = {};
  for (const key of REQUESTED_LIMITS) requiredLimits[key] = Number(adapter.limits[key]);
  const requiredFeatures: GPUFeatureName[] = [];
  if (options.timestamps && adapter.features.has("timestamp-query")) requiredFeatures.push("timestamp-query");
  // f16 shaders (the GEMM's `matmulPrecision: "f16"`) where the adapter has them; f32 runs everywhere
  if (adapter.features.has("shader-f16")) requiredFeatures.push("shader-f16");
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures });
  return { adapter, device, info: describeAdapter(adapter) };
}
