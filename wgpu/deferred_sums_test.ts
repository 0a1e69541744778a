/**
 * Slice sums into gradients of a block, held back (`wgpu/deferred_sums.ts`): several split-K weight
 * gradients and row-sliced RMSNorm weight gradients give bit for bit what one sum per op gives, in one
 * summing dispatch, and a held sum is recorded before anything else touches its gradient.
 */

import assert from "node:assert/strict";
import type { Tensor } from "../src/rules/backend.ts";
import { Rng } from "../src/testing/compare.ts";
import { callsDuring, gpuTest } from "./_test_util.ts";
import type { WebGpuBackend } from "./backend.ts";

/** Dispatches recorded (and submitted) while `body` runs. */
function dispatches(gpu: WebGpuBackend, body: () => void): number {
  return callsDuring(gpu, GPUComputePassEncoder.prototype, "dispatchWorkgroups", body);
}

/** `x^T dy` weight gradients (K = 600 rows: split-K) and an RMSNorm weight gradient into `grads`. */
function backward(gpu: WebGpuBackend, grads: Tensor[], inputs: Tensor[]): void {
  const [x, dy, dOut, xn, rstd, dx] = inputs;
  gpu.matmul(grads[0], x, dy, { transA: true, accumulate: true });
  gpu.matmul(grads[1], dy, x, { transA: true, accumulate: true });
  gpu.rmsNormBackward(dx, grads[2], dOut, xn, null, rstd);
  gpu.matmul(grads[3], x, x, { transA: true }); // overwrite, not accumulate
}

gpuTest(
  "held slice sums into a block's gradients are one dispatch and bit for bit the sums one by one",
  async (gpu) => {
    const rng = new Rng(11);
    const inputs = [[600, 16], [600, 16], [600, 24], [600, 24], [600], [600, 24]].map((shape) =>
      gpu.fromArray(rng.normals(shape.reduce((a, b) => a * b, 1), 1), shape)
    );
    const shapes = [[16, 16], [16, 16], [24], [16, 16]];
    const start = shapes.map((s) => rng.normals(s.reduce((a, b) => a * b, 1), 1));
    const blocked = gpu.zerosBlock(shapes);
    const separate = shapes.map((s) => gpu.zeros(s));
    for (const grads of [blocked, separate]) {
      grads.forEach((g, i) => gpu.copy(g, gpu.fromArray(start[i], shapes[i])));
    }
    gpu.runtime.flush();
    const heldCount = dispatches(gpu, () => backward(gpu, blocked, inputs));
    const dxHeld = new Float32Array(await gpu.read(inputs[5]));
    gpu.copy(inputs[5], gpu.zeros([600, 24]));
    const oneByOne = dispatches(gpu, () => backward(gpu, separate, inputs));
    assert.equal(heldCount, oneByOne - 3, "four slice sums became one dispatch");
    for (let i = 0; i < shapes.length; i++) {
      assert.deepEqual(
        new Float32Array(await gpu.read(blocked[i])),
        new Float32Array(await gpu.read(separate[i])),
        `gradient ${i}`,
      );
    }
    assert.ok(dxHeld.some((v) => v !== 0), "the input gradient was computed");
  },
);

gpuTest(
  "a held slice sum is recorded before a later op on its gradient, and before a sum into the same one",
  async (gpu) => {
    const rng = new Rng(12);
    const x = gpu.fromArray(rng.normals(600 * 8, 1), [600, 8]);
    const [dW, other] = gpu.zerosBlock([[8, 8], [8, 8]]);
    const [plain, plainOther] = [gpu.zeros([8, 8]), gpu.zeros([8, 8])];
    const ones = gpu.fromArray(new Array(64).fill(1), [8, 8]);
    for (const [w, o] of [[dW, other], [plain, plainOther]]) {
      gpu.matmul(w, x, x, { transA: true, accumulate: true }); // split-K: held for the block
      gpu.matmul(w, x, x, { transA: true, accumulate: true }); // the same gradient again
      gpu.axpy(w, ones, 0.5); // a plain op on it
      gpu.matmul(o, x, x, { transA: true });
    }
    assert.deepEqual(new Float32Array(await gpu.read(dW)), new Float32Array(await gpu.read(plain)));
    assert.deepEqual(new Float32Array(await gpu.read(other)), new Float32Array(await gpu.read(plainOther)));
    const values = new Float32Array(await gpu.read(dW));
    for (let i = 0; i < 8; i++) {
      assert.ok(values[i * 9] > 0.5, `diagonal ${i}: 2 x_i.x_i + 0.5 = ${values[i * 9]}`);
    }
  },
);

gpuTest(
  "an arena too small for a pass's held sums grows, so the next pass holds all of them, bit for bit",
  async (gpu) => {
    const rng = new Rng(13);
    // 600 x 300 input: each x^T x gradient [300, 300] has 4 slices of partials, 1.44 MB (the first
    // arena); six of them need 8.6 MB, so the first pass runs a sum per gradient, then the arena grows
    const x = gpu.fromArray(rng.normals(600 * 300, 1), [600, 300]);
    const shapes = Array.from({ length: 6 }, () => [300, 300]);
    const pass = (grads: Tensor[]) => {
      for (const g of grads) gpu.matmul(g, x, x, { transA: true, accumulate: true });
    };
    const first = gpu.zerosBlock(shapes);
    const second = gpu.zerosBlock(shapes);
    gpu.runtime.flush();
    const firstCount = dispatches(gpu, () => pass(first));
    const secondCount = dispatches(gpu, () => pass(second));
    assert.equal(firstCount, 12, "the first pass: six split-K products and a sum for each");
    assert.equal(secondCount, 7, "the second pass: six split-K products and one sum");
    for (let i = 0; i < shapes.length; i++) {
      assert.deepEqual(
        new Float32Array(await gpu.read(first[i])),
        new Float32Array(await gpu.read(second[i])),
      );
    }
  },
);

gpuTest(
  "held slice sums stay right when the periodic flush falls while a sum's partials are produced",
  async (gpu) => {
    // a flush runs the held sums and starts the arena over; the sum being produced then must keep its
    // partials (it once did not: the next sum's partials overwrote them and its gradient came out wrong)
    const rng = new Rng(12);
    const inputs = [[600, 16], [600, 16], [600, 24], [600, 24], [600], [600, 24]].map((shape) =>
      gpu.fromArray(rng.normals(shape.reduce((a, b) => a * b, 1), 1), shape)
    );
    const shapes = [[16, 16], [16, 16], [24], [16, 16]];
    const separate = shapes.map((s) => gpu.zeros(s));
    backward(gpu, separate, inputs);
    const want = await Promise.all(separate.map(async (g) => new Float32Array(await gpu.read(g))));
    const [a, b, c] = [0, 1, 2].map(() => gpu.fromArray(rng.normals(8, 1), [8]));
    // FLUSH_DISPATCHES (96) after a flush: pads that put the flush at each dispatch of the backward
    for (let pad = 86; pad <= 95; pad++) {
      const blocked = gpu.zerosBlock(shapes);
      gpu.runtime.flush();
      for (let i = 0; i < pad; i++) gpu.add(c, a, b);
      backward(gpu, blocked, inputs);
      for (let i = 0; i < shapes.length; i++) {
        assert.deepEqual(new Float32Array(await gpu.read(blocked[i])), want[i], `pad ${pad}, gradient ${i}`);
      }
      blocked.forEach((g) => gpu.dispose(g));
    }
  },
);
