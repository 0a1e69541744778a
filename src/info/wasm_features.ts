/**
 * Which WebAssembly features this engine supports, found by validating tiny modules.
 *
 * @module
 */

/**
 * A module with one function `() -> v128` whose body is `instructions` (section sizes computed here).
 * Instruction bytes are given as hex, e.g. `fd0c` + 16 zero bytes for `v128.const 0`.
 */
function v128Module(instructions: string): Uint8Array<ArrayBuffer> {
  const code = [0x00, ...(instructions.match(/../g) ?? []).map((b) => parseInt(b, 16)), 0x0b]; // no locals; end
  const body = [code.length, ...code];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // magic, version 1
    ...[0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b], // type section: one type () -> v128
    ...[0x03, 0x02, 0x01, 0x00], // function section: one function of type 0
    ...[0x0a, body.length + 1, 0x01, ...body], // code section: one body
  ]);
}

const V128_ZERO = "fd0c" + "00".repeat(16);

// (module (func (result v128) v128.const 0))
const SIMD_PROBE = v128Module(V128_ZERO);

// (module (func (result v128) v128.const 0 v128.const 0 v128.const 0 f32x4.relaxed_madd))
const RELAXED_SIMD_PROBE = v128Module(V128_ZERO.repeat(3) + "fd8502");

/** Support for the WebAssembly features the CPU backend uses. */
export interface WasmFeatures {
  /** 128-bit SIMD. */
  readonly simd: boolean;
  /** Relaxed SIMD (`f32x4.relaxed_madd`). */
  readonly relaxedSimd: boolean;
  /** Shared memory and atomics (threads). */
  readonly threads: boolean;
}

/** Probe the running engine. */
export function wasmFeatures(): WasmFeatures {
  let threads = false;
  try {
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    threads = memory.buffer instanceof SharedArrayBuffer;
  } catch {
    threads = false;
  }
  return {
    simd: WebAssembly.validate(SIMD_PROBE),
    relaxedSimd: WebAssembly.validate(RELAXED_SIMD_PROBE),
    threads,
  };
}
