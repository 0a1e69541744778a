/**
 * `createWebGpuBackend()`: the float32 WebGPU implementation of {@linkcode Backend}.
 *
 * Tensors are pooled `GPUBuffer`s; ops are recorded into one command encoder that is submitted on
 * `read`, `sync`, `sumSquares` and host writes; pipelines are compiled once per shader variant.
 *
 * @example
 * ```ts ignore
 * const gpu = await createWebGpuBackend();
 * const a = gpu.fromArray([1, 2, 3, 4], [2, 2]);
 * const c = gpu.zeros([2, 2]);
 * gpu.matmul(c, a, a);
 * console.log(await gpu.read(c)); // Float32Array [7, 10, 15, 22]
 * ```
 *
 * @module
 */

import type { AdamWParams, AdamWSlot, Backend, StepGuard, Tensor } from "../src/rules/backend.ts";
import { shapeSize } from "../src/rules/backend.ts";
import { requestWebGpuDevice, type WebGpuAdapterInfo, type WebGpuDeviceOptions } from "./device.ts";
import { GpuRuntime } from "./runtime.ts";
import { createBlockTensors, disposeTensor, liveTensor } from "./tensor.ts";
import { createDenseOps, type DenseOpsOptions } from "./dense.ts";
import type { MatmulPrecision } from "./shaders/matmul.ts";
import { createFastWeightOps, type FastWeightOpsOptions } from "./fast_weight.ts";

/** A WebGPU backend, with the adapter it runs on and its runtime (for benchmarks and tests). */
export interface WebGpuBackend extends Backend {
  /** The adapter summary. */
  readonly adapterInfo: WebGpuAdapterInfo;
  /** Arithmetic of `matmul`'s products (`f16` only when asked for and the adapter has `shader-f16`). */
  readonly matmulPrecision: MatmulPrecision;
  /** Pipeline cache, encoder and buffer pool. */
  readonly runtime: GpuRuntime;
  /** Tensors in one buffer, at offsets a binding may start at ({@linkcode BLOCK_ALIGNMENT}). */
  zerosBlock(shapes: readonly (readonly number[])[]): Tensor[];
  /** AdamW over several parameters: one dispatch where they (and their gradients, moments) are whole blocks. */
  adamwMany(slots: readonly AdamWSlot[], params: AdamWParams, guard?: StepGuard): void;
  /** Release the pooled buffers and the device. */
  destroy(): void;
}

/**
 * Bytes a tensor of a block ({@linkcode WebGpuBackend.zerosBlock}) starts at a multiple of (or the
 * device's `minStorageBufferOffsetAlignment` where larger): 64 float32 elements, so AdamW over a block
 * finds a tensor's weight decay from `index / 64`.
 */
export const BLOCK_ALIGNMENT = 256;

/** Options of {@linkcode createWebGpuBackend}: the device's, the fast-weight ops' and the dense ops'. */
export interface WebGpuBackendOptions extends WebGpuDeviceOptions, FastWeightOpsOptions, DenseOpsOptions {}

/** Create the float32 WebGPU backend; throws `NoWebGpuAdapterError` when there is no adapter. */
export async function createWebGpuBackend(options: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  const { device, info } = await requestWebGpuDevice(options);
  const rt = new GpuRuntime(device);
  let fastWeightOps, denseOps;
  try {
    fastWeightOps = createFastWeightOps(rt, options);
    denseOps = createDenseOps(rt, options);
  } catch (err) {
    device.destroy();
    throw err;
  }
  return {
    name: "webgpu",
    queued: true,
    dtype: "f32",
    adapterInfo: info,
    matmulPrecision: options.matmulPrecision ?? "f32",
    runtime: rt,
    zeros(shape) {
      shapeSize(shape);
      return rt.tensor(shape, true);
    },
    zerosBlock(shapes) {
      for (const shape of shapes) shapeSize(shape);
      const alignment = Math.max(BLOCK_ALIGNMENT, device.limits.minStorageBufferOffsetAlignment);
      return createBlockTensors(shapes, alignment, device.limits.maxStorageBufferBindingSize, (bytes) => {
        const buffer = rt.pool.acquire(bytes);
        rt.clear(buffer, 0, bytes);
        return buffer;
      });
    },
    fromArray(data, shape) {
      const size = shapeSize(shape);
      if (data.length !== size) {
        throw new RangeError(`fromArray: ${data.length} values do not fit shape [${shape}] (${size})`);
      }
      const t = rt.tensor(shape, false);
      if (size > 0) rt.write(t.buffer, Float32Array.from(data));
      return t;
    },
    async read(t: Tensor) {
      const { buffer, offset } = liveTensor(t);
      if (t.size === 0) return new Float32Array(0);
      return new Float32Array(await rt.readBytes(buffer, t.size * 4, offset));
    },
    readLater(t: Tensor) {
      const { buffer, offset } = liveTensor(t);
      if (t.size === 0) return () => Promise.resolve(new Float32Array(0));
      const fetch = rt.readBytesLater(buffer, t.size * 4, offset);
      return async () => new Float32Array(await fetch());
    },
    copy(dst, src) {
      if (dst.size !== src.size) throw new RangeError(`copy: sizes differ (${dst.size} vs ${src.size})`);
      if (dst.size === 0) return;
      const from = liveTensor(src, "src");
      const to = liveTensor(dst, "dst");
      rt.copy(from.buffer, from.offset, to.buffer, to.offset, dst.size * 4);
    },
    dispose: (t) => disposeTensor(rt.pool, t),
    sync: () => rt.sync(),
    destroy() {
      rt.flush();
      rt.pool.clear();
      device.destroy();
    },
    ...fastWeightOps,
    ...denseOps,
  };
}
