import assert from "node:assert/strict";
import type { TrainProgress } from "../src/train/trainer.ts";
import { formatDuration, trainProgress } from "./progress.ts";

function step(step: number, totalSteps = 100): TrainProgress {
  return {
    event: "step",
    step,
    totalSteps,
    loss: 1.23456,
    lr: 0.001,
    gradNorm: 1,
    tokensPerSecond: 1500.4,
    elapsedSeconds: step,
    etaSeconds: totalSteps - step,
  };
}

Deno.test("formatDuration writes seconds, minutes and hours", () => {
  assert.equal(formatDuration(42.4), "42s");
  assert.equal(formatDuration(185), "3m05s");
  assert.equal(formatDuration(3720), "1h02m");
  assert.equal(formatDuration(NaN), "?");
});

Deno.test("plain progress logs a status line every N steps and every checkpoint", () => {
  const lines: string[] = [];
  const p = trainProgress({ terminal: false, write: (t) => lines.push(t), every: 10 });
  for (let s = 1; s <= 25; s++) p.update(step(s, 25));
  p.update({ ...step(25, 25), event: "checkpoint", checkpointPath: "runs/x/checkpoint.safetensors" });
  p.done();
  assert.deepEqual(lines.map((l) => l.split(" ").slice(0, 2).join(" ")), [
    "step 10/25",
    "step 20/25",
    "step 25/25",
    "checkpoint at",
  ]);
  assert.equal(lines[0], "step 10/25 loss 1.2346 lr 1.0e-3 1500 tok/s ETA 15s\n");
});

Deno.test("terminal progress redraws one line in place with a bar and clears it when done", () => {
  const out: string[] = [];
  const p = trainProgress({ terminal: true, write: (t) => out.push(t) });
  p.update(step(50));
  assert.equal(out.length, 1);
  assert.ok(out[0].startsWith("\r[############............] step 50/100 loss 1.2346"), out[0]);
  assert.ok(!out[0].includes("\n"));
  p.update(step(100));
  p.done();
  assert.match(out[out.length - 1], /^\r +\r$/);
});

Deno.test("an eval event prints the validation loss and the task metric on its own line, in both modes", () => {
  const evaluation = { loss: 0.123456, digitAccuracy: 0.9512, exactMatch: 0.8, placesInRange: 1, place0: 1 };
  for (const terminal of [false, true]) {
    const out: string[] = [];
    const p = trainProgress({ terminal, write: (t) => out.push(t), every: 10 });
    p.update(step(5, 20));
    p.update({ ...step(5, 20), event: "eval", evaluation });
    const line = out.find((l) => l.includes("eval at"));
    assert.equal(
      line?.replace(/^\r +\r/, ""),
      "eval at step 5: loss 0.1235, digitAccuracy 95.1%, exactMatch 80.0%, placesInRange 100.0%\n",
    );
  }
});
