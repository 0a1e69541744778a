import assert from "node:assert/strict";
import { DEFAULT_CORPUS } from "../../fixtures/corpus/falcon_notes.ts";
import { DataRng } from "./rng.ts";
import { createTextTask, TEXT_TRAIN_FRACTION, textConfig } from "./text.ts";

const corpus = new TextEncoder().encode(DEFAULT_CORPUS);

Deno.test("text examples are byte windows of the right split, supervised after the first byte", () => {
  const config = textConfig(corpus, "default", 32);
  const task = createTextTask(config, corpus);
  const split = Math.floor(corpus.length * TEXT_TRAIN_FRACTION);
  const rng = new DataRng(1);
  for (const part of ["train", "eval"] as const) {
    for (let n = 0; n < 100; n++) {
      const ex = task.sample(rng, part);
      assert.equal(ex.tokens.length, 32);
      assert.equal(ex.loss[0], 0);
      assert.ok(ex.loss.subarray(1).every((x) => x === 1));
      // locate the window in the corpus: it must lie inside its split
      const text = task.decode(ex.tokens);
      const at = DEFAULT_CORPUS.indexOf(text);
      assert.ok(at >= 0, "window not found in corpus");
      if (part === "train") {
        assert.ok(new TextEncoder().encode(DEFAULT_CORPUS.slice(0, at)).length + 32 <= split);
      } else assert.ok(new TextEncoder().encode(DEFAULT_CORPUS.slice(0, at)).length >= split);
    }
  }
});

Deno.test("the default corpus is a few KB of text", () => {
  assert.ok(corpus.length > 3000, `default corpus is ${corpus.length} bytes`);
});

Deno.test("text config rejects an empty or too-short corpus and bad seqLen", () => {
  assert.throws(() => textConfig(new Uint8Array(0), "empty.txt"), /corpus "empty.txt" is empty/);
  assert.throws(() => textConfig(new Uint8Array(100), "short.txt", 64), /short.txt" has 100 bytes/);
  assert.throws(() => textConfig(corpus, "x", 1), /seqLen must be an integer >= 2, got 1/);
  assert.throws(() => createTextTask(textConfig(corpus, "x"), corpus.subarray(1)), /config says/);
});
