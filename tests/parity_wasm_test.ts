/**
 * The shared parity suite (src/testing/) on the WASM backend: every fast-weight rule, alignment and
 * form, and every dense op, against the float64 reference.
 */

import { createWasmBackend, type WasmBackend } from "../src/wasm/mod.ts";
import { registerFastWeightParity } from "../src/testing/parity.ts";
import { registerDenseParity } from "../src/testing/dense_parity.ts";

const close = (b: unknown) => (b as WasmBackend).close();

await registerFastWeightParity("wasm (2 threads)", () => createWasmBackend({ threads: 2 }), {
  forms: ["recurrent", "chunk", "parallel"],
  close,
});
await registerDenseParity("wasm (2 threads)", () => createWasmBackend({ threads: 2 }), close);
