/**
 * What WebGPU adapter this runtime offers, or why there is none.
 *
 * @module
 */

/** A summary of a WebGPU adapter. */
export interface GpuAdapterSummary {
  /** Adapter description (e.g. `NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`). */
  readonly description: string;
  /** Vendor id or name as the driver reports it. */
  readonly vendor: string;
  /** Architecture, when reported. */
  readonly architecture: string;
  /** True for software / fallback adapters. */
  readonly isFallbackAdapter: boolean;
  /** Optional features (e.g. `shader-f16`, `subgroups`). */
  readonly features: string[];
  /** Key limits for compute kernels. */
  readonly limits: Record<string, number>;
}

/** The adapter, or the reason none is available. */
export type GpuProbe = { readonly ok: true; readonly adapter: GpuAdapterSummary } | {
  readonly ok: false;
  readonly reason: string;
};

const KEY_LIMITS = [
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupsPerDimension",
  "maxStorageBuffersPerShaderStage",
] as const;

/** Ask `navigator.gpu` for an adapter and summarise it. */
export async function probeGpuAdapter(): Promise<GpuProbe> {
  const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
  if (!gpu) return { ok: false, reason: "navigator.gpu is not available in this runtime" };
  let adapter: GPUAdapter | null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  } catch (err) {
    return { ok: false, reason: `requestAdapter failed: ${err instanceof Error ? err.message : err}` };
  }
  if (!adapter) return { ok: false, reason: "requestAdapter returned no adapter (no GPU driver found)" };
  const info = adapter.info;
  const limits: Record<string, number> = {};
  for (const key of KEY_LIMITS) limits[key] = Number(adapter.limits[key]);
  return {
    ok: true,
    adapter: {
      description: info.description || "(unnamed adapter)",
      vendor: info.vendor,
      architecture: info.architecture,
      isFallbackAdapter: Boolean((info as { isFallbackAdapter?: boolean }).isFallbackAdapter),
      features: [...adapter.features].sort(),
      limits,
    },
  };
}
