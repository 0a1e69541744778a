/**
 * Tensors as `falcon convert` moves them: raw little-endian bytes with a safetensors dtype tag, so
 * a conversion that changes no dtype copies every bit. Float views, dtype conversion and finiteness
 * checks work on these.
 *
 * @module
 */

import { narrowF32, narrowF64, SAFETENSORS_DTYPE, type WeightDtype, widenToF32 } from "./dtype.ts";

/** A named tensor's dtype tag, shape and raw bytes. */
export interface RawTensor {
  /** Safetensors dtype tag (`F64`, `F32`, `F16`, `BF16`, ...). */
  readonly dtype: string;
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Little-endian element bytes, row-major (`data.length = size * element bytes`). */
  readonly data: Uint8Array;
}

/** The {@linkcode WeightDtype} of a float tensor's dtype tag, or `null` for any other tag. */
export function weightDtypeOf(dtype: string): WeightDtype | null {
  for (const [d, tag] of Object.entries(SAFETENSORS_DTYPE)) if (tag === dtype) return d as WeightDtype;
  return null;
}

/** Number of elements of a shape. */
export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function floatDtype(name: string, t: RawTensor): WeightDtype {
  const d = weightDtypeOf(t.dtype);
  if (d === null) throw new TypeError(`tensor ${name}: dtype ${t.dtype} is not F64, F32, F16 or BF16`);
  return d;
}

/** The exact values of a float tensor (f64 stays f64; f32, f16 and bf16 widen exactly to f32). */
export function floatValues(name: string, t: RawTensor): Float32Array | Float64Array {
  const d = floatDtype(name, t);
  const buffer = t.data.slice().buffer; // aligned copy
  if (d === "f64") return new Float64Array(buffer);
  if (d === "f32") return new Float32Array(buffer);
  return widenToF32(new Uint16Array(buffer), d);
}

/** A float tensor from f32 or f64 values (bytes copied; the dtype follows the array type). */
export function fromValues(values: Float32Array | Float64Array, shape: readonly number[]): RawTensor {
  const data = new Uint8Array(values.byteLength);
  data.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
  return { dtype: values instanceof Float64Array ? "F64" : "F32", shape: [...shape], data };
}

/** A converted tensor and the largest relative change of any element. */
export interface Converted {
  /** The tensor in the target dtype. */
  readonly tensor: RawTensor;
  /** Largest `|new - old| / |old|` (0 when nothing changed; Infinity when an element overflowed). */
  readonly maxRelativeChange: number;
}

/**
 * Convert a float tensor to `to` with round-to-nearest-even (rounding once). A tensor already in
 * `to` is returned as is (bit-identical); widening is exact; narrowing reports its largest
 * relative change.
 */
export function convertTensor(name: string, t: RawTensor, to: WeightDtype): Converted {
  const from = floatDtype(name, t);
  if (from === to) return { tensor: t, maxRelativeChange: 0 };
  const values = floatValues(name, t);
  if (to === "f64") return { tensor: fromValues(Float64Array.from(values), t.shape), maxRelativeChange: 0 };
  if (to === "f32") {
    if (values instanceof Float32Array) return { tensor: fromValues(values, t.shape), maxRelativeChange: 0 };
    const narrowed = narrowF64(values);
    return { tensor: fromValues(narrowed.values, t.shape), maxRelativeChange: narrowed.maxRelativeChange };
  }
  const narrowed = narrowF32(values, to);
  return {
    tensor: {
      dtype: SAFETENSORS_DTYPE[to],
      shape: [...t.shape],
      data: new Uint8Array(narrowed.bits.buffer, 0, narrowed.bits.byteLength),
    },
    maxRelativeChange: narrowed.maxRelativeChange,
  };
}

/** Index of the first NaN or infinite element of a float tensor, or -1 when all are finite. */
export function firstNonFinite(name: string, t: RawTensor): number {
  const values = floatValues(name, t);
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return i;
  return -1;
}
