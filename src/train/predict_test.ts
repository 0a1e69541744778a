import assert from "node:assert/strict";
import { additionOracle } from "../eval/_oracle.ts";
import {
  ADDITION_EOS_ID,
  type AdditionConfig,
  additionConfig,
  additionText,
  additionVocabulary,
  createAdditionTask,
  isHintId,
} from "../tasks/addition.ts";
import type { LogitsModel } from "./accuracy.ts";
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

/**
 * A model that knows the sum in `config`'s format: at every position it predicts the true next
 * token, and where the true next token is a hint (never trained) the digit after it.
 */
function formatOracle(config: AdditionConfig): LogitsModel {
  const task = createAdditionTask(config);
  const vocab = additionVocabulary(config);
  const V = task.vocabSize;
  const reverse = (s: string) => [...s].reverse().join("");
  return {
    config: { vocabSize: V },
    logits(batch) {
      const text = task.decode(batch.ids);
      const [a, b] = text.slice(0, text.indexOf("=")).replace(/\^|\[\d+\]/g, "").split("+")
        .map((s) => (config.operandOrder === "lsd" ? reverse(s) : s));
      const truth = task.encode(additionText(a, b, config, 0));
      const out = new Float32Array(batch.T * V);
      for (let t = 0; t < batch.T; t++) {
        let next = truth[t + 1] ?? ADDITION_EOS_ID;
        if (isHintId(vocab, next)) next = truth[t + 2];
        out[t * V + next] = 1;
      }
      return Promise.resolve(out);
    },
  };
}

Deno.test("predict rebuilds the prompt in the checkpoint's format (lsd operands, BOS) and decodes the answer", async () => {
  const config = additionConfig({ maxDigits: 3, operandOrder: "lsd", bos: true, format: "msd" });
  const p = await predict(formatOracle(config), createAdditionTask(config), "12+345=");
  assert.equal(p.prompt, "12+345=");
  assert.equal(p.promptText, "^21+543=");
  assert.equal(p.completion, "357$");
  assert.deepEqual(p.addition, { answer: "357", expected: "357", correct: true });
  assert.equal(p.promptLogits.length, 8);
});

Deno.test("with index hints the generator writes each answer digit's hint; the model decides the carry digit", async () => {
  const config = additionConfig({ maxDigits: 3, operandOrder: "lsd", bos: true, indexHints: 6 });
  const task = createAdditionTask(config);
  // no carry out: 3 digits, EOS where the carry digit could come
  const p = await predict(formatOracle(config), task, "12+345=");
  assert.equal(p.promptText, "^[0]2[1]1+[0]5[1]4[2]3=");
  assert.equal(p.completion, "[0]7[1]5[2]3$");
  assert.deepEqual(p.addition, { answer: "357", expected: "357", correct: true });
  assert.equal(p.promptLogits.length, p.promptText.replace(/\[\d+\]/g, "h").length);
  // carry out: the model continues after the 3rd digit, so the generator writes h_3 before it
  const carry = await predict(formatOracle(config), task, "999+1=");
  assert.equal(carry.completion, "[0]0[1]0[2]0[3]1$");
  assert.equal(carry.addition?.correct, true);
  // hints count as tokens of the completion but not against the budget: 2 model tokens
  const short = await predict(formatOracle(config), task, "999+1=", 2);
  assert.equal(short.completion, "[0]0[1]0");
  assert.equal(short.stoppedAtEos, false);
  // msd answer: the first digit's place is the answer's length - 1
  const msd = additionConfig({ maxDigits: 3, format: "msd", indexHints: 6 });
  const m = await predict(formatOracle(msd), createAdditionTask(msd), "999+1=");
  assert.equal(m.promptText, "[2]9[1]9[0]9+[0]1=");
  assert.equal(m.completion, "[3]1[2]0[1]0[0]0$");
  assert.deepEqual(m.addition, { answer: "1000", expected: "1000", correct: true });
  // operands longer than the hint ids reach
  await assert.rejects(
    () => predict(formatOracle(config), task, "123456+1="),
    /--prompt: addition: operands of 6 digits need 7 hint ids/,
  );
});

Deno.test("with index hints the model's choice never falls on a hint id, and each choice takes one place", async () => {
  const config = additionConfig({ maxDigits: 3, indexHints: 6 });
  const task = createAdditionTask(config);
  const V = task.vocabSize;
  const firstHint = additionVocabulary(config).firstHintId!;
  // a model whose largest logit is always a hint id, then the digit 3
  const likesHints: LogitsModel = {
    config: { vocabSize: V },
    logits(batch) {
      const out = new Float32Array(batch.T * V);
      for (let t = 0; t < batch.T; t++) {
        out[t * V + firstHint + 2] = 2;
        out[t * V + 3] = 1;
      }
      return Promise.resolve(out);
    },
  };
  const p = await predict(likesHints, task, "12+345=");
  // places 0..2 (every sum has them), the carry place 3 (the model did not choose EOS), then the budget
  assert.equal(p.completion, "[0]3[1]3[2]3[3]33");
  assert.equal(p.stoppedAtEos, false);
  assert.deepEqual(p.addition, { answer: "33333", expected: "357", correct: false });
});
