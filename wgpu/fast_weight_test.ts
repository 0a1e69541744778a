/**
 * Host-side logic of the WebGPU fast-weight ops: the per-step window bounds and resets, the
 * shape checks of a call, and the recurrent kernels' backward without dS0 (`s0Grad: false`).
 */

import { ruleConfig, RULES } from "../src/rules/config.ts";
import { assertRelL2 } from "../src/testing/compare.ts";
import type { Carry, Tensor } from "../src/rules/backend.ts";
import { stepMeta, usesChunkKernels } from "./fast_weight.ts";
import { gpuTest } from "./_test_util.ts";
import { assertS0GradOptOut } from "../src/testing/s0_grad.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "../src/testing/shapes.ts";

function expectEqual(name: string, got: ArrayLike<number>, want: number[]) {
  if (Array.from(got).join() !== want.join()) {
    throw new Error(`${name}: got [${Array.from(got)}], want [${want}]`);
  }
}

Deno.test("stepMeta: prefix window starts after the sentinel and empties at a sequence start", () => {
  const config = ruleConfig("falcon3", { window: 3 });
  const starts = Uint8Array.from([1, 0, 0, 0, 1, 0, 0]);
  const { meta, counts } = stepMeta(config, 1, 7, starts, undefined);
  const lo = Array.from({ length: 7 }, (_, t) => meta[2 * t]);
  const reset = Array.from({ length: 7 }, (_, t) => meta[2 * t + 1]);
  // pairs of step t are lo..t: the sentinel steps 0 and 4 have none (lo = t + 1)
  expectEqual("lo", lo, [1, 1, 1, 1, 5, 5, 5]);
  expectEqual("reset", reset, [1, 0, 0, 0, 1, 0, 0]);
  expectEqual("carried window count", counts, [2]);
});

Deno.test("stepMeta: same-step alignment writes at the start; a carry extends the window backwards", () => {
  const config = ruleConfig("falcon3a", { window: 4, alignment: "same-step" });
  const fresh = stepMeta(config, 1, 3, undefined, undefined);
  expectEqual("fresh lo", [0, 2, 4].map((i) => fresh.meta[i]), [0, 0, 0]);
  const carry = { windowCount: Int32Array.from([2]) } as unknown as Carry;
  const cont = stepMeta(config, 1, 3, undefined, carry);
  expectEqual("continued lo", [0, 2, 4].map((i) => cont.meta[i]), [-2, -2, -1]);
  expectEqual("continued reset", [1, 3, 5].map((i) => cont.meta[i]), [0, 0, 0]);
  expectEqual("continued count", cont.counts, [3]);
});

Deno.test("stepMeta: rules without a window write only the current pair and carry no window", () => {
  const { meta, counts } = stepMeta(ruleConfig("falcon1"), 2, 2, Uint8Array.from([1, 0, 0, 1]), undefined);
  expectEqual("lo", Array.from({ length: 4 }, (_, i) => meta[2 * i]), [1, 1, 1, 2]);
  expectEqual("counts", counts, [0, 0]);
});

gpuTest("webgpu fastWeightForward rejects mismatched shapes and unknown forms by name", async (gpu) => {
  const config = ruleConfig("falcon2");
  const t = (shape: number[]): Tensor => gpu.zeros(shape);
  const inputs = {
    q: t([1, 4, 2, 3]),
    k: t([1, 4, 2, 3]),
    v: t([1, 4, 2, 5]),
    beta: t([1, 4, 2]),
    lambdabar: t([1, 4, 2]),
  };
  let message = "";
  try {
    gpu.fastWeightForward(config, inputs);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  if (!message.includes("beta")) throw new Error(`expected a RangeError naming beta, got "${message}"`);
  message = "";
  try {
    gpu.fastWeightForward(ruleConfig("falcon1"), inputs, { form: "fft" as never });
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  if (!message.includes("fft")) throw new Error(`expected a RangeError naming the form, got "${message}"`);
  await gpu.sync();
});

gpuTest(
  "webgpu fastWeightForward accepts every form: chunk kernels agree within 1e-5, recurrent-only rules exactly",
  async (gpu) => {
    const v = (n: number, f: (i: number) => number) => Array.from({ length: n }, (_, i) => f(i));
    const { H, dk, dv } = SMALL_HEADS;
    const inputs = {
      // the shared small sizes (the pipelines the other small tests compile): T = 4 is a chunk of 3, then 1
      q: gpu.fromArray(v(4 * H * dk, (i) => Math.sin(i)), [1, 4, H, dk]),
      k: gpu.fromArray(v(4 * H * dk, (i) => Math.cos(i)), [1, 4, H, dk]),
      v: gpu.fromArray(v(4 * H * dv, (i) => Math.sin(2 * i)), [1, 4, H, dv]),
      beta: gpu.fromArray(v(4 * H, () => 0.7), [1, 4, H]),
      lambdabar: gpu.fromArray(v(4 * H, () => 0.2), [1, 4, H]),
    };
    for (const rule of ["falcon1a", "falcon1", "falcon3"] as const) {
      const config = ruleConfig(rule);
      const outs = [];
      for (const form of ["recurrent", "chunk", "parallel"] as const) {
        outs.push(
          Array.from(
            await gpu.read(gpu.fastWeightForward(config, inputs, { form, chunkSize: SMALL_CHUNK }).o),
          ),
        );
      }
      if (outs[0].every((x) => x === 0)) throw new Error(`${rule}: output is all zero`);
      if (usesChunkKernels(config, { form: "chunk" })) {
        assertRelL2(`${rule} chunk vs recurrent`, outs[1], outs[0], 1e-5);
        assertRelL2(`${rule} parallel vs recurrent`, outs[2], outs[0], 1e-5);
      } else if (outs[1].join() !== outs[0].join() || outs[2].join() !== outs[0].join()) {
        throw new Error(`${rule}: forms of the recurrent kernel disagree`);
      }
    }
  },
);

Deno.test("usesChunkKernels: chunk and parallel forms of every rule", () => {
  for (const form of ["chunk", "parallel"] as const) {
    const routed = RULES.filter((r) => usesChunkKernels(ruleConfig(r), { form })).join();
    const expected =
      "falcon1,falcon2,falcon3,falcon1a,falcon2a,falcon3a,linear,retnet,mamba2,deltanet,gated_deltanet";
    if (routed !== expected) throw new Error(`${form} routes ${routed}`);
  }
  if (usesChunkKernels(ruleConfig("falcon1a"), { form: "recurrent" })) {
    throw new Error("recurrent form routed");
  }
  if (usesChunkKernels(ruleConfig("falcon1a"), {})) throw new Error("default form routed");
});

gpuTest(
  "a recurrent backward without dS0 returns no ds0 and every other gradient bit for bit",
  async (gpu) => {
    for (const rule of ["falcon1", "falcon2a", "falcon3", "mamba2"] as const) {
      await assertS0GradOptOut(gpu, ruleConfig(rule), { form: "recurrent", chunkSize: SMALL_CHUNK });
    }
  },
);
