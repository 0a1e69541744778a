import { assertEquals, assertThrows } from "./_assert.ts";
import { placeOracle, uniformModel } from "./_oracle.ts";
import { trainingEvaluation } from "./periodic.ts";
import { additionConfig, additionTestSet, deriveSeed, mqarConfig, textConfig } from "../tasks/mod.ts";

Deno.test("trainingEvaluation() scores 64 fixed sums at the training length, per place too", async () => {
  const run = trainingEvaluation(additionConfig({ maxDigits: 3 }), { seed: 6 });
  const model = placeOracle((place) => place < 3); // wrong only on the carry digit (place 3)
  // the same sums as additionTestSet() at 3 digits from the "eval-every" seed
  const sums = additionTestSet(3, 64, deriveSeed(6, "eval-every"));
  const carries = sums.filter((ex) => ex.places!.some((p) => p === 3)).length;
  const first = await run(model, 10);
  const { loss, ...scores } = first;
  assertEquals(Number.isFinite(loss) && loss >= 0, true);
  assertEquals(scores, {
    digitAccuracy: (3 * 64) / (3 * 64 + carries),
    exactMatch: (64 - carries) / 64,
    placesInRange: 1,
    place0: 1,
    place1: 1,
    place2: 1,
    place3: 0,
  });
  assertEquals(carries > 0 && carries < 64, true);
  assertEquals(await run(model, 20), first); // a fixed test set: the same numbers every time
  const other = await trainingEvaluation(additionConfig({ maxDigits: 3 }), { seed: 7 })(model, 10);
  assertEquals(other.digitAccuracy === first.digitAccuracy && other.exactMatch === first.exactMatch, false);
});

Deno.test("trainingEvaluation() logs recall for mqar and bits per byte for text", async () => {
  const mqar = mqarConfig({ keys: 6, values: 7, pairs: 2, queries: 2 });
  const recall = await trainingEvaluation(mqar, { seed: 0, samples: 5 })(uniformModel(6 + 7 + 1), 1);
  assertEquals(Object.keys(recall), ["loss", "accuracy", "exactMatch"]);
  // the uniform model's validation loss is ln V per query
  assertEquals(Math.abs(recall.loss - Math.log(6 + 7 + 1)) < 1e-9, true);
  assertEquals(recall.accuracy >= 0 && recall.accuracy <= 1, true);
  const corpus = new TextEncoder().encode("a tiny corpus for the held-out tail. ".repeat(10));
  const text = textConfig(corpus, "tiny.txt", 8);
  const bytes = await trainingEvaluation(text, { seed: 0, corpus })(uniformModel(256), 1);
  assertEquals(bytes.bitsPerByte, 8);
  assertEquals(Math.abs(bytes.loss - 8 * Math.LN2) < 1e-9, true);
  assertThrows(
    () => trainingEvaluation(text, { seed: 0 }),
    RangeError,
    "the text task needs its corpus bytes",
  );
});
