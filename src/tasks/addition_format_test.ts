import assert from "node:assert/strict";
import { additionConfig } from "./addition_config.ts";
import {
  ADDITION_BOS_ID,
  ADDITION_EOS_ID,
  ADDITION_PAD_ID,
  ADDITION_VOCAB_SIZE,
  additionExample,
  additionExampleLength,
  additionPromptText,
  additionText,
  additionVocabulary,
  checkHintRange,
  decodeAdditionAnswer,
  decodeAdditionTokens,
  encodeAdditionText,
  EQUALS_ID,
  isHintId,
  PLUS_ID,
} from "./addition_format.ts";
import { createAdditionTask } from "./addition.ts";
import { packBatch } from "./packing.ts";
import { DataRng } from "./rng.ts";

const full = additionConfig({ maxDigits: 3, operandOrder: "lsd", bos: true, indexHints: 6 });

Deno.test("lsd operands + BOS + hints: exact tokens, loss mask and places of 12+5", () => {
  const text = additionText("12", "5", full);
  assert.equal(text, "^[0]2[1]1+[0]5=[0]7[1]1$");
  const ex = additionExample(text, full);
  const [bos, h0, h1] = [ADDITION_BOS_ID, 15, 16];
  assert.deepEqual(
    [...ex.tokens],
    [bos, h0, 2, h1, 1, PLUS_ID, h0, 5, EQUALS_ID, h0, 7, h1, 1, ADDITION_EOS_ID],
  );
  assert.deepEqual([...ex.loss], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1]);
  assert.deepEqual([...ex.places!], [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, -1, 1, -1]);
  // packed: position i predicts token i + 1, so the position of a hint predicts its digit (weight 1)
  // and the position before a hint (`=`, an answer digit) predicts the hint (weight 0)
  const b = packBatch(() => ex, 1, 14, ADDITION_PAD_ID);
  assert.deepEqual([...b.weights], [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0]);
  assert.deepEqual([...b.places!], [-1, -1, -1, -1, -1, -1, -1, -1, -1, 0, -1, 1, -1, -1]);
  assert.deepEqual([...b.targets].slice(8, 13), [h0, 7, h1, 1, ADDITION_EOS_ID]);
  // a training offset shifts every hint id, the same for operands and answer
  assert.equal(additionText("12", "5", full, 2), "^[2]2[3]1+[2]5=[2]7[3]1$");
});

Deno.test("each option alone writes 12+345 as specified", () => {
  const cases: [Parameters<typeof additionConfig>[0], string][] = [
    [{}, "12+345=753$"],
    [{ format: "msd" }, "12+345=357$"],
    [{ operandOrder: "lsd" }, "21+543=753$"],
    [{ bos: true }, "^12+345=753$"],
    [{ indexHints: 5 }, "[1]1[0]2+[2]3[1]4[0]5=[0]7[1]5[2]3$"],
    [{ operandOrder: "lsd", format: "msd", indexHints: 5 }, "[0]2[1]1+[0]5[1]4[2]3=[2]3[1]5[0]7$"],
  ];
  for (const [options, expected] of cases) {
    const config = additionConfig({ maxDigits: 3, ...options });
    assert.equal(additionText("12", "345", config), expected, JSON.stringify(options));
    const ex = additionExample(expected, config);
    assert.equal(decodeAdditionTokens(ex.tokens, config), expected);
    // supervised: exactly the answer digits and EOS; places 0..2 on the answer digits
    const supervised = [...ex.tokens].filter((_, i) => ex.loss[i] === 1);
    assert.deepEqual(supervised.sort(), [3, 5, 7, ADDITION_EOS_ID].sort());
    const places = [...ex.places!].filter((p) => p >= 0).sort();
    assert.deepEqual(places, [0, 1, 2]);
    const digitOfPlace = (p: number) => ex.tokens[ex.places!.indexOf(p)];
    assert.deepEqual([0, 1, 2].map(digitOfPlace), [7, 5, 3], JSON.stringify(options));
  }
  // the answer order alone: msd answer places count down
  const msd = additionExample("12+345=357$", additionConfig({ format: "msd" }));
  assert.deepEqual([...msd.places!].slice(7), [2, 1, 0, -1]);
  // the prompt is the text up to `=`
  assert.equal(additionPromptText("12", "345", full), "^[0]2[1]1+[0]5[1]4[2]3=");
});

Deno.test("the vocabulary appends BOS and the hint ids after the first version's 14 tokens", () => {
  assert.equal(ADDITION_VOCAB_SIZE, 14);
  assert.deepEqual(additionVocabulary(additionConfig()), {
    size: 14,
    bosId: null,
    firstHintId: null,
    hints: 0,
  });
  assert.deepEqual(additionVocabulary(additionConfig({ bos: true })), {
    size: 15,
    bosId: 14,
    firstHintId: null,
    hints: 0,
  });
  assert.deepEqual(additionVocabulary(additionConfig({ maxDigits: 8, indexHints: 24 })), {
    size: 38,
    bosId: null,
    firstHintId: 14,
    hints: 24,
  });
  const v = additionVocabulary(full);
  assert.equal(v.size, 14 + 1 + 6);
  assert.deepEqual([14, 15, 20, 21].map((id) => isHintId(v, id)), [false, true, true, false]);
  assert.equal(createAdditionTask(full).vocabSize, 21);
});

