/**
 * Scratch tensors shared by every layer for one batch shape. A layer borrows a named buffer for
 * the span of one op sequence and must not hold it across another layer's use of the same name.
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";

/** Named scratch tensors, allocated on first use and reused while the shape stays the same. */
export class Workspace {
  readonly #backend: Backend;
  readonly #buffers = new Map<string, Tensor>();

  /** Scratch space on `backend`. */
  constructor(backend: Backend) {
    this.#backend = backend;
  }

  /** The buffer called `name` with `shape` (contents undefined unless `zero`). */
  get(name: string, shape: readonly number[], zero = false): Tensor {
    let t = this.#buffers.get(name);
    if (!t || t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      if (t) this.#backend.dispose(t);
      t = this.#backend.zeros(shape);
      this.#buffers.set(name, t);
    } else if (zero) {
      this.#backend.fill(t, 0);
    }
    return t;
  }

  /** Release every buffer. */
  dispose(): void {
    for (const t of this.#buffers.values()) this.#backend.dispose(t);
    this.#buffers.clear();
  }
}
