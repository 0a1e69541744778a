import assert from "node:assert/strict";
import { additionConfig } from "./addition_config.ts";
import { curriculumDigits } from "./addition_curriculum.ts";
import { createAdditionTask } from "./addition.ts";
import { packBatch } from "./packing.ts";
import { DataRng } from "./rng.ts";

const config = additionConfig({ maxDigits: 8, curriculum: { startDigits: 4, fraction: 0.5 } });

Deno.test("curriculumDigits() rises from startDigits to maxDigits in equal stages over the ramp", () => {
  // 20 steps, ramp round(0.5 * 20) = 10 steps in 8 - 4 + 1 = 5 stages of 2 steps, then 8 digits
  const lengths = Array.from({ length: 20 }, (_, i) => curriculumDigits(config, { step: i + 1, steps: 20 }));
  assert.deepEqual(lengths, [4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]);
  // uneven stages: 7 ramp steps over 5 stages; never decreasing, first L0, last L
  const uneven = Array.from(
    { length: 10 },
    (_, i) =>
      curriculumDigits(additionConfig({ ...config, curriculum: { startDigits: 4, fraction: 0.7 } }), {
        step: i + 1,
        steps: 10,
      }),
  );
  assert.deepEqual(uneven, [4, 4, 5, 6, 6, 7, 8, 8, 8, 8]);
  // a ramp of the whole run reaches maxDigits only at its last stage
  const whole = additionConfig({ maxDigits: 3, curriculum: { startDigits: 1, fraction: 1 } });
  assert.deepEqual(
    Array.from({ length: 6 }, (_, i) => curriculumDigits(whole, { step: i + 1, steps: 6 })),
    [1, 1, 2, 2, 3, 3],
  );
});

Deno.test("curriculumDigits() is maxDigits without a curriculum, without progress, or with a ramp of 0 steps", () => {
  assert.equal(curriculumDigits(additionConfig({ maxDigits: 8 }), { step: 1, steps: 10 }), 8);
  assert.equal(curriculumDigits(config), 8);
  const tiny = additionConfig({ maxDigits: 8, curriculum: { startDigits: 2, fraction: 0.01 } });
  assert.equal(curriculumDigits(tiny, { step: 1, steps: 10 }), 8); // round(0.1) = 0 ramp steps
  assert.throws(
    () => curriculumDigits(config, { step: 0, steps: 10 }),
    /step must be an integer in \[1, 10\], got 0/,
  );
  assert.throws(() => curriculumDigits(config, { step: 11, steps: 10 }), /got 11/);
  assert.throws(
    () => curriculumDigits(config, { step: 1, steps: 0 }),
    /steps must be an integer >= 1, got 0/,
  );
});

Deno.test("training samples follow the curriculum; evaluation samples ignore it", () => {
  const task = createAdditionTask(config);
  const rng = new DataRng(3);
  const operandLengths = (step: number | null, split: "train" | "eval" = "train") =>
    Array.from({ length: 300 }, () => {
      const progress = step === null ? undefined : { step, steps: 20 };
      const text = task.decode(task.sample(rng, split, progress).tokens);
      const [a, b] = text.slice(0, text.indexOf("=")).split("+");
      return Math.max(a.length, b.length);
    });
  assert.equal(Math.max(...operandLengths(1)), 4);
  assert.equal(Math.max(...operandLengths(5)), 6);
  assert.equal(Math.max(...operandLengths(20)), 8);
  assert.equal(Math.max(...operandLengths(1, "eval")), 8);
  assert.equal(Math.max(...operandLengths(null)), 8);
});

Deno.test("two curriculum streams with the same seed give identical batches; other seeds differ", () => {
  const task = createAdditionTask(
    additionConfig({
      ...config,
      operandOrder: "lsd",
      bos: true,
      indexHints: 12,
      equalLength: true,
    }),
  );
  const batches = (seed: number) => {
    const rng = new DataRng(seed);
    return Array.from({ length: 6 }, (_, i) => {
      const progress = { step: i + 1, steps: 6 };
      const b = packBatch(() => task.sample(rng, "train", progress), 4, task.maxExampleLength, task.padId);
      return [...b.ids, ...b.weights, ...b.places!];
    });
  };
  assert.deepEqual(batches(5), batches(5));
  assert.notDeepEqual(batches(5), batches(6));
});
