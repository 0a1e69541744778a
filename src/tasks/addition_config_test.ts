import assert from "node:assert/strict";
import { type AdditionConfig, additionConfig } from "./addition_config.ts";
import { normalizeTaskConfig } from "./mod.ts";

Deno.test("additionConfig() defaults mean the first version's format: msd operands, lsd answer, no extras", () => {
  assert.deepEqual(additionConfig(), {
    task: "addition",
    maxDigits: 32,
    format: "lsd",
    operandOrder: "msd",
    bos: false,
    indexHints: 0,
    equalLength: false,
    curriculum: null,
  });
  // undefined fields take the defaults; unknown fields are dropped
  const c = additionConfig({ maxDigits: 4, bos: undefined, extra: 1 } as unknown as AdditionConfig);
  assert.equal(c.bos, false);
  assert.equal("extra" in c, false);
});

Deno.test("an old-format task config (no new fields) normalises to msd operands, no BOS, no hints", () => {
  const old = JSON.parse('{"task":"addition","maxDigits":5,"format":"msd"}') as AdditionConfig;
  const normalised = normalizeTaskConfig(old);
  assert.deepEqual(normalised, additionConfig({ maxDigits: 5, format: "msd" }));
  assert.deepEqual(
    [
      normalised.task === "addition" && normalised.operandOrder,
      normalised.task === "addition" && normalised.bos,
      normalised.task === "addition" && normalised.indexHints,
    ],
    ["msd", false, 0],
  );
  // normalising twice changes nothing, and the JSON has one fixed key order
  assert.equal(JSON.stringify(normalizeTaskConfig(normalised)), JSON.stringify(normalised));
});

Deno.test("additionConfig() keeps every option it is given", () => {
  const c = additionConfig({
    maxDigits: 8,
    format: "msd",
    operandOrder: "lsd",
    bos: true,
    indexHints: 24,
    equalLength: true,
    curriculum: { startDigits: 2, fraction: 0.25 },
  });
  assert.deepEqual(
    [c.format, c.operandOrder, c.bos, c.indexHints, c.equalLength, c.curriculum],
    ["msd", "lsd", true, 24, true, { startDigits: 2, fraction: 0.25 }],
  );
  // the smallest hint count: one id per answer place 0..maxDigits
  assert.equal(additionConfig({ maxDigits: 8, indexHints: 9 }).indexHints, 9);
});

Deno.test("additionConfig() rejects every bad field with a RangeError naming the field and the value", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ maxDigits: 0 }, /maxDigits must be an integer >= 1, got 0/],
    [{ format: "xyz" }, /format must be lsd or msd, got "xyz"/],
    [{ operandOrder: "reversed" }, /operandOrder must be msd or lsd, got "reversed"/],
    [{ bos: "yes" }, /bos must be true or false, got "yes"/],
    [{ equalLength: 1 }, /equalLength must be true or false, got 1/],
    [{ indexHints: -1 }, /indexHints must be 0 \(off\) or an integer >= maxDigits \+ 1 = 9 .*, got -1/],
    [{ indexHints: 8 }, /indexHints must be 0 \(off\) or an integer >= maxDigits \+ 1 = 9 .*, got 8/],
    [{ indexHints: 12.5 }, /indexHints .* got 12.5/],
    [{ curriculum: "8:0.1" }, /curriculum must be null or \{ startDigits, fraction \}, got "8:0.1"/],
    [
      { curriculum: { startDigits: 0, fraction: 0.1 } },
      /curriculum.startDigits .*\[1, maxDigits = 8\], got 0/,
    ],
    [{ curriculum: { startDigits: 9, fraction: 0.1 } }, /curriculum.startDigits .*, got 9/],
    [{ curriculum: { startDigits: 2, fraction: 0 } }, /curriculum.fraction must be in \(0, 1\], got 0/],
    [{ curriculum: { startDigits: 2, fraction: 1.5 } }, /curriculum.fraction must be in \(0, 1\], got 1.5/],
    [{ curriculum: { startDigits: 2 } }, /curriculum.fraction must be in \(0, 1\], got undefined/],
  ];
  for (const [fields, pattern] of cases) {
    assert.throws(
      () => additionConfig({ maxDigits: 8, ...fields } as Partial<AdditionConfig>),
      (err: unknown) => err instanceof RangeError && pattern.test(err.message),
      JSON.stringify(fields),
    );
  }
});
