/**
 * Reading and writing the safetensors format (https://github.com/huggingface/safetensors).
 *
 * Layout: an 8-byte little-endian unsigned header length `N`, then `N` bytes of UTF-8 JSON, then
 * the data buffer. The header maps each tensor name to `{dtype, shape, data_offsets: [begin, end]}`
 * (byte offsets into the data buffer) and may hold `__metadata__`, a string-to-string map.
 *
 * The reader treats its input as hostile. It rejects, with an error naming the file and the field:
 * a file shorter than 8 bytes; a header length beyond the file or above
 * {@linkcode MAX_HEADER_BYTES}; a header that is not UTF-8 JSON or not an object; a tensor entry
 * with unknown or missing fields; an unknown dtype; a shape that is not a list of non-negative
 * integers; offsets that are not integers, fall outside the data buffer, are not a multiple of the
 * element size, overlap another tensor or leave gaps (the buffer must be covered exactly); a byte
 * length that does not match dtype and shape; and metadata values that are not strings.
 *
 * @example
 * ```ts
 * import { readSafetensors, writeSafetensors } from "./safetensors.ts";
 * const bytes = writeSafetensors(
 *   { w: { dtype: "F32", shape: [2, 2], data: Float32Array.from([1, 2, 3, 4]) } },
 *   { note: "hello" },
 * );
 * const { tensors, metadata } = readSafetensors(bytes, "example.safetensors");
 * if (tensors.w.data[3] !== 4 || metadata.note !== "hello") throw new Error("round trip failed");
 * ```
 *
 * @module
 */

import { InputError } from "../errors.ts";

/** Largest header the reader accepts (100 MB). */
export const MAX_HEADER_BYTES = 100_000_000;

/** Byte size of each supported dtype. */
export const DTYPE_BYTES = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
} as const;

/** A safetensors dtype name. */
export type SafeDType = keyof typeof DTYPE_BYTES;

/**
 * The typed array that holds each dtype's elements. F16 and BF16 are kept as raw 16-bit patterns
 * (convert with {@linkcode toFloat32}); BOOL as bytes (0 or 1).
 */
export interface DTypeArrays {
  /** Storage of `F64` elements. */
  F64: Float64Array;
  /** Storage of `F32` elements. */
  F32: Float32Array;
  /** Storage of `F16` elements. */
  F16: Uint16Array;
  /** Storage of `BF16` elements. */
  BF16: Uint16Array;
  /** Storage of `I64` elements. */
  I64: BigInt64Array;
  /** Storage of `I32` elements. */
  I32: Int32Array;
  /** Storage of `I16` elements. */
  I16: Int16Array;
  /** Storage of `I8` elements. */
  I8: Int8Array;
  /** Storage of `U64` elements. */
  U64: BigUint64Array;
  /** Storage of `U32` elements. */
  U32: Uint32Array;
  /** Storage of `U16` elements. */
  U16: Uint16Array;
  /** Storage of `U8` elements. */
  U8: Uint8Array;
  /** Storage of `BOOL` elements. */
  BOOL: Uint8Array;
}

/** One tensor: dtype, shape and its elements (a copy, owned by the caller). */
export type SafeTensor = {
  [D in SafeDType]: { readonly dtype: D; readonly shape: readonly number[]; readonly data: DTypeArrays[D] };
}[SafeDType];

/** What {@linkcode readSafetensors} returns. */
export interface SafetensorsFile {
  /** Tensors by name, in the order of their data offsets. */
  readonly tensors: Record<string, SafeTensor>;
  /** The `__metadata__` map (empty when absent). */
  readonly metadata: Record<string, string>;
}

const CONSTRUCTORS: { [D in SafeDType]: { new (buffer: ArrayBuffer): DTypeArrays[D] } } = {
  F64: Float64Array,
  F32: Float32Array,
  F16: Uint16Array,
  BF16: Uint16Array,
  I64: BigInt64Array,
  I32: Int32Array,
  I16: Int16Array,
  I8: Int8Array,
  U64: BigUint64Array,
  U32: Uint32Array,
  U16: Uint16Array,
  U8: Uint8Array,
  BOOL: Uint8Array,
};

/** An error in a safetensors file: names the file and the offending field (bad input: CLI exit 2). */
export class SafetensorsError extends InputError {
  /** Always `SafetensorsError`. */
  override name = "SafetensorsError";
}

function isDType(x: unknown): x is SafeDType {
  return typeof x === "string" && Object.hasOwn(DTYPE_BYTES, x);
}

function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * Serialise tensors and string metadata. Tensors are laid out widest dtype first (in the given
 * order within a dtype size), and the header is padded with spaces so the data buffer starts
 * 8-byte aligned: every tensor's bytes are then aligned to its element size. Throws a RangeError naming the
 * tensor whose data length does not match its shape, or whose dtype is unknown.
 */
