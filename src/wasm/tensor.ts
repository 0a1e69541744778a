/**
 * Tensors of the WASM backend: a shape and a byte address of float32 storage in the shared memory.
 *
 * @module
 */

import { shapeSize, type Tensor } from "../rules/backend.ts";

/** A float32 tensor living in the WASM backend's shared memory. */
export class WasmTensor implements Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Number of elements. */
  readonly size: number;
  /** Always `f32`. */
  readonly dtype = "f32" as const;
  /** Byte address of element 0. */
  readonly ptr: number;
  /** Identity of the owning backend. */
  readonly owner: symbol;
  /** Set by `dispose`. */
  disposed = false;

  /** Wrap storage at `ptr` (allocated by the backend) with `shape`. */
  constructor(shape: readonly number[], ptr: number, owner: symbol) {
    this.shape = [...shape];
    this.size = shapeSize(shape);
    this.ptr = ptr;
    this.owner = owner;
  }
}

/** The storage address of `t`, which must be a live tensor of backend `owner`. */
export function ptrOf(t: Tensor, owner: symbol, name = "tensor"): number {
  if (!(t instanceof WasmTensor) || t.owner !== owner) {
    throw new TypeError(`${name} is a ${t.dtype} tensor of another backend; the WASM backend needs its own`);
  }
  if (t.disposed) throw new TypeError(`${name} was disposed`);
  return t.ptr;
}
