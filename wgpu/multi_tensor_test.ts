/**
 * Tensors of a block (`zerosBlock`) and the ops over them (`wgpu/multi_tensor.ts`): AdamW over every
 * parameter and the sum of squared gradients are one dispatch each and give bit for bit what one
 * dispatch per tensor gives; zeroing a block's tensors one by one is one clear.
 */

import assert from "node:assert/strict";
import type { AdamWParams, AdamWSlot, StepGuard, Tensor } from "../src/rules/backend.ts";
import { Rng } from "../src/testing/compare.ts";
import { gpuTest } from "./_test_util.ts";
import type { WebGpuBackend } from "./backend.ts";
import { gpuBuffer, type GpuTensor } from "./tensor.ts";

/** Sizes that are not multiples of a workgroup, a lane or the block alignment. */
const SHAPES = [[3, 5], [7], [64], [2, 33], [300]];

/** Calls of `name` on `proto` while `body` runs (the calls still happen). */
async function counting(proto: object, name: string, body: () => Promise<void> | void): Promise<number> {
  const target = proto as Record<string, (...args: unknown[]) => unknown>;
  const original = target[name];
  let calls = 0;
  target[name] = function (this: unknown, ...args: unknown[]) {
    calls++;
    return original.apply(this, args);
  };
  try {
    await body();
  } finally {
    target[name] = original;
  }
  return calls;
}

/** Random values (float32-rounded normals of `seed`) into each tensor, in order. */
function fillRandom(gpu: WebGpuBackend, tensors: readonly Tensor[], seed: number, scale = 1): void {
  const rng = new Rng(seed);
  for (const t of tensors) {
    const host = gpu.fromArray(rng.normals(t.size, scale), t.shape);
    gpu.copy(t, host);
    gpu.dispose(host);
  }
}

async function readAll(gpu: WebGpuBackend, tensors: readonly Tensor[]): Promise<Float32Array[]> {
  return await Promise.all(tensors.map(async (t) => new Float32Array(await gpu.read(t))));
}

/** Parameters, gradients and moments in blocks (`block`) or one buffer each, with the same values. */
function slotsOf(gpu: WebGpuBackend, block: boolean): AdamWSlot[] {
  const make = () => block ? gpu.zerosBlock(SHAPES) : SHAPES.map((s) => gpu.zeros(s));
  const [params, grads, ms, vs] = [make(), make(), make(), make()];
  fillRandom(gpu, params, 1);
  fillRandom(gpu, grads, 2, 0.1);
  return params.map((param, i) => ({ param, grad: grads[i], m: ms[i], v: vs[i], decay: i % 2 === 0 }));
}

const flat = (slots: readonly AdamWSlot[]) => slots.flatMap((s) => [s.param, s.m, s.v]);

gpuTest("zerosBlock lays tensors out one after another at aligned offsets, starting at zero", async (gpu) => {
  const tensors = gpu.zerosBlock(SHAPES) as GpuTensor[];
  const block = tensors[0].block!;
  assert.ok(tensors.every((t) => t.block === block && t.buffer === block.buffer));
  for (const [i, t] of tensors.entries()) {
    assert.deepEqual(t.shape, SHAPES[i]);
    assert.equal(t.offset % 256, 0, `tensor ${i} at byte ${t.offset}`);
    assert.ok(t.reserved >= 4 * t.size, `tensor ${i} reserves ${t.reserved} bytes`);
    if (i > 0) assert.equal(t.offset, tensors[i - 1].offset + tensors[i - 1].reserved);
  }
  assert.ok((await readAll(gpu, tensors)).every((x) => x.every((v) => v === 0)), "a block starts zeroed");
  assert.throws(() => gpuBuffer(tensors[2], "w"), TypeError, "an op binding whole buffers refuses a view");
});

