/**
 * Tests of the per-op profiler: a wrapped backend computes what the backend computes, every call is
 * counted under its method name, products and fast-weight calls get their shape and FLOPs, and
 * `reset()` starts the totals afresh.
 */

import { ruleConfig } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { Rng } from "./compare.ts";
import { BackendProfiler } from "./profiled_backend.ts";

Deno.test("a profiled backend computes the same results and counts each call under its op name", async () => {
  const profiler = new BackendProfiler();
  const plain = createRefBackend();
  const be = profiler.wrap(plain);
  if (be.name !== "ref" || be.dtype !== "f64") throw new Error(`properties not read through: ${be.name}`);
  const a = be.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
  const b = be.fromArray([1, 0, 0, 1, 1, 1], [3, 2]);
  const c = be.zeros([2, 2]);
  be.matmul(c, a, b);
  be.matmul(c, a, b, { accumulate: true });
  be.add(c, c, c);
  const got = Array.from(await be.read(c));
  if (got.join() !== [16, 20, 40, 44].join()) throw new Error(`wrapped matmul/add gave ${got}`);
  // tensors are interchangeable between the wrapper and the backend it wraps
  const plainRead = Array.from(await plain.read(c));
  if (plainRead.join() !== got.join()) throw new Error(`the wrapped tensor reads ${plainRead} unwrapped`);

  const { ops, shapes } = profiler.snapshot();
  const expectCalls: Record<string, number> = { fromArray: 2, zeros: 1, matmul: 2, add: 1, read: 1 };
  for (const [op, calls] of Object.entries(expectCalls)) {
    if (ops[op]?.calls !== calls) {
      throw new Error(`${op}: ${ops[op]?.calls} calls counted, expected ${calls}`);
    }
    if (!(ops[op].ms >= 0 && ops[op].cpuMs >= 0)) throw new Error(`${op}: times ${JSON.stringify(ops[op])}`);
  }
  // [2, 3] x [3, 2]: 2 M N K = 24 FLOPs per product
  if (ops.matmul.flops !== 48) throw new Error(`matmul FLOPs ${ops.matmul.flops}, expected 48`);
  const key = "matmul 2x3x2";
  if (shapes[key]?.calls !== 2 || shapes[key].flops !== 48) {
    throw new Error(`shape table ${JSON.stringify(shapes)} lacks "${key}" with 2 calls and 48 FLOPs`);
  }
  if (ops.add.flops !== 0) throw new Error(`add counted ${ops.add.flops} FLOPs, expected none`);

  profiler.reset();
  be.fill(c, 0);
  const after = profiler.snapshot();
  if (Object.keys(after.ops).join() !== "fill" || Object.keys(after.shapes).length !== 0) {
    throw new Error(`after reset: ${JSON.stringify(after)}`);
  }
});

Deno.test("the profiler keys transposed products and fast-weight calls by shape, with their FLOPs", () => {
  const profiler = new BackendProfiler();
  const be = profiler.wrap(createRefBackend());
  const rng = new Rng(4);
  // out[4, 5] = a^T b with a stored [3, 4], b [3, 5]: M 4, K 3, N 5
  be.matmul(be.zeros([4, 5]), be.fromArray(rng.normals(12), [3, 4]), be.fromArray(rng.normals(15), [3, 5]), {
    transA: true,
  });
  const [B, T, H, d] = [1, 3, 2, 4];
  const inputs = {
    q: be.fromArray(rng.normals(B * T * H * d), [B, T, H, d]),
    k: be.fromArray(rng.normals(B * T * H * d), [B, T, H, d]),
    v: be.fromArray(rng.normals(B * T * H * d), [B, T, H, d]),
    beta: be.fromArray(rng.uniforms(B * T * H, 0.2, 1.8), [B, T, H]),
    lambdabar: be.fromArray(rng.uniforms(B * T * H, 0, 0.5), [B, T, H]),
  };
  const config = ruleConfig("falcon1");
  be.fastWeightForward(config, inputs);
  be.fastWeightBackward(config, inputs, be.fromArray(rng.normals(B * T * H * d), [B, T, H, d]));
  const { shapes } = profiler.snapshot();
  const expected: Record<string, number> = {
    "matmul 4x3x5 transA": 2 * 4 * 3 * 5,
    "fastWeightForward B1 T3 H2 dk4 dv4": 8 * B * T * H * d * d,
    "fastWeightBackward B1 T3 H2 dk4 dv4": 16 * B * T * H * d * d,
  };
  for (const [key, flops] of Object.entries(expected)) {
    if (shapes[key]?.flops !== flops) {
      throw new Error(`"${key}": ${JSON.stringify(shapes[key])}, expected ${flops} FLOPs`);
    }
  }
});
