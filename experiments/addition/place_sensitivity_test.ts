import { assertEquals } from "../../src/eval/_assert.ts";
import type { ScoringModel } from "../../src/eval/evaluate.ts";
import { additionConfig } from "../../src/tasks/mod.ts";
import { formatSensitivity, placeSensitivity } from "./place_sensitivity.ts";

const config = additionConfig({ maxDigits: 4, operandOrder: "lsd", bos: true, indexHints: 8 });
const V = 32;

/** A model whose logits at every position are a one-hot of `f(digit tokens read so far)` mod 10. */
function fakeModel(f: (digits: number[]) => number): ScoringModel {
  return {
    config: { vocabSize: V },
    logits(batch) {
      const out = new Float32Array(batch.T * V).fill(-30);
      const seen: number[] = [];
      for (let t = 0; t < batch.T; t++) {
        if (batch.ids[t] <= 9) seen.push(batch.ids[t]);
        out[t * V + (((f(seen) % 10) + 10) % 10)] = 30;
      }
      return Promise.resolve(out);
    },
  };
}

const options = { digits: 4, trials: 3, places: [0, 2], seed: 5 };

Deno.test("place_sensitivity: a model that ignores its input depends on no digit", async () => {
  const rows = await placeSensitivity(fakeModel(() => 7), config, options);
  assertEquals(rows.map((r) => r.place), [0, 2]);
  for (const r of rows) {
    assertEquals(r.a.slice(0, 3), [0, 0, 0]);
    assertEquals(r.b.slice(0, 3), [0, 0, 0]);
    assertEquals(Number.isNaN(r.a[3]) && Number.isNaN(r.b[3]), true); // the leading digit is not moved
  }
});

Deno.test("place_sensitivity: a model that reads every operand digit depends on each completely", async () => {
  // the sum of the digits read before the answer's first digit: moving one operand digit by 5 moves it by 5
  const rows = await placeSensitivity(
    fakeModel((d) => d.slice(0, 8).reduce((s, x) => s + x, 0)),
    config,
    options,
  );
  for (const r of rows) {
    for (const x of [...r.a.slice(0, 3), ...r.b.slice(0, 3)]) assertEquals(Math.abs(x - 1) < 1e-9, true);
  }
  assertEquals(
    formatSensitivity(rows).split("\n")[0],
    "place 0: a0 1.00  a1 1.00  a2 1.00  b0 1.00  b1 1.00  b2 1.00",
  );
});