export function writeSafetensors(
  tensors: Record<string, SafeTensor>,
  metadata: Record<string, string> = {},
): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== "string") throw new TypeError(`metadata "${k}" must be a string, got ${typeof v}`);
    }
    header.__metadata__ = metadata;
  }
  let offset = 0;
  const parts: Uint8Array[] = [];
  // widest elements first (stable otherwise), so every tensor starts aligned to its element size
  const ordered = Object.entries(tensors).sort(([, a], [, b]) =>
    (DTYPE_BYTES[b.dtype] ?? 0) - (DTYPE_BYTES[a.dtype] ?? 0)
  );
  for (const [name, t] of ordered) {
    if (name === "__metadata__") throw new RangeError(`"__metadata__" is reserved and cannot name a tensor`);
    if (!isDType(t.dtype)) throw new RangeError(`tensor "${name}": unknown dtype "${t.dtype}"`);
    for (const d of t.shape) {
      if (!Number.isInteger(d) || d < 0) {
        throw new RangeError(`tensor "${name}": invalid dimension ${d} in [${t.shape}]`);
      }
    }
    const n = elementCount(t.shape);
    if (t.data.length !== n) {
      throw new RangeError(
        `tensor "${name}": data has ${t.data.length} elements, shape [${t.shape}] needs ${n}`,
      );
    }
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  const encoder = new TextEncoder();
  let headerBytes = encoder.encode(json);
  json += " ".repeat((8 - (headerBytes.length % 8)) % 8);
  headerBytes = encoder.encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let at = 8 + headerBytes.length;
  for (const p of parts) {
    out.set(p, at); // byte copy: little-endian on every platform Deno runs on
    at += p.length;
  }
  return out;
}

/**
 * Parse and validate a safetensors file. `fileName` only labels errors. Every returned array is a
 * fresh copy, aligned for its type.
 */
export function readSafetensors(bytes: Uint8Array, fileName: string): SafetensorsFile {
  const fail = (msg: string): never => {
    throw new SafetensorsError(`${fileName}: ${msg}`);
  };
  if (bytes.length < 8) fail(`file is ${bytes.length} bytes, shorter than the 8-byte header length`);
  const n64 = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n64 > BigInt(MAX_HEADER_BYTES)) fail(`header length ${n64} exceeds the ${MAX_HEADER_BYTES}-byte limit`);
  const n = Number(n64);
  if (8 + n > bytes.length) fail(`header length ${n} runs past the end of the file (${bytes.length} bytes)`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    fail(`header is not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    fail("header is not a JSON object");
  }
  const data = bytes.subarray(8 + n);
  const entries = Object.entries(header as Record<string, unknown>);

  const metadataEntries: [string, string][] = [];
  const spans: { name: string; dtype: SafeDType; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, raw] of entries) {
    if (name === "__metadata__") {
      if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
        fail(`__metadata__ is not an object`);
      }
      for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
        if (typeof v !== "string") fail(`__metadata__.${k} is not a string (got ${JSON.stringify(v)})`);
        metadataEntries.push([k, v as string]);
      }
      continue;
    }
    const where = `tensor "${name}"`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) fail(`${where} is not an object`);
    const entry = raw as Record<string, unknown>;
    for (const key of Object.keys(entry)) {
      if (!["dtype", "shape", "data_offsets"].includes(key)) fail(`${where}: unknown field "${key}"`);
    }
    const { dtype, shape, data_offsets: offsets } = entry;
    if (!isDType(dtype)) {
      fail(`${where}: dtype ${JSON.stringify(dtype)} is not one of ${Object.keys(DTYPE_BYTES).join(", ")}`);
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`${where}: shape ${JSON.stringify(shape)} is not a list of non-negative integers`);
    }
    if (
      !Array.isArray(offsets) || offsets.length !== 2 ||
      !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)
    ) {
      fail(`${where}: data_offsets ${JSON.stringify(offsets)} is not a pair of non-negative integers`);
    }
    const [begin, end] = offsets as number[];
    const size = DTYPE_BYTES[dtype as SafeDType];
    if (begin > end || end > data.length) {
      fail(`${where}: data_offsets [${begin}, ${end}] out of range of the ${data.length}-byte data buffer`);
    }
    if (begin % size !== 0) {
      fail(`${where}: data_offsets begin ${begin} is not a multiple of the ${dtype} size ${size}`);
    }
    const expected = elementCount(shape as number[]) * size;
    if (end - begin !== expected) {
      fail(
        `${where}: data_offsets span ${
          end - begin
        } bytes, dtype ${dtype} and shape [${shape}] need ${expected}`,
      );
    }
    spans.push({ name, dtype: dtype as SafeDType, shape: shape as number[], begin, end });
  }
  spans.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0;
  for (const s of spans) {
    if (s.begin < covered) {
      fail(`tensor "${s.name}": data_offsets [${s.begin}, ${s.end}] overlap another tensor`);
    }
    if (s.begin > covered) {
      fail(`tensor "${s.name}": gap in the data buffer before offset ${s.begin} (covered to ${covered})`);
    }
    covered = s.end;
  }
  if (covered !== data.length) fail(`data buffer has ${data.length - covered} bytes after the last tensor`);

  // fromEntries defines own properties, so even a tensor named "__proto__" stays an ordinary entry
  const tensors: Record<string, SafeTensor> = Object.fromEntries(spans.map((s) => {
    const copy = data.slice(s.begin, s.end).buffer;
    return [s.name, { dtype: s.dtype, shape: s.shape, data: new CONSTRUCTORS[s.dtype](copy) } as SafeTensor];
  }));
  return { tensors, metadata: Object.fromEntries(metadataEntries) };
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/**
 * A floating-point tensor's elements as float32 (F64 is rounded; F16 and BF16 are decoded).
 * Throws a TypeError for integer and BOOL dtypes.
 */
export function toFloat32(t: SafeTensor): Float32Array {
  switch (t.dtype) {
    case "F32":
      return t.data;
    case "F64":
      return Float32Array.from(t.data);
    case "F16":
      return Float32Array.from(t.data, halfToFloat);
    case "BF16": {
      const bits = new Uint32Array(t.data.length);
      for (let i = 0; i < bits.length; i++) bits[i] = t.data[i] << 16;
      return new Float32Array(bits.buffer);
    }
    default:
      throw new TypeError(`toFloat32: dtype ${t.dtype} is not a floating-point type`);
  }
}
