/**
 * Tensors of the `webgpu` backend: a shape and a float32 `GPUBuffer` taken from a size-keyed pool.
 *
 * @module
 */

import { shapeSize, type Tensor } from "../src/rules/backend.ts";

/** A `webgpu` tensor: float32 storage in a `GPUBuffer` (row-major). */
export class GpuTensor implements Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Number of elements. */
  readonly size: number;
  /** Always `f32`. */
  readonly dtype = "f32" as const;
  /** The storage; at least `4 * size` bytes (pooled buffers may be larger). */
  buffer: GPUBuffer;
  /** Set once {@linkcode GpuBufferPool.release} took the buffer back. */
  disposed = false;

  /** Wrap `buffer` with `shape`. */
  constructor(shape: readonly number[], buffer: GPUBuffer) {
    this.shape = [...shape];
    this.size = shapeSize(shape);
    this.buffer = buffer;
  }
}

/** The buffer of a tensor that must belong to the `webgpu` backend and still be alive. */
export function gpuBuffer(t: Tensor, name = "tensor"): GPUBuffer {
  if (!(t instanceof GpuTensor)) {
    throw new TypeError(
      `${name} is a ${t.dtype} tensor of another backend; the webgpu backend needs its own`,
    );
  }
  if (t.disposed) throw new TypeError(`${name} (shape [${t.shape}]) was disposed`);
  return t.buffer;
}

/** Give a tensor's buffer back to `pool`, once; later uses of the tensor throw ({@linkcode gpuBuffer}). */
export function disposeTensor(pool: GpuBufferPool, t: Tensor): void {
  if (t instanceof GpuTensor && !t.disposed) {
    t.disposed = true;
    pool.release(t.buffer);
  }
}

/** Bytes a pooled buffer of `size` float32 elements has: rounded up to 16, at least 16. */
export function pooledBytes(size: number): number {
  return Math.max(16, Math.ceil((size * 4) / 16) * 16);
}

/** Storage buffers pooled by byte size; freed buffers are reused by later allocations of that size. */
export class GpuBufferPool {
  readonly #device: GPUDevice;
  readonly #free = new Map<number, GPUBuffer[]>();

  /** A pool allocating from `device`. */
  constructor(device: GPUDevice) {
    this.#device = device;
  }

  /** A storage buffer of `bytes` bytes (contents undefined when reused). */
  acquire(bytes: number): GPUBuffer {
    const list = this.#free.get(bytes);
    const reused = list?.pop();
    if (reused) return reused;
    return this.#device.createBuffer({
      size: bytes,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
  }

  /** Give a buffer back for reuse. */
  release(buffer: GPUBuffer): void {
    const list = this.#free.get(buffer.size);
    if (list) list.push(buffer);
    else this.#free.set(buffer.size, [buffer]);
  }

  /** Destroy every pooled buffer. */
  clear(): void {
    for (const list of this.#free.values()) for (const b of list) b.destroy();
    this.#free.clear();
  }
}
