/**
 * Loading the generated WebAssembly: picks the relaxed-SIMD build when this engine validates it,
 * else the plain-SIMD build, and instantiates it on a shared memory. The main thread compiles it and
 * posts the compiled module to every worker, so all threads run exactly the same code.
 *
 * @module
 */

import { WASM_PLAIN_BASE64, WASM_RELAXED_BASE64 } from "./_generated_wasm.ts";

/** The kernels' exports (every pointer is a byte address in the shared memory). */
export interface WasmExports {
  /** First free byte after the module's static data. */
  heapBase(): number;
  /** Scratch bytes one thread needs per fast-weight head (`chunked`: 1 for the chunk-parallel kernel). */
  fwScratchBytes(
    t: number,
    dk: number,
    dv: number,
    w: number,
    c: number,
    backward: number,
    chunked: number,
  ): number;
  /** Kernels dispatched per task: `(params, task, scratch)`. */
  [kernel: string]: (...args: number[]) => number | void;
}

/** Which build runs here. */
export type WasmFlavour = "relaxed-simd" | "simd";

function decode(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const cached = new Map<WasmFlavour, WebAssembly.Module>();

function compiled(flavour: WasmFlavour, bytes: Uint8Array<ArrayBuffer>): WebAssembly.Module {
  let module = cached.get(flavour);
  if (!module) cached.set(flavour, module = new WebAssembly.Module(bytes));
  return module;
}

/**
 * The compiled module of the requested build, or of the best build this engine accepts (the relaxed one
 * when `WebAssembly.validate` accepts it). Compiled once per thread and flavour.
 */
export function wasmModule(flavour?: WasmFlavour): { module: WebAssembly.Module; flavour: WasmFlavour } {
  if (flavour !== "simd") {
    const relaxed = decode(WASM_RELAXED_BASE64);
    if (WebAssembly.validate(relaxed)) {
      return { module: compiled("relaxed-simd", relaxed), flavour: "relaxed-simd" };
    }
    if (flavour === "relaxed-simd") throw new Error("this engine does not support relaxed SIMD");
  }
  const plain = decode(WASM_PLAIN_BASE64);
  if (!WebAssembly.validate(plain)) {
    throw new Error("this engine supports neither WASM build (SIMD required)");
  }
  return { module: compiled("simd", plain), flavour: "simd" };
}

/** Pages of 64 KiB the shared memory may grow to (4 GiB). */
export const MAX_PAGES = 65536;

/** A fresh shared memory for the module. */
export function createMemory(initialPages = 256): WebAssembly.Memory {
  return new WebAssembly.Memory({ initial: initialPages, maximum: MAX_PAGES, shared: true });
}

/** Instantiate `module` (default: the best build here) on `memory`. */
export function instantiate(
  memory: WebAssembly.Memory,
  module: WebAssembly.Module = wasmModule().module,
): WasmExports {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  return instance.exports as unknown as WasmExports;
}
