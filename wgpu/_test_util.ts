/**
 * Test helpers of the `webgpu` backend: one shared backend per test file, and `gpuTest`, which
 * registers a test that is ignored ONLY when this runtime has no WebGPU adapter (the test name
 * then says so and the reason is printed once).
 *
 * @module
 */

import type { Tensor } from "../src/rules/backend.ts";
import { createWebGpuBackend, type WebGpuBackend } from "./backend.ts";
import { webGpuAdapterInfo } from "./device.ts";

const probe = await webGpuAdapterInfo();

/** Why GPU tests are skipped, or null when an adapter exists. */
export const NO_ADAPTER: string | null = probe.ok ? null : probe.reason;

/** The adapter's optional features (empty without an adapter). */
export const ADAPTER_FEATURES: ReadonlySet<string> = new Set(probe.ok ? probe.info.features : []);
if (NO_ADAPTER) console.warn(`webgpu tests SKIPPED: ${NO_ADAPTER}`);

let shared: Promise<WebGpuBackend> | null = null;

/** The backend shared by the tests of one file. */
export function gpuBackend(): Promise<WebGpuBackend> {
  shared ??= createWebGpuBackend();
  return shared;
}

/**
 * Register a GPU test; ignored (and named so) only when there is no adapter, or when `feature` is
 * given and the adapter does not have it.
 */
export function gpuTest(name: string, fn: (gpu: WebGpuBackend) => Promise<void>, feature?: string): void {
  const missing = NO_ADAPTER
    ? "no WebGPU adapter"
    : feature && !ADAPTER_FEATURES.has(feature)
    ? `this adapter has no ${feature}`
    : null;
  Deno.test({
    name: missing ? `${name} [SKIPPED: ${missing}]` : name,
    ignore: missing !== null,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => fn(await gpuBackend()),
  });
}

/**
 * Calls of `proto[method]` (e.g. `GPUComputePassEncoder.prototype`, `"dispatchWorkgroups"`) while `body`
 * records its commands and the runtime flushes them. The runtime submits by dispatch count alone meanwhile:
 * a flush after `FLUSH_AFTER_MS` of host time (a slow adapter compiling a kernel) would run held work early,
 * and the counts would depend on the machine's speed.
 */
export function callsDuring(
  gpu: { runtime: { flush(): void; flushAfterMs: number } },
  proto: object,
  method: string,
  body: () => void,
): number {
  const target = proto as Record<string, (...args: unknown[]) => unknown>;
  const original = target[method];
  const flushAfterMs = gpu.runtime.flushAfterMs;
  let calls = 0;
  target[method] = function (this: unknown, ...args: unknown[]) {
    calls++;
    return original.apply(this, args);
  };
  gpu.runtime.flushAfterMs = Infinity;
  try {
    body();
    gpu.runtime.flush();
  } finally {
    target[method] = original;
    gpu.runtime.flushAfterMs = flushAfterMs;
  }
  return calls;
}

/** Fail unless `x` and `y` have one shape and the same floats (NaN matching NaN); `what` names the two sides. */
export async function expectIdentical(
  gpu: WebGpuBackend,
  x: Tensor,
  y: Tensor,
  name: string,
  what: [string, string],
): Promise<void> {
  if (x.shape.join() !== y.shape.join()) throw new Error(`${name}: shape [${x.shape}] vs [${y.shape}]`);
  const u = await gpu.read(x);
  const v = await gpu.read(y);
  for (let i = 0; i < u.length; i++) {
    if (!(u[i] === v[i] || (Number.isNaN(u[i]) && Number.isNaN(v[i])))) {
      throw new Error(`${name}[${i}]: ${what[0]} ${u[i]} vs ${what[1]} ${v[i]}`);
    }
  }
}
