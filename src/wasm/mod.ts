/**
 * The WASM CPU backend: {@linkcode createWasmBackend} (AssemblyScript kernels compiled to WASM SIMD,
 * float32, a pool of Deno Workers on one shared memory). Importing this module starts nothing; the
 * workers start when a backend is created and stop with `close()` (or after idling).
 *
 * @module
 */

export { createWasmBackend, type WasmBackend, type WasmBackendOptions } from "./backend.ts";
export type { WasmFlavour } from "./module.ts";
export type * from "../rules/backend.ts";
export type * from "../rules/config.ts";
