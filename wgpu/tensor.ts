/**
 * Tensors of the `webgpu` backend: a shape and a float32 `GPUBuffer` taken from a size-keyed pool, or
 * a view into a block of tensors laid out in one buffer ({@linkcode createBlockTensors}).
 *
 * @module
 */

import { shapeSize, type Tensor } from "../src/rules/backend.ts";

/** What a kernel binds: a whole buffer, or a range of one (a tensor of a block). */
export type Binding = GPUBuffer | GPUBufferBinding & { readonly offset: number; readonly size: number };

/**
 * One buffer holding several tensors one after another (parameters, their gradients, AdamW's moments),
 * each at an offset that a binding may start at, so that an op over all of them (AdamW, the sum of
 * squared gradients, zeroing the gradients) is one dispatch or one clear over the buffer.
 */
export interface GpuBlock {
  /** The storage. */
  readonly buffer: GPUBuffer;
  /** Its tensors, in layout order. */
  readonly tensors: readonly GpuTensor[];
  /** Float32 elements from the start of the buffer to the end of the last tensor's reserved bytes. */
  readonly elements: number;
  /** Bytes every tensor's offset is a multiple of. */
  readonly alignment: number;
  /** Tensors of the block not disposed yet; the buffer goes back to the pool when none is left. */
  live: number;
}

/** A `webgpu` tensor: float32 storage in a `GPUBuffer` (row-major), whole or a view into a block. */
export class GpuTensor implements Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Number of elements. */
  readonly size: number;
  /** Always `f32`. */
  readonly dtype = "f32" as const;
  /** The storage; at least `4 * size` bytes from {@linkcode GpuTensor.offset} (pooled buffers may be larger). */
  buffer: GPUBuffer;
  /** Byte offset of the first element in `buffer` (0 unless the tensor is a view into a block). */
  readonly offset: number;
  /** The block the tensor is a view into, or null for a tensor of its own buffer. */
  readonly block: GpuBlock | null;
  /** Bytes from `offset` that belong to the tensor (up to the next tensor of its block): a clear may cover them. */
  readonly reserved: number;
  /** Position in its block's `tensors` (-1 for a tensor of its own buffer). */
  readonly index: number;
  /** What a kernel binds for this tensor (one object per tensor, so bind groups can be cached by it). */
  readonly binding: Binding;
  /** Set once {@linkcode GpuBufferPool.release} took the buffer back. */
  disposed = false;

  /** Wrap `buffer` with `shape`; a view into `block` at byte `offset` with `reserved` bytes when given. */
  constructor(
    shape: readonly number[],
    buffer: GPUBuffer,
    view?: {
      readonly block: GpuBlock;
      readonly offset: number;
      readonly reserved: number;
      readonly index: number;
    },
  ) {
    this.shape = [...shape];
    this.size = shapeSize(shape);
    this.buffer = buffer;
    this.offset = view?.offset ?? 0;
    this.block = view?.block ?? null;
    this.reserved = view?.reserved ?? buffer.size;
    this.index = view?.index ?? -1;
    this.binding = view ? { buffer, offset: view.offset, size: pooledBytes(this.size) } : buffer;
  }
}

/**
 * The buffer of a tensor that must belong to the `webgpu` backend, still be alive and own its buffer
 * (ops that bind whole buffers; a view into a block is a TypeError, see {@linkcode gpuBinding}).
 */
export function gpuBuffer(t: Tensor, name = "tensor"): GPUBuffer {
  const tensor = liveTensor(t, name);
  if (tensor.block) {
    throw new TypeError(
      `${name} (shape [${t.shape}]) is a view into a block of tensors at byte ${tensor.offset}; this op binds whole buffers`,
    );
  }
  return tensor.buffer;
}

/** What to bind for a tensor that must belong to the `webgpu` backend and still be alive (whole or a view). */
export function gpuBinding(t: Tensor, name = "tensor"): Binding {
  return liveTensor(t, name).binding;
}

/** `t` as a live `webgpu` tensor, or a TypeError naming it. */
export function liveTensor(t: Tensor, name = "tensor"): GpuTensor {
  if (!(t instanceof GpuTensor)) {
    throw new TypeError(
      `${name} is a ${t.dtype} tensor of another backend; the webgpu backend needs its own`,
    );
  }
  if (t.disposed) throw new TypeError(`${name} (shape [${t.shape}]) was disposed`);
  return t;
}

/**
 * Give a tensor's buffer back to `pool`, once; later uses of the tensor throw ({@linkcode gpuBuffer}).
 * A view into a block gives the block's buffer back with the last of its tensors.
 */
