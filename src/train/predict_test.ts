import assert from "node:assert/strict";
import { additionOracle } from "../eval/_oracle.ts";
import { additionConfig, createAdditionTask } from "../tasks/addition.ts";
import { predict } from "./predict.ts";

const task = createAdditionTask(additionConfig());

Deno.test("predict decodes a right lsd answer greedily and stops at EOS", async () => {
  const p = await predict(additionOracle(5), task, "12+345=");
  assert.equal(p.completion, "753$");
  assert.equal(p.stoppedAtEos, true);
  assert.deepEqual(p.addition, { answer: "357", expected: "357", correct: true });
  assert.equal(p.promptLogits.length, 7);
  assert.ok(p.promptLogits.every((row) => row.length === 14));
});

Deno.test("predict reports a wrong answer and stops at the token budget without EOS", async () => {
  const p = await predict(additionOracle(1), task, "12+345=");
  assert.equal(p.tokens.length, 5); // longest possible answer (3 + 1 digits) + EOS
  assert.equal(p.stoppedAtEos, false);
  assert.equal(p.addition?.correct, false);
  assert.equal(p.addition?.expected, "357");
});

Deno.test("predict rejects prompts that are not a+b= or leave the vocabulary", async () => {
  await assert.rejects(() => predict(additionOracle(5), task, "12+34"), /not an addition prompt of the form/);
  await assert.rejects(() => predict(additionOracle(5), task, "1a+2="), /not an addition prompt/);
});
