import assert from "node:assert/strict";
import { createMqarTask, mqarConfig } from "./mqar.ts";
import { DataRng } from "./rng.ts";

Deno.test("mqar examples: distinct keys, queries recall the paired value, loss only on recalled values", () => {
  const config = mqarConfig({ pairs: 6, queries: 4, keys: 10, values: 7 });
  const task = createMqarTask(config);
  assert.equal(task.vocabSize, 18);
  const rng = new DataRng(5);
  for (let n = 0; n < 200; n++) {
    const { tokens, loss } = task.sample(rng, "train");
    assert.equal(tokens.length, 2 * (6 + 4));
    const map = new Map<number, number>();
    for (let i = 0; i < 6; i++) {
      const k = tokens[2 * i], v = tokens[2 * i + 1];
      assert.ok(k >= 0 && k < 10, `key ${k}`);
      assert.ok(v >= 10 && v < 17, `value ${v}`);
      assert.ok(!map.has(k), `key ${k} repeated`);
      map.set(k, v);
      assert.equal(loss[2 * i] + loss[2 * i + 1], 0);
    }
    const asked = new Set<number>();
    for (let j = 0; j < 4; j++) {
      const at = 12 + 2 * j;
      assert.equal(tokens[at + 1], map.get(tokens[at]), "query answered with the wrong value");
      assert.ok(!asked.has(tokens[at]));
      asked.add(tokens[at]);
      assert.equal(loss[at], 0);
      assert.equal(loss[at + 1], 1);
    }
  }
});

Deno.test("mqar codec round-trips and rejects unknown words", () => {
  const task = createMqarTask(mqarConfig({ keys: 4, values: 3, pairs: 2, queries: 1 }));
  assert.deepEqual(Array.from(task.encode("k3 v2 k0 v0")), [3, 6, 0, 4]);
  assert.equal(task.decode([3, 6, 0, 4, 7]), "k3 v2 k0 v0 _");
  assert.throws(() => task.encode("k4"), /word "k4" at index 0/);
});

Deno.test("mqar config validates sizes", () => {
  assert.throws(() => mqarConfig({ pairs: 4, queries: 5 }), /queries \(5\) must be at most pairs \(4\)/);
  assert.throws(() => mqarConfig({ pairs: 8, keys: 4 }), /keys \(4\) must be at least pairs \(8\)/);
  assert.throws(() => mqarConfig({ values: 0 }), /values must be an integer >= 1, got 0/);
});
