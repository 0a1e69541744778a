import assert from "node:assert/strict";
import { additionExample } from "./addition.ts";
import { packBatch } from "./packing.ts";
import type { Example } from "./types.ts";

function stream(texts: string[]): () => Example {
  let i = 0;
  return () => additionExample(texts[i++ % texts.length]);
}

Deno.test("packBatch packs whole examples with start flags, shifted targets and answer weights", () => {
  // lengths 6, 6, 8: row of 14 holds the first two (12) then pads; the third opens row 2
  const next = stream(["1+2=3$", "4+4=8$", "9+13=22$"]);
  const b = packBatch(next, 2, 14, 13);
  const row = (r: number, a: ArrayLike<number>) => Array.from(a).slice(r * 14, r * 14 + 14);
  assert.deepEqual(row(0, b.ids), [1, 10, 2, 11, 3, 12, 4, 10, 4, 11, 8, 12, 13, 13]);
  assert.deepEqual(row(0, b.targets), [10, 2, 11, 3, 12, 13, 10, 4, 11, 8, 12, 13, 13, 13]);
  assert.deepEqual(row(0, b.weights), [0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0]);
  assert.deepEqual(row(0, b.starts), [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0]);
  assert.deepEqual(row(1, b.ids).slice(0, 8), [9, 10, 1, 3, 11, 2, 2, 12]);
  assert.deepEqual(row(1, b.weights).slice(0, 8), [0, 0, 0, 0, 1, 1, 1, 0]);
  assert.equal(row(1, b.starts)[0], 1);
  // the stream wraps to "1+2=3$" (6 tokens), which fits at 8..13 and starts there
  assert.deepEqual(row(1, b.starts), [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
  assert.deepEqual(row(1, b.ids).slice(8), [1, 10, 2, 11, 3, 12]);
});

Deno.test("packBatch aligns places with targets: position i holds the place of the token it predicts", () => {
  // "9+13=22$" (lsd answer 22, places 0 1) then "1+2=3$" (place 0); row of 14
  const b = packBatch(stream(["9+13=22$", "1+2=3$"]), 1, 14, 13);
  assert.deepEqual(Array.from(b.places!), [-1, -1, -1, -1, 0, 1, -1, -1, -1, -1, -1, 0, -1, -1]);
  // exactly the scored positions whose target is not EOS (12) carry a place
  for (let i = 0; i < 14; i++) assert.equal(b.places![i] >= 0, b.weights[i] > 0 && b.targets[i] !== 12);
  const plain = () => ({ tokens: Int32Array.of(1, 2), loss: Uint8Array.of(0, 1) });
  assert.equal(packBatch(plain, 1, 4, 13).places, undefined);
  const bad = () => ({ tokens: Int32Array.of(1, 2), loss: Uint8Array.of(0, 1), places: Int16Array.of(-1) });
  assert.throws(() => packBatch(bad, 1, 4, 13), /example has 2 tokens but 1 places/);
});

Deno.test("packBatch fills a row exactly when examples fit and sums weights to the answer count", () => {
  const b = packBatch(stream(["1+2=3$"]), 3, 12, 13);
  assert.equal(b.weights.reduce((s, w) => s + w, 0), 3 * 2 * 2); // 2 examples/row, 2 targets each
  assert.deepEqual(Array.from(b.starts).map((s, i) => (s ? i : -1)).filter((i) => i >= 0), [
    0,
    6,
    12,
    18,
    24,
    30,
  ]);
});

Deno.test("packBatch rejects an example longer than a row and bad sizes", () => {
  assert.throws(
    () => packBatch(stream(["123+456=975$"]), 1, 8, 13),
    /example of 12 tokens does not fit a row of T = 8/,
  );
  assert.throws(() => packBatch(stream(["1+2=3$"]), 0, 8, 13), /B must be an integer >= 1, got 0/);
});

Deno.test("packBatch carries answer places aligned with targets, -1 elsewhere, and none without places", () => {
  // "1+2=3$" (6 tokens) twice in a row of 14: places of the targets, padding -1
  const b = packBatch(stream(["1+2=3$", "9+13=22$"]), 2, 14, 13);
  assert.deepEqual([...b.places!].slice(0, 14), [-1, -1, -1, 0, -1, -1, -1, -1, -1, -1, 0, 1, -1, -1]);
  b.places!.forEach((p, i) => {
    if (p >= 0) assert.ok(b.targets[i] <= 9 && b.weights[i] === 1, `position ${i}`);
  });
  const plain = packBatch(() => ({ tokens: Int32Array.of(1, 2), loss: Uint8Array.of(0, 1) }), 1, 4, 0);
  assert.equal(plain.places, undefined);
  const bad = { tokens: Int32Array.of(1, 2), loss: Uint8Array.of(0, 1), places: Int16Array.of(-1) };
  assert.throws(() => packBatch(() => bad, 1, 4, 0), /example has 2 tokens but 1 places/);
});