export function disposeTensor(pool: GpuBufferPool, t: Tensor): void {
  if (!(t instanceof GpuTensor) || t.disposed) return;
  t.disposed = true;
  if (!t.block) pool.release(t.buffer);
  else if (--t.block.live === 0) pool.release(t.block.buffer);
}

/**
 * Zero tensors of `shapes` laid out one after another in blocks of `buffers` from `acquire` (zeroed by
 * the caller): each starts at a multiple of `alignment` bytes and a block holds at most `limit` bytes
 * (a tensor larger than that gets a block of its own). In the order of `shapes`.
 */
export function createBlockTensors(
  shapes: readonly (readonly number[])[],
  alignment: number,
  limit: number,
  acquire: (bytes: number) => GPUBuffer,
): GpuTensor[] {
  if (!Number.isInteger(alignment) || alignment < 16 || alignment % 16 !== 0) {
    throw new RangeError(
      `createBlockTensors: alignment must be a positive multiple of 16 bytes, got ${alignment}`,
    );
  }
  const align = (bytes: number) => Math.ceil(bytes / alignment) * alignment;
  const out: GpuTensor[] = [];
  let start = 0;
  while (start < shapes.length) {
    // the longest run of shapes from `start` that fits in `limit` bytes (at least one)
    const offsets: number[] = [];
    let end = 0;
    let i = start;
    while (i < shapes.length) {
      const next = align(end) + pooledBytes(shapeSize(shapes[i]));
      if (i > start && align(next) > limit) break;
      offsets.push(align(end));
      end = next;
      i++;
    }
    const total = align(end);
    const buffer = acquire(total);
    const tensors: GpuTensor[] = [];
    const block: GpuBlock = { buffer, tensors, elements: total / 4, alignment, live: i - start };
    offsets.forEach((offset, k) => {
      const reserved = (k + 1 < offsets.length ? offsets[k + 1] : total) - offset;
      tensors.push(new GpuTensor(shapes[start + k], buffer, { block, offset, reserved, index: k }));
    });
    out.push(...tensors);
    start = i;
  }
  return out;
}

/** Bytes a pooled buffer of `size` float32 elements has: rounded up to 16, at least 16. */
export function pooledBytes(size: number): number {
  return Math.max(16, Math.ceil((size * 4) / 16) * 16);
}

/**
 * Storage buffers pooled by byte size; freed buffers are reused by later allocations of that size.
 * A reuse takes the free buffer of that size made first, so the buffers handed out depend only on which
 * are free, not on the order they came back: a training step that acquires and releases the same
 * sequence every step gets the same buffers every step, and its bind groups hit the cache.
 */
export class GpuBufferPool {
  readonly #device: GPUDevice;
  readonly #onRelease: ((buffer: GPUBuffer) => void) | null;
  /** Free buffers by byte size with their creation numbers, the one made first last (so `pop()` takes it). */
  readonly #free = new Map<number, { buffers: GPUBuffer[]; orders: number[] }>();
  /** Creation order of the buffers this pool has seen. */
  readonly #order = new WeakMap<GPUBuffer, number>();
  #made = 0;

  /** A pool allocating from `device`; `onRelease` is told of every buffer given back. */
  constructor(device: GPUDevice, onRelease?: (buffer: GPUBuffer) => void) {
    this.#device = device;
    this.#onRelease = onRelease ?? null;
  }

  /** A storage buffer of `bytes` bytes (contents undefined when reused). */
  acquire(bytes: number): GPUBuffer {
    const list = this.#free.get(bytes);
    if (list && list.buffers.length > 0) {
      list.orders.pop();
      return list.buffers.pop()!;
    }
    const buffer = this.#device.createBuffer({
      size: bytes,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
    this.#order.set(buffer, this.#made++);
    return buffer;
  }

  /** Give a buffer back for reuse. */
  release(buffer: GPUBuffer): void {
    this.#onRelease?.(buffer);
    let order = this.#order.get(buffer);
    if (order === undefined) {
      order = this.#made++;
      this.#order.set(buffer, order);
    }
    let list = this.#free.get(buffer.size);
    if (!list) this.#free.set(buffer.size, list = { buffers: [], orders: [] });
    // keep the lists in descending creation order: the first position whose buffer was made earlier
    const { buffers, orders } = list;
    let lo = 0;
    let hi = orders.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (orders[mid] > order) lo = mid + 1;
      else hi = mid;
    }
    buffers.splice(lo, 0, buffer);
    orders.splice(lo, 0, order);
  }

  /** Destroy every pooled buffer. */
  clear(): void {
    for (const list of this.#free.values()) for (const b of list.buffers) b.destroy();
    this.#free.clear();
  }
}
