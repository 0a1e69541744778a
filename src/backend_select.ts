/**
 * The one place that chooses a backend. Nothing else in `src/` knows which backend runs.
 *
 * @module
 */

import type { Backend } from "./rules/backend.ts";
import { createRefBackend } from "./rules/reference/backend.ts";
import { InputError } from "./errors.ts";
import { probeGpuAdapter } from "./info/gpu_adapter.ts";

/** Backend names the CLI accepts. `auto` picks the fastest available one. */
export const BACKEND_CHOICES = ["auto", "ref", "wasm", "webgpu"] as const;

/** A backend choice. */
export type BackendChoice = typeof BACKEND_CHOICES[number];

/** Options of {@linkcode selectBackend}. */
export interface SelectBackendOptions {
  /** Worker threads of the WASM backend (default: all cores). */
  readonly threads?: number;
  /** Told which backend `auto` chose and why (e.g. a fallback). */
  readonly onNote?: (note: string) => void;
}

async function wasmBackend(options: SelectBackendOptions): Promise<Backend> {
  const { createWasmBackend } = await import("./wasm/mod.ts");
  return await createWasmBackend({ threads: options.threads ?? navigator.hardwareConcurrency ?? 1 });
}

async function webgpuBackend(): Promise<Backend> {
  const { createWebGpuBackend } = await import("../wgpu/mod.ts");
  return await createWebGpuBackend();
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
  switch (choice) {
    case "ref":
      return createRefBackend();
    case "wasm":
      return await wasmBackend(options);
    case "webgpu": {
      const probe = await probeGpuAdapter();
      if (!probe.ok) throw new InputError(`--backend webgpu: no WebGPU adapter (${probe.reason})`);
      return await webgpuBackend();
    }
    case "auto": {
      const probe = await probeGpuAdapter();
      if (probe.ok && !probe.adapter.isFallbackAdapter) {
        options.onNote?.(`backend auto: webgpu on ${probe.adapter.description}`);
        return await webgpuBackend();
      }
      const why = probe.ok ? `only a software adapter (${probe.adapter.description})` : probe.reason;
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
