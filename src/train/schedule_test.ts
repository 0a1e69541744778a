import assert from "node:assert/strict";
import { learningRate } from "./schedule.ts";

Deno.test("learningRate warms up linearly, peaks after warmup and decays by cosine to the floor", () => {
  const c = { lr: 1, minLrRatio: 0.1, warmupSteps: 10, steps: 110 };
  assert.equal(learningRate(1, c), 0.1);
  assert.equal(learningRate(5, c), 0.5);
  assert.equal(learningRate(10, c), 1);
  assert.ok(Math.abs(learningRate(60, c) - 0.55) < 1e-12); // halfway: floor + (1 - floor) / 2
  assert.ok(Math.abs(learningRate(110, c) - 0.1) < 1e-12);
  for (let s = 11; s < 110; s++) assert.ok(learningRate(s + 1, c) <= learningRate(s, c));
});

Deno.test("learningRate without warmup starts at the peak", () => {
  assert.equal(learningRate(0, { lr: 2, minLrRatio: 0, warmupSteps: 0, steps: 10 }), 2);
});