Deno.test("encode and decode round-trip every token of the vocabulary and sampled examples", () => {
  for (const config of [additionConfig(), full, additionConfig({ maxDigits: 12, indexHints: 13 })]) {
    const all = Int32Array.from({ length: additionVocabulary(config).size }, (_, i) => i);
    const text = decodeAdditionTokens(all, config);
    assert.deepEqual(encodeAdditionText(text, config), all, text);
    const task = createAdditionTask(config);
    const rng = new DataRng(4);
    for (let i = 0; i < 200; i++) {
      const ex = task.sample(rng, "train");
      assert.deepEqual(task.encode(task.decode(ex.tokens)), ex.tokens);
    }
  }
  assert.equal(decodeAdditionTokens([99], full), "<99>");
});

Deno.test("encode names text outside the configuration's vocabulary", () => {
  assert.throws(
    () => encodeAdditionText("^1+2=", additionConfig()),
    /character "\^" at index 0 is not in the vocabulary/,
  );
  assert.throws(() => encodeAdditionText("[0]1+2=", additionConfig()), /character "\[" at index 0/);
  assert.throws(
    () => encodeAdditionText("^[6]1+2=", full),
    /"\[6\]" at index 1 is not a hint token \(\[0\]..\[5\]\)/,
  );
  assert.throws(() => encodeAdditionText("^[x]1", full), /"\[x\]1" at index 1 is not a hint token/);
  assert.throws(
    () => encodeAdditionText("1-2", full),
    /character "-" at index 1 .*\^ for BOS, \[0\]..\[5\] for hints/,
  );
});

Deno.test("hint tokens are never scored and training offsets cover [0, H - (L + 1)]", () => {
  const config = additionConfig({ maxDigits: 3, indexHints: 7 });
  const task = createAdditionTask(config);
  const vocab = additionVocabulary(config);
  const rng = new DataRng(9);
  const firstHints = new Set<number>();
  for (let i = 0; i < 400; i++) {
    const ex = task.sample(rng, "train");
    ex.tokens.forEach((id, t) => {
      if (isHintId(vocab, id)) assert.equal(ex.loss[t], 0, `hint scored in ${task.decode(ex.tokens)}`);
    });
    // the units digit of the first operand carries the smallest hint of the example: h_o
    const hints = [...ex.tokens].filter((id) => isHintId(vocab, id)).map((id) => id - vocab.firstHintId!);
    firstHints.add(Math.min(...hints));
    assert.ok(Math.max(...hints) <= 6);
    assert.ok(ex.tokens.length <= task.maxExampleLength);
  }
  assert.deepEqual([...firstHints].sort(), [0, 1, 2, 3]); // H - (L + 1) = 3
  // evaluation samples use offset 0
  for (let i = 0; i < 50; i++) {
    const ex = task.sample(rng, "eval");
    const hints = [...ex.tokens].filter((id) => isHintId(vocab, id)).map((id) => id - vocab.firstHintId!);
    assert.equal(Math.min(...hints), 0);
  }
  // no batch position whose target is a hint has weight
  const b = packBatch(() => task.sample(rng, "train"), 4, 64, task.padId);
  b.targets.forEach((id, i) => {
    if (isHintId(vocab, id)) assert.equal(b.weights[i], 0);
  });
});

Deno.test("additionExampleLength() is the length of the longest example", () => {
  for (
    const config of [additionConfig({ maxDigits: 3 }), full, additionConfig({ maxDigits: 3, indexHints: 4 })]
  ) {
    const longest = additionExample(additionText("999", "999", config), config);
    assert.equal(additionExampleLength(config, 3), longest.tokens.length);
    assert.equal(createAdditionTask(config).maxExampleLength, longest.tokens.length);
  }
  assert.equal(additionExampleLength(full, 3), 1 + 13 + 10);
});

Deno.test("hint ranges and offsets are checked; decodeAdditionAnswer skips hints", () => {
  checkHintRange(full, 5);
  assert.throws(
    () => checkHintRange(full, 6),
    /operands of 6 digits need 7 hint ids \(places 0..6\); the task has indexHints = 6/,
  );
  checkHintRange(additionConfig(), 1000);
  assert.throws(
    () => additionText("12", "5", full, 5),
    /hint offset 5 with 2 places needs hint ids up to 6; the task has indexHints = 6/,
  );
  assert.throws(
    () => additionText("12", "5", additionConfig(), 1),
    /hint offset 1 given but the task has no index hints/,
  );
  assert.throws(() => additionText("1a", "5", full), /operand a "1a" is not digits/);
  assert.equal(decodeAdditionAnswer("[0]7[1]1$", "lsd"), "17");
  assert.equal(decodeAdditionAnswer("[1]1[0]7$[3]", "msd"), "17");
});
