import { assertEquals, assertThrows } from "./_assert.ts";
import { additionGroups, mqarGroups, rowsBatch, textGroup } from "./test_sets.ts";
import {
  ADDITION_PAD_ID,
  additionConfig,
  additionExampleLength,
  additionTestSet,
  createAdditionTask,
  mqarConfig,
  packBatch,
} from "../tasks/mod.ts";
import type { Batch } from "../model/types.ts";

function collect(iterable: Iterable<Batch> | AsyncIterable<Batch>): Batch[] {
  return [...(iterable as Iterable<Batch>)];
}

/** Row `r` of a batch's ids up to (not including) the first padding segment. */
function rowTokens(batch: Batch, r: number): number[] {
  const row = [...batch.ids.subarray(r * batch.T, (r + 1) * batch.T)];
  const end = row.indexOf(ADDITION_PAD_ID);
  return end < 0 ? row : row.slice(0, end);
}

Deno.test("additionGroups() streams exactly additionTestSet()'s examples, batchSize rows at a time", () => {
  const [group] = additionGroups(additionConfig({ maxDigits: 4 }), [6], 5, 11, 2);
  const batches = collect(group.batches());
  assertEquals(group.key, 6);
  assertEquals(group.batchCount, 3);
  assertEquals(batches.map((b) => b.B), [2, 2, 1]);
  const streamed = batches.flatMap((b) => Array.from({ length: b.B }, (_, r) => rowTokens(b, r)));
  assertEquals(streamed, additionTestSet(6, 5, 11).map((ex) => [...ex.tokens]));
  // a second call yields the same batches (a fresh stream)
  assertEquals(collect(group.batches()).map((b) => [...b.ids]), batches.map((b) => [...b.ids]));
});

Deno.test("additionGroups() gives each length its own stream and scores answer digits plus EOS", () => {
  const [g3, g5] = additionGroups(additionConfig(), [3, 5], 1, 0, 1);
  const [b3] = collect(g3.batches());
  const [b5] = collect(g5.batches());
  // answer of two 3-digit operands: 3 or 4 digits, then EOS
  const scored3 = b3.weights.reduce((s, w) => s + w, 0);
  const scored5 = b5.weights.reduce((s, w) => s + w, 0);
  assertEquals(scored3 === 4 || scored3 === 5, true);
  assertEquals(scored5 === 6 || scored5 === 7, true);
  assertEquals(b3.T, 13);
  assertEquals(b5.T, 19);
});

Deno.test("rowsBatch() lays out one example per row like packBatch()", () => {
  const examples = additionTestSet(2, 3, 5);
  const T = 10; // every example is 7 or 8 tokens: one per row in packBatch too
  let i = 0;
  const packed = packBatch(() => examples[i++ % examples.length], 3, T, ADDITION_PAD_ID);
  const rows = rowsBatch(examples, T, ADDITION_PAD_ID);
  assertEquals(rows, packed);
  assertThrows(() => rowsBatch(examples, 5, ADDITION_PAD_ID), RangeError, "does not fit a row of T = 5");
});

Deno.test("mqarGroups() scores min(queries, pairs) values per example and refuses more pairs than keys", () => {
  const config = mqarConfig({ pairs: 4, queries: 4, keys: 8, values: 8 });
  const [g2, g6] = mqarGroups(config, [2, 6], 3, 1, 3);
  const [b2] = collect(g2.batches());
  const [b6] = collect(g6.batches());
  assertEquals(b2.weights.reduce((s, w) => s + w, 0), 3 * 2);
  assertEquals(b6.weights.reduce((s, w) => s + w, 0), 3 * 4);
  assertThrows(() => mqarGroups(config, [9], 3, 1, 3), RangeError, "9 pairs need 9 distinct keys");
});

Deno.test("textGroup() predicts every held-out byte after the first exactly once", () => {
  const bytes = Uint8Array.from({ length: 40 }, (_, i) => 100 + i);
  const group = textGroup(bytes, 10, 33, 5, 100, 2);
  const batches = collect(group.batches());
  const targets: number[] = [];
  for (const b of batches) {
    for (let i = 0; i < b.B * b.T; i++) if (b.weights[i] > 0) targets.push(b.targets[i]);
  }
  assertEquals(targets, [...bytes.subarray(11, 33)]);
  assertEquals(group.batchCount, Math.ceil(Math.ceil(22 / 4) / 2));
  // capped by maxWindows
  const capped = collect(textGroup(bytes, 10, 33, 5, 2, 8).batches());
  assertEquals(capped.length, 1);
  assertEquals(capped[0].weights.reduce((s, w) => s + w, 0), 8);
});

Deno.test("additionGroups() writes the configuration's format: lsd operands, BOS, hints from h_0, answer places", () => {
  const config = additionConfig({ maxDigits: 3, operandOrder: "lsd", bos: true, indexHints: 6 });
  const task = createAdditionTask(config);
  const [group] = additionGroups(config, [3], 4, 2, 4);
  const [batch] = collect(group.batches());
  assertEquals(batch.T, additionExampleLength(config, 3));
  const expected = additionTestSet(3, 4, 2, config);
  for (let r = 0; r < batch.B; r++) {
    const row = [...batch.ids.subarray(r * batch.T, (r + 1) * batch.T)];
    const tokens = row.slice(0, row.indexOf(ADDITION_PAD_ID) < 0 ? row.length : row.indexOf(ADDITION_PAD_ID));
    assertEquals(tokens, [...expected[r].tokens]);
    // "^[0]d[1]d[2]d+[0]..." : hints at offset 0, units digit first
    assertEquals(
      /^\^\[0\]\d\[1\]\d\[2\]\d\+\[0\]\d\[1\]\d\[2\]\d=\[0\]\d\[1\]\d\[2\]\d(\[3\]1)?\$$/.test(
        task.decode(tokens),
      ),
      true,
    );
    // places of the scored digit targets count 0, 1, 2 (, 3); nothing else has a place
    const places = [...batch.places!.subarray(r * batch.T, (r + 1) * batch.T)].filter((p) => p >= 0);
    assertEquals(places, Array.from({ length: places.length }, (_, i) => i));
    assertEquals(places.length === 3 || places.length === 4, true);
  }
  assertThrows(
    () => additionGroups(config, [6], 1, 0, 1),
    RangeError,
    "operands of 6 digits need 7 hint ids",
  );
});
