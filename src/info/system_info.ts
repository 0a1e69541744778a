/**
 * Everything `falcon info` reports: runtime versions, WebAssembly features, CPU workers, GPU adapter.
 *
 * @module
 */

import { type GpuProbe, probeGpuAdapter } from "./gpu_adapter.ts";
import { type WasmFeatures, wasmFeatures } from "./wasm_features.ts";

/** A report on what this runtime and machine offer the backends. */
export interface SystemInfo {
  /** falcon version. */
  readonly falcon: string;
  /** Deno version. */
  readonly deno: string;
  /** V8 version. */
  readonly v8: string;
  /** Operating system and architecture. */
  readonly platform: string;
  /** WebAssembly feature support. */
  readonly wasm: WasmFeatures;
  /** Workers the WASM backend starts by default (logical cores). */
  readonly workers: number;
  /** The WebGPU adapter, or why there is none. */
  readonly gpu: GpuProbe;
}

/** Collect the report. */
export async function systemInfo(version: string): Promise<SystemInfo> {
  return {
    falcon: version,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    platform: `${Deno.build.os}-${Deno.build.arch}`,
    wasm: wasmFeatures(),
    workers: navigator.hardwareConcurrency ?? 1,
    gpu: await probeGpuAdapter(),
  };
}
