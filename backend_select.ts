/**
 * The one place that chooses a backend. Nothing else in `src/` knows which backend runs.
 *
 * @module
 */

import type { Backend } from "./src/rules/backend.ts";
import { createRefBackend } from "./src/rules/reference/backend.ts";
import { InputError } from "./src/errors.ts";
import { probeGpuAdapter } from "./src/info/gpu_adapter.ts";

/** Backend names the CLI accepts. `auto` picks the fastest available one. */
export const BACKEND_CHOICES = ["auto", "ref", "wasm", "webgpu"] as const;

/** A backend choice. */
export type BackendChoice = typeof BACKEND_CHOICES[number];

/** `value` as a {@linkcode BackendChoice}; a RangeError names the flag's choices otherwise. */
export function backendChoice(value: string): BackendChoice {
  if (!(BACKEND_CHOICES as readonly string[]).includes(value)) {
    throw new RangeError(`--backend must be one of ${BACKEND_CHOICES.join(", ")}, got "${value}"`);
  }
  return value as BackendChoice;
}

/**
 * Arithmetic of the webgpu backend's matrix products: `f32`, or `f16` (f16 operands and partial sums,
 * about 1e-3 relative error; needs the adapter feature `shader-f16`).
 */
export const GPU_MATMUL_CHOICES = ["f32", "f16"] as const;

/** A `--gpu-matmul` choice. */
export type GpuMatmulChoice = typeof GPU_MATMUL_CHOICES[number];

/** Options of {@linkcode selectBackend}. */
export interface SelectBackendOptions {
  /** Worker threads of the WASM backend (default: all cores). */
  readonly threads?: number;
  /** The webgpu backend's matmul precision (default `f32`); `f16` with another explicit backend is an error. */
  readonly gpuMatmul?: GpuMatmulChoice;
  /** Told which backend `auto` chose and why (e.g. a fallback). */
  readonly onNote?: (note: string) => void;
}

async function wasmBackend(options: SelectBackendOptions): Promise<Backend> {
  const { createWasmBackend } = await import("./src/wasm/mod.ts");
  return await createWasmBackend({ threads: options.threads ?? navigator.hardwareConcurrency ?? 1 });
}

async function webgpuBackend(options: SelectBackendOptions): Promise<Backend> {
  const { createWebGpuBackend } = await import("./wgpu/mod.ts");
  try {
    return await createWebGpuBackend({ matmulPrecision: options.gpuMatmul ?? "f32" });
  } catch (err) {
    if (err instanceof RangeError) throw new InputError(`--gpu-matmul ${options.gpuMatmul}: ${err.message}`);
    throw err;
  }
}

/**
 * Create the backend named by `choice`. `auto` takes WebGPU on a hardware adapter, else WASM
 * (a software GPU adapter is slower than the CPU kernels), else the float64 reference; it says
 * which through `onNote`.
 */
export async function selectBackend(
  choice: BackendChoice,
  options: SelectBackendOptions = {},
): Promise<Backend> {
  const half = options.gpuMatmul === "f16";
  if (half && (choice === "ref" || choice === "wasm")) {
    throw new InputError(`--gpu-matmul f16 applies to the webgpu backend only, not --backend ${choice}`);
  }
  switch (choice) {
    case "ref":
      return createRefBackend();
    case "wasm":
      return await wasmBackend(options);
    case "webgpu": {
      const probe = await probeGpuAdapter();
      if (!probe.ok) throw new InputError(`--backend webgpu: no WebGPU adapter (${probe.reason})`);
      return await webgpuBackend(options);
    }
    case "auto": {
      const probe = await probeGpuAdapter();
      if (probe.ok && !probe.adapter.isFallbackAdapter) {
        options.onNote?.(`backend auto: webgpu on ${probe.adapter.description}`);
        return await webgpuBackend(options);
      }
      const why = probe.ok ? `only a software adapter (${probe.adapter.description})` : probe.reason;
      if (half) options.onNote?.("--gpu-matmul f16 ignored: backend auto did not choose webgpu");
      try {
        const backend = await wasmBackend(options);
        options.onNote?.(`backend auto: wasm (webgpu skipped: ${why})`);
        return backend;
      } catch (err) {
        options.onNote?.(`backend auto: float64 reference (wasm failed: ${(err as Error).message})`);
        return createRefBackend();
      }
    }
    default:
      throw new InputError(`unknown backend "${choice}"; expected ${BACKEND_CHOICES.join(", ")}`);
  }
}

/** Release a backend's workers or GPU device (a no-op for the reference backend). */
export function releaseBackend(backend: Backend): void {
  const b = backend as Backend & { close?: () => void; destroy?: () => void };
  b.close?.();
  b.destroy?.();
}
