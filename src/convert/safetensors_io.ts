/**
 * The safetensors container as `falcon convert` moves it: the validating reader and the writer of
 * `src/checkpoint/safetensors.ts`, with tensors as raw bytes ({@linkcode RawTensor}) so layout
 * changes are byte copies and an unchanged dtype keeps every bit.
 *
 * @module
 */

import {
  DTYPE_BYTES,
  readSafetensors,
  type SafeDType,
  type SafeTensor,
  writeSafetensors,
} from "../checkpoint/safetensors.ts";
import { asCheckpointError } from "./errors.ts";
import type { RawTensor } from "./tensor_set.ts";

/** Bytes per element of every safetensors dtype. */
export const ELEMENT_BYTES: Readonly<Record<string, number>> = DTYPE_BYTES;

/** A decoded safetensors file. */
export interface SafetensorsContents {
  /** Tensors in data order. */
  readonly tensors: Map<string, RawTensor>;
  /** `__metadata__` (empty when absent). */
  readonly metadata: Record<string, string>;
}

/** The bytes of a typed array (a view, no copy). */
function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** A raw tensor from a decoded one (a view of its fresh copy). */
export function rawFromSafe(t: SafeTensor): RawTensor {
  return { dtype: t.dtype, shape: [...t.shape], data: bytesOf(t.data) };
}

/** A decoded tensor from a raw one (bytes copied into an aligned typed array). */
export function safeFromRaw(name: string, t: RawTensor): SafeTensor {
  const size = ELEMENT_BYTES[t.dtype];
  if (size === undefined) throw new RangeError(`tensor ${name}: unknown dtype ${t.dtype}`);
  const buffer = t.data.slice().buffer;
  const n = t.data.length / size;
  const arrays: Record<SafeDType, () => ArrayBufferView> = {
    F64: () => new Float64Array(buffer, 0, n),
    F32: () => new Float32Array(buffer, 0, n),
    F16: () => new Uint16Array(buffer, 0, n),
    BF16: () => new Uint16Array(buffer, 0, n),
    I64: () => new BigInt64Array(buffer, 0, n),
    I32: () => new Int32Array(buffer, 0, n),
    I16: () => new Int16Array(buffer, 0, n),
    I8: () => new Int8Array(buffer, 0, n),
    U64: () => new BigUint64Array(buffer, 0, n),
    U32: () => new Uint32Array(buffer, 0, n),
    U16: () => new Uint16Array(buffer, 0, n),
    U8: () => new Uint8Array(buffer, 0, n),
    BOOL: () => new Uint8Array(buffer, 0, n),
  };
  return {
    dtype: t.dtype,
    shape: [...t.shape],
    data: arrays[t.dtype as SafeDType](),
  } as unknown as SafeTensor;
}

/**
 * Decode and validate a safetensors file read from `path` (named in every error); throws a
 * `CheckpointError` for a hostile or corrupt file.
 */
export function decodeSafetensors(bytes: Uint8Array, path: string): SafetensorsContents {
  const file = asCheckpointError(path, () => readSafetensors(bytes, path));
  const tensors = new Map<string, RawTensor>();
  for (const [name, t] of Object.entries(file.tensors)) tensors.set(name, rawFromSafe(t));
  return { tensors, metadata: { ...file.metadata } };
}

/** Encode tensors (in the given order) and metadata as safetensors bytes (deterministic). */
export function encodeSafetensors(
  tensors: Iterable<[string, RawTensor]>,
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const record: Record<string, SafeTensor> = {};
  for (const [name, t] of tensors) {
    if (Object.hasOwn(record, name)) throw new RangeError(`tensor ${name} appears twice`);
    Object.defineProperty(record, name, { value: safeFromRaw(name, t), enumerable: true, writable: true });
  }
  return writeSafetensors(record, { ...metadata });
}