gpuTest(
  "views of a block round-trip, copy, and stay right when one op binds several of them",
  async (gpu) => {
    const tensors = gpu.zerosBlock(SHAPES);
    fillRandom(gpu, tensors, 3);
    const expected = new Rng(3);
    const values = await readAll(gpu, tensors);
    for (const [i, t] of tensors.entries()) {
      assert.deepEqual(values[i], Float32Array.from(expected.normals(t.size, 1)), `tensor ${i}`);
    }
    // c = a + b with all three in one block: the written view excludes the others, so they are copies
    const [a, b, c] = gpu.zerosBlock([[5], [5], [5]]);
    gpu.copy(a, gpu.fromArray([1, 2, 3, 4, 5], [5]));
    gpu.copy(b, gpu.fromArray([10, 20, 30, 40, 50], [5]));
    gpu.add(c, a, b);
    gpu.add(a, a, c);
    assert.deepEqual(Array.from(await gpu.read(c)), [11, 22, 33, 44, 55]);
    assert.deepEqual(Array.from(await gpu.read(a)), [12, 24, 36, 48, 60]);
    assert.deepEqual(Array.from(await gpu.read(b)), [10, 20, 30, 40, 50]);
  },
);

gpuTest("a block's buffer goes back to the pool with the last of its tensors", (gpu) => {
  const tensors = gpu.zerosBlock([[100], [3]]) as GpuTensor[];
  const buffer = tensors[0].buffer;
  gpu.dispose(tensors[0]);
  gpu.dispose(tensors[0]); // twice: still one release
  const other = gpu.runtime.pool.acquire(buffer.size);
  assert.notEqual(other, buffer, "the block is still in use by its second tensor");
  gpu.runtime.pool.release(other);
  gpu.dispose(tensors[1]);
  const reused = gpu.runtime.pool.acquire(buffer.size);
  assert.equal(reused, buffer);
  gpu.runtime.pool.release(reused);
  return Promise.resolve();
});

gpuTest("zeroing the tensors of a block one by one records one clear", async (gpu) => {
  const tensors = gpu.zerosBlock(SHAPES);
  fillRandom(gpu, tensors, 4);
  const loose = gpu.zeros([9]);
  gpu.fill(loose, 1);
  gpu.runtime.flush();
  const clears = await counting(GPUCommandEncoder.prototype, "clearBuffer", () => {
    for (const t of tensors) gpu.fill(t, 0);
    gpu.fill(loose, 0);
    gpu.runtime.flush();
  });
  assert.equal(clears, 2, "one clear for the block, one for the tensor of its own buffer");
  const values = await readAll(gpu, [...tensors, loose]);
  assert.ok(values.every((x) => x.every((v) => v === 0)), "every tensor is zero");
});

gpuTest(
  "AdamW over blocks is one dispatch and bit for bit one adamw per tensor (plain and guarded)",
  async (gpu) => {
    for (const guarded of [false, true]) {
      const blocked = slotsOf(gpu, true);
      const separate = slotsOf(gpu, false);
      const initial = await readAll(gpu, blocked.map((s) => s.param));
      const guards = [0, 1].map((): StepGuard | undefined => {
        if (!guarded) return undefined;
        const stats = gpu.fromArray([3, 4], [2]);
        return { stats, halted: gpu.zeros([1]), normScale: 0.5, clipNorm: 0.5 };
      });
      for (let step = 1; step <= 3; step++) {
        const p: AdamWParams = {
          lr: 0.01 * step,
          beta1: 0.9,
          beta2: 0.95,
          eps: 1e-8,
          weightDecay: 0.1,
          step,
          gradScale: 0.25,
        };
        gpu.runtime.flush();
        const dispatches = await counting(GPUComputePassEncoder.prototype, "dispatchWorkgroups", () => {
          gpu.adamwMany(blocked, p, guards[0]);
          gpu.runtime.flush();
        });
        assert.equal(dispatches, 1, `guarded=${guarded} step ${step}`);
        for (const s of separate) gpu.adamw(s.param, s.grad, s.m, s.v, p, s.decay, guards[1]);
      }
      const [a, b] = [await readAll(gpu, flat(blocked)), await readAll(gpu, flat(separate))];
      for (let i = 0; i < a.length; i++) assert.deepEqual(a[i], b[i], `guarded=${guarded} tensor ${i}`);
      const updated = await readAll(gpu, blocked.map((s) => s.param));
      assert.ok(updated.every((x, i) => x.some((v, j) => v !== initial[i][j])), "every parameter moved");
    }
  },
);

