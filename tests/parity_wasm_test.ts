/**
 * The shared parity suite (src/testing/) on the WASM backend: every fast-weight rule, alignment and
 * form, every dense op, and whole models (the Transformer variants, falcon1), against the float64
 * reference.
 */

import { createWasmBackend, type WasmBackend } from "../src/wasm/mod.ts";
import { registerFastWeightParity } from "../src/testing/parity.ts";
import { registerDenseParity } from "../src/testing/dense_parity.ts";
import { registerModelParity } from "../src/testing/model_parity.ts";

const close = (b: unknown) => (b as WasmBackend).close();

await registerFastWeightParity("wasm (2 threads)", () => createWasmBackend({ threads: 2 }), {
  forms: ["recurrent", "chunk", "parallel"],
  close,
});
// every matmul variant at any level: the small level's fewer variants only save compiles of GPU kernels
await registerDenseParity("wasm (2 threads)", () => createWasmBackend({ threads: 2 }), close, "full");
await registerModelParity("wasm (2 threads)", () => createWasmBackend({ threads: 2 }), close);
