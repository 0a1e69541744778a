/**
 * `@falcon/falcon/wasm`: the CPU backend, AssemblyScript kernels compiled to WASM SIMD (relaxed SIMD
 * where the engine has it), float32, with a pool of Workers sharing one memory.
 *
 * @example Multiply two matrices and close the worker pool
 * ```ts
 * import { createWasmBackend } from "./wasm.ts";
 *
 * const be = await createWasmBackend({ threads: 1 });
 * const a = be.fromArray([1, 2, 3, 4], [2, 2]);
 * const out = be.zeros([2, 2]);
 * be.matmul(out, a, a);
 * const c = await be.read(out);
 * if (c[3] !== 22) throw new Error(`expected 22, got ${c[3]}`);
 * be.close();
 * ```
 *
 * @module
 */

export * from "./src/wasm/mod.ts";
export type { WasmFlavour } from "./src/wasm/module.ts";
export type * from "./src/rules/mod.ts";