gpuTest("guarded AdamW over blocks changes nothing once the statistics are not finite", async (gpu) => {
  const slots = slotsOf(gpu, true);
  const before = await readAll(gpu, flat(slots));
  const guard: StepGuard = {
    stats: gpu.fromArray([NaN, 4], [2]),
    halted: gpu.zeros([1]),
    normScale: 1,
    clipNorm: 1,
  };
  const p = { lr: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 1, gradScale: 1 };
  gpu.adamwMany(slots, p, guard);
  assert.deepEqual(Array.from(await gpu.read(guard.halted)), [1]);
  const after = await readAll(gpu, flat(slots));
  for (let i = 0; i < after.length; i++) assert.deepEqual(after[i], before[i], `tensor ${i}`);
});

gpuTest("adamwMany over tensors that are not whole blocks updates each as adamw does", async (gpu) => {
  const blocked = slotsOf(gpu, true);
  const separate = slotsOf(gpu, false);
  const p = { lr: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 2, gradScale: 1 };
  // a part of the block only: one dispatch per slot, and the other slots unchanged
  gpu.adamwMany(blocked.slice(1, 3), p);
  for (const s of separate.slice(1, 3)) gpu.adamw(s.param, s.grad, s.m, s.v, p, s.decay);
  const [a, b] = [await readAll(gpu, flat(blocked)), await readAll(gpu, flat(separate))];
  for (let i = 0; i < a.length; i++) assert.deepEqual(a[i], b[i], `tensor ${i}`);
  assert.throws(() => gpu.adamwMany(blocked, { ...p, step: 0 }), RangeError);
});

gpuTest(
  "accumulateSum over the tensors of a block is one partial-sum dispatch and the same sum",
  async (gpu) => {
    const blocked = gpu.zerosBlock(SHAPES);
    const separate = SHAPES.map((s) => gpu.zeros(s));
    fillRandom(gpu, blocked, 5);
    fillRandom(gpu, separate, 5);
    for (const squares of [true, false]) {
      const stats = [gpu.fromArray([0.5, 0.25], [2]), gpu.fromArray([0.5, 0.25], [2])];
      gpu.runtime.flush();
      const dispatches = await counting(GPUComputePassEncoder.prototype, "dispatchWorkgroups", () => {
        gpu.accumulateSum(stats[0], 1, blocked, squares);
        gpu.runtime.flush();
      });
      assert.equal(dispatches, 2, "partial sums, then the finishing pass");
      gpu.accumulateSum(stats[1], 1, separate, squares);
      const [a, b] = await readAll(gpu, stats);
      assert.deepEqual(a, b, `squares=${squares}`);
      let expected = 0.25;
      for (const x of await readAll(gpu, separate)) for (const v of x) expected += squares ? v * v : v;
      assert.ok(
        Math.abs(a[1] - expected) <= 1e-5 * Math.max(1, Math.abs(expected)),
        `${a[1]} vs ${expected}`,
      );
    }
    // a subset in layout order is summed in one dispatch too, and equals the separate tensors' sum
    const stats = [gpu.zeros([2]), gpu.zeros([2])];
    gpu.accumulateSum(stats[0], 0, [blocked[0], blocked[3]], true);
    gpu.accumulateSum(stats[1], 0, [separate[0], separate[3]], true);
    const [a, b] = await readAll(gpu, stats);
    assert.deepEqual(a, b);
  },
);
