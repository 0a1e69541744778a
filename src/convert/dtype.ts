/**
 * Float dtype conversion for checkpoints: to `f32`, `f16` and `bf16` with round-to-nearest-even
 * (ties to even), and exact widening. Narrowing reports the largest relative change of any element.
 *
 * Bit layouts (IEEE 754): f64 `1|11|52`, f32 `1|8|23`, f16 `1|5|10` (bias 15), bf16 `1|8|7` (the
 * upper half of f32). f64 values reach f16/bf16 through f32 rounded to odd, which makes the second
 * rounding exact (f32 keeps more than two extra bits), so every narrowing rounds once.
 *
 * @module
 */

/** Weight dtypes `falcon convert --dtype` writes. */
export const CONVERT_DTYPES = ["f32", "f16", "bf16"] as const;

/** `f32`, `f16` or `bf16`. */
export type ConvertDtype = typeof CONVERT_DTYPES[number];

/** Every float dtype a weight may have: the convert targets, and `f64` (the reference backend's). */
export type WeightDtype = ConvertDtype | "f64";

/** The safetensors dtype tag of a {@linkcode WeightDtype}. */
export const SAFETENSORS_DTYPE: Readonly<Record<WeightDtype, "F64" | "F32" | "F16" | "BF16">> = {
  f64: "F64",
  f32: "F32",
  f16: "F16",
  bf16: "BF16",
};

/** Bytes per element of each {@linkcode WeightDtype}. */
export const DTYPE_BYTES: Readonly<Record<WeightDtype, number>> = { f64: 8, f32: 4, f16: 2, bf16: 2 };

/** A narrowed tensor and how far it moved. */
export interface Narrowed {
  /** The raw little-endian 16-bit words. */
  readonly bits: Uint16Array;
  /** Largest `|new - old| / |old|` over elements with `old != 0` (0 when none changed). */
  readonly maxRelativeChange: number;
  /** Number of finite inputs that overflowed to infinity. */
  readonly overflowed: number;
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** The f16 bits of one f32 value, rounded to nearest even (overflow gives infinity, NaN stays NaN). */
export function f32ToF16Bits(value: number): number {
  f32Scratch[0] = value;
  const x = u32Scratch[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // subnormal f16 (or zero): shift the full significand into 10 bits
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rest > half || (rest === half && (m & 1) === 1)) m += 1;
    return sign | m; // a carry into bit 10 gives the smallest normal, as it should
  }
  const rest = mant & 0x1fff;
  let h = (e << 10) | (mant >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h += 1; // a carry may reach infinity
  return sign | h;
}

/** The f32 value of f16 bits (exact). */
export function f16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** The bf16 bits of one f32 value, rounded to nearest even (NaN stays a quiet NaN). */
export function f32ToBf16Bits(value: number): number {
  f32Scratch[0] = value;
  const x = u32Scratch[0];
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return (x >>> 16) | 0x40;
  const rounded = x + 0x7fff + ((x >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

/** The f32 value of bf16 bits (exact). */
export function bf16BitsToF32(bits: number): number {
  u32Scratch[0] = (bits & 0xffff) << 16;
  return f32Scratch[0];
}

/**
 * `v` rounded to f32 with round-to-odd: an inexact result gets an odd last significand bit. A later
 * round-to-nearest-even to a format with at most 22 significand bits then equals rounding `v` once.
 */
export function roundToOddF32(v: number): number {
  const r = Math.fround(v);
  if (r === v || !Number.isFinite(v) || !Number.isFinite(r)) return r;
  f32Scratch[0] = r;
  if ((u32Scratch[0] & 1) === 0) {
    // step one ulp towards v (sign-magnitude: +1 grows the magnitude)
    u32Scratch[0] += Math.abs(r) > Math.abs(v) ? -1 : 1;
  }
  return f32Scratch[0];
}

/** Narrow f32 or f64 values to `f16` or `bf16` bits (rounding once), reporting the largest relative change. */
export function narrowF32(values: Float32Array | Float64Array, to: "f16" | "bf16"): Narrowed {
  const toBits = to === "f16" ? f32ToF16Bits : f32ToBf16Bits;
  const back = to === "f16" ? f16BitsToF32 : bf16BitsToF32;
  const wide = values instanceof Float64Array;
  const bits = new Uint16Array(values.length);
  let maxRelativeChange = 0;
  let overflowed = 0;
  for (let i = 0; i < values.length; i++) {
    const old = values[i];
    const b = toBits(wide ? roundToOddF32(old) : old);
    bits[i] = b;
    if (!Number.isFinite(old)) continue;
    const now = back(b);
    if (!Number.isFinite(now)) {
      overflowed++;
      maxRelativeChange = Infinity;
    } else if (old !== 0) {
      const rel = Math.abs(now - old) / Math.abs(old);
      if (rel > maxRelativeChange) maxRelativeChange = rel;
    }
  }
  return { bits, maxRelativeChange, overflowed };
}

/** Round f64 values to f32 (nearest even), reporting the largest relative change. */
export function narrowF64(
  values: Float64Array,
): { values: Float32Array; maxRelativeChange: number; overflowed: number } {
  const out = Float32Array.from(values);
  let maxRelativeChange = 0;
  let overflowed = 0;
  for (let i = 0; i < values.length; i++) {
    const old = values[i];
    if (!Number.isFinite(old)) continue;
    if (!Number.isFinite(out[i])) {
      overflowed++;
      maxRelativeChange = Infinity;
    } else if (old !== 0) {
      const rel = Math.abs(out[i] - old) / Math.abs(old);
      if (rel > maxRelativeChange) maxRelativeChange = rel;
    }
  }
  return { values: out, maxRelativeChange, overflowed };
}

/** Widen `f16` or `bf16` bits to f32 values (exact). */
export function widenToF32(bits: Uint16Array, from: "f16" | "bf16"): Float32Array {
  const back = from === "f16" ? f16BitsToF32 : bf16BitsToF32;
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = back(bits[i]);
  return out;
}
