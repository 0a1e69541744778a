/**
 * Float64 tensors of the reference backend: a shape and a `Float64Array`.
 *
 * @module
 */

import { shapeSize, type Tensor } from "../backend.ts";

/** A reference-backend tensor: plain float64 storage on the host. */
export class RefTensor implements Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Number of elements. */
  readonly size: number;
  /** Always `f64`. */
  readonly dtype = "f64" as const;
  /** The elements, row-major. */
  readonly data: Float64Array;

  /** Wrap `data` (or allocate zeros) with `shape`. */
  constructor(shape: readonly number[], data?: Float64Array) {
    this.shape = [...shape];
    this.size = shapeSize(shape);
    if (data && data.length !== this.size) {
      throw new RangeError(`data of length ${data.length} does not fit shape [${shape}] (${this.size})`);
    }
    this.data = data ?? new Float64Array(this.size);
  }
}

/** The storage of a tensor that must belong to the reference backend. */
export function refData(t: Tensor, name = "tensor"): Float64Array {
  if (!(t instanceof RefTensor)) {
    throw new TypeError(
      `${name} is a ${t.dtype} tensor of another backend; the reference backend needs its own`,
    );
  }
  return t.data;
}
