/**
 * `selectBackend`'s `gpuMatmul`: f16 with an explicit CPU backend is an error naming the flag; on
 * webgpu it needs shader-f16 (an InputError naming the feature where the adapter lacks it, the f16
 * GEMM where it has it); `auto` on a software adapter takes WASM and says the flag was ignored.
 */

import { releaseBackend, selectBackend } from "./backend_select.ts";
import { InputError } from "./src/errors.ts";
import { probeGpuAdapter } from "./src/info/gpu_adapter.ts";

async function inputError(f: () => Promise<unknown>): Promise<string> {
  try {
    releaseBackend(await f() as never);
  } catch (e) {
    if (e instanceof InputError) return e.message;
    throw e;
  }
  return "";
}

Deno.test("--gpu-matmul f16 with --backend wasm or ref is an InputError naming the flag and backend", async () => {
  for (const choice of ["wasm", "ref"] as const) {
    const message = await inputError(() => selectBackend(choice, { gpuMatmul: "f16" }));
    if (!message.includes("--gpu-matmul f16") || !message.includes(`--backend ${choice}`)) {
      throw new Error(
        `expected an InputError naming --gpu-matmul f16 and --backend ${choice}, got "${message}"`,
      );
    }
  }
});

const probe = await probeGpuAdapter();

Deno.test({
  name: "--gpu-matmul f16 on webgpu: the f16 GEMM with shader-f16, an InputError naming it without" +
    (probe.ok ? "" : " [SKIPPED: no WebGPU adapter]"),
  ignore: !probe.ok,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    if (!probe.ok) return;
    if (probe.adapter.features.includes("shader-f16")) {
      const backend = await selectBackend("webgpu", { gpuMatmul: "f16" }) as { matmulPrecision?: string };
      const got = backend.matmulPrecision;
      releaseBackend(backend as never);
      if (got !== "f16") throw new Error(`matmulPrecision ${got}, expected f16`);
    } else {
      const message = await inputError(() => selectBackend("webgpu", { gpuMatmul: "f16" }));
      if (!message.includes("shader-f16")) {
        throw new Error(`expected an InputError naming shader-f16, got "${message}"`);
      }
    }
  },
});

Deno.test({
  name: "backend auto with --gpu-matmul f16 on a software adapter takes wasm and says f16 was ignored" +
    (probe.ok && probe.adapter.isFallbackAdapter ? "" : " [SKIPPED: needs a software adapter]"),
  ignore: !(probe.ok && probe.adapter.isFallbackAdapter),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const notes: string[] = [];
    const backend = await selectBackend("auto", { gpuMatmul: "f16", onNote: (n) => notes.push(n) });
    const name = backend.name;
    releaseBackend(backend);
    if (name !== "wasm") throw new Error(`auto chose ${name}, expected wasm`);
    if (!notes.some((n) => n.includes("--gpu-matmul f16 ignored"))) {
      throw new Error(`expected a note that --gpu-matmul f16 was ignored, got ${JSON.stringify(notes)}`);
    }
  },
});
