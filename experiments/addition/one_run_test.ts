import { assertEquals } from "../../src/eval/_assert.ts";
import { loadCheckpoint } from "../../src/checkpoint/checkpoint.ts";
import { additionConfig } from "../../src/tasks/addition.ts";
import { runFingerprint, trainAndEvaluate } from "./one_run.ts";
import { makePlan, runName } from "./plan.ts";

const variant = { mixer: "transformer", alignment: "same-step" } as const;

Deno.test("runFingerprint() names the addition format only when the plan sets one", () => {
  const plan = makePlan("smoke");
  assertEquals(plan.task, {});
  const plain = JSON.parse(runFingerprint(plan, variant, 0));
  assertEquals("task" in plain, false); // results stored before the format options keep their fingerprint
  const hinted = JSON.parse(runFingerprint({ ...plan, task: { bos: true, indexHints: 8 } }, variant, 0));
  assertEquals(hinted.task, { bos: true, indexHints: 8 });
});

Deno.test("trainAndEvaluate() trains and evaluates in the plan's addition format", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const smoke = makePlan("smoke", { steps: 2, samples: 2 });
    const plan = { ...smoke, task: { operandOrder: "lsd" as const, bos: true, indexHints: 8 } };
    const result = await trainAndEvaluate(plan, variant, 0, { backend: "ref", runsDir: dir, log: () => {} });
    const saved = await loadCheckpoint(`${dir}/${runName(variant, 0)}/checkpoint.safetensors`);
    assertEquals(saved.task, additionConfig({ maxDigits: 3, operandOrder: "lsd", bos: true, indexHints: 8 }));
    assertEquals(saved.model.vocabSize, 14 + 1 + 8);
    // the smoke plan evaluates 1..6 digits: 7 hint ids at most, within the 8
    assertEquals(result.report.keys, [1, 2, 3, 4, 5, 6]);
    assertEquals(result.report.checkpoints[0].groups.map((g) => g.sequences), [2, 2, 2, 2, 2, 2]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
