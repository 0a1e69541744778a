import assert from "node:assert/strict";
import {
  ADDITION_EOS_ID,
  additionConfig,
  additionExample,
  additionTestSet,
  additionTestStream,
  additionText,
  createAdditionTask,
  decodeAdditionAnswer,
  parseAdditionPrompt,
} from "./addition.ts";
import { DataRng } from "./rng.ts";

/** Parse `a+b=answer$`, check the sum in the given format, return the operand lengths. */
function checkSum(text: string, format: "lsd" | "msd"): [number, number] {
  const m = /^(\d+)\+(\d+)=(\d+)\$$/.exec(text);
  assert.ok(m, `malformed example "${text}"`);
  const [, a, b, answer] = m;
  for (const op of [a, b]) assert.ok(op.length === 1 || op[0] !== "0", `leading zero in "${text}"`);
  const sum = (BigInt(a) + BigInt(b)).toString();
  assert.equal(decodeAdditionAnswer(answer, format), sum, `wrong answer in "${text}"`);
  return [a.length, b.length];
}

Deno.test("addition samples parse as a+b=c$ with the right sum, lsd first by default", () => {
  const task = createAdditionTask(additionConfig({ maxDigits: 6 }));
  const rng = new DataRng(7);
  const seen = new Set<string>();
  for (let i = 0; i < 500; i++) {
    const ex = task.sample(rng, "train");
    const text = task.decode(ex.tokens);
    const [la, lb] = checkSum(text, "lsd");
    assert.ok(la >= 1 && la <= 6 && lb >= 1 && lb <= 6);
    seen.add(`${la},${lb}`);
    assert.ok(ex.tokens.length <= task.maxExampleLength);
    assert.equal(ex.tokens[ex.tokens.length - 1], ADDITION_EOS_ID);
  }
  // operand lengths are drawn independently: every (la, lb) pair of [1, 6]^2 appears
  assert.equal(seen.size, 36);
});

Deno.test("addition lsd answer is the reversed sum, msd the sum itself", () => {
  assert.equal(createAdditionTask(additionConfig()).decode(additionExample("95+7=201$").tokens), "95+7=201$");
  const rng = new DataRng(3);
  const msd = createAdditionTask(additionConfig({ maxDigits: 5, format: "msd" }));
  for (let i = 0; i < 200; i++) checkSum(msd.decode(msd.sample(rng, "train").tokens), "msd");
  assert.equal(decodeAdditionAnswer("201$", "lsd"), "102");
  assert.equal(decodeAdditionAnswer("102", "msd"), "102");
});

Deno.test("addition supervises exactly the answer tokens and EOS", () => {
  const ex = additionExample("12+345=753$");
  assert.deepEqual(Array.from(ex.loss), [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
});

Deno.test("additionExample() gives answer digits their place value in the answer order, -1 elsewhere", () => {
  // 12 + 345 = 357: lsd answer "753" has places 0 1 2, msd answer "357" has places 2 1 0
  assert.deepEqual(Array.from(additionExample("12+345=753$").places!), [
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    0,
    1,
    2,
    -1,
  ]);
  assert.deepEqual(
    Array.from(additionExample("12+345=357$", additionConfig({ format: "msd" })).places!),
    [-1, -1, -1, -1, -1, -1, -1, 2, 1, 0, -1],
  );
  // a carry makes the answer one digit longer than the operands: 95 + 7 = 102, msd "102" -> places 2 1 0
  assert.deepEqual(
    Array.from(additionExample("95+7=102$", additionConfig({ format: "msd" })).places!).slice(5),
    [2, 1, 0, -1],
  );
  const task = createAdditionTask(additionConfig({ maxDigits: 4, format: "msd" }));
  const ex = task.sample(new DataRng(5), "train");
  const answer = task.decode(ex.tokens).split("=")[1].replace("$", "");
  const expected = [...answer].map((_, j) => answer.length - 1 - j);
  assert.deepEqual(Array.from(ex.places!).filter((p) => p >= 0), expected);
});

Deno.test("addition sampling is deterministic for a seed and differs across seeds", () => {
  const task = createAdditionTask(additionConfig({ maxDigits: 8 }));
  const draw = (seed: number) => {
    const rng = new DataRng(seed);
    return Array.from({ length: 20 }, () => task.decode(task.sample(rng, "train").tokens)).join(" ");
  };
  assert.equal(draw(11), draw(11));
  assert.notEqual(draw(11), draw(12));
});

Deno.test("additionTestSet gives both operands exactly the requested length, one seeded set per length", () => {
  const task = createAdditionTask(additionConfig());
  for (const digits of [1, 5, 40]) {
    const set = additionTestSet(digits, 30, 1);
    for (const ex of set) assert.deepEqual(checkSum(task.decode(ex.tokens), "lsd"), [digits, digits]);
    assert.deepEqual(
      additionTestSet(digits, 30, 1).map((e) => task.decode(e.tokens)),
      set.map((e) => task.decode(e.tokens)),
    );
  }
  // lengths 3 and 4 share nothing in their streams: the first operand differs in length and value
  const a = additionTestSet(3, 5, 1).map((e) => task.decode(e.tokens));
  const b = additionTestSet(3, 5, 2).map((e) => task.decode(e.tokens));
  assert.notDeepEqual(a, b);
});

Deno.test("addition encode rejects characters outside the vocabulary, naming them", () => {
  const task = createAdditionTask(additionConfig());
  assert.throws(() => task.encode("12-3="), /character "-" at index 2/);
  assert.throws(() => additionConfig({ maxDigits: 0 }), /maxDigits must be an integer >= 1, got 0/);
  assert.throws(() => additionConfig({ format: "xyz" as "lsd" }), /format must be lsd or msd, got "xyz"/);
});

Deno.test("parseAdditionPrompt accepts a+b= and nothing else", () => {
  assert.deepEqual(parseAdditionPrompt("12345+678="), { a: "12345", b: "678" });
  assert.equal(parseAdditionPrompt("12345+678"), null);
  assert.equal(parseAdditionPrompt("1+2=3"), null);
});

Deno.test("equalLength draws one length for both training operands; the default draws two", () => {
  const lengths = (equalLength: boolean) => {
    const task = createAdditionTask(additionConfig({ maxDigits: 5, equalLength }));
    const rng = new DataRng(2);
    return Array.from({ length: 300 }, () => {
      const text = task.decode(task.sample(rng, "train").tokens);
      return text.slice(0, text.indexOf("=")).split("+").map((s) => s.length);
    });
  };
  const equal = lengths(true);
  assert.ok(equal.every(([a, b]) => a === b));
  assert.deepEqual(new Set(equal.map(([a]) => a)), new Set([1, 2, 3, 4, 5]));
  assert.ok(lengths(false).some(([a, b]) => a !== b));
});

Deno.test("additionTestSet writes the configuration's format with hints at offset 0, same draws as the default", () => {
  const config = additionConfig({ maxDigits: 4, operandOrder: "lsd", bos: true, indexHints: 9 });
  const task = createAdditionTask(config);
  const plain = additionTestSet(4, 10, 3).map((e) => createAdditionTask(additionConfig()).decode(e.tokens));
  const formatted = additionTestSet(4, 10, 3, config).map((e) => task.decode(e.tokens));
  formatted.forEach((text, i) => {
    // the same sum, written with BOS, reversed operands and hints from h_0
    const [a, b] = plain[i].slice(0, plain[i].indexOf("=")).split("+");
    assert.equal(text, additionText(a, b, config, 0));
    assert.match(text, /^\^\[0\]\d\[1\]\d\[2\]\d\[3\]\d\+\[0\]/);
  });
  // a bare answer order still means the default format with that order
  assert.deepEqual(
    additionTestSet(2, 3, 1, "msd"),
    additionTestSet(2, 3, 1, additionConfig({ format: "msd" })),
  );
  // a length beyond the hint ids is refused
  assert.throws(() => additionTestSet(9, 1, 0, config), /operands of 9 digits need 10 hint ids/);
});

Deno.test("additionTestStream at a hint offset writes the same sums with every hint id moved by the offset", () => {
  const config = additionConfig({ maxDigits: 4, operandOrder: "lsd", bos: true, indexHints: 9 });
  const task = createAdditionTask(config);
  const atZero = additionTestStream(4, 3, config);
  const atThree = additionTestStream(4, 3, config, 3);
  for (let i = 0; i < 5; i++) {
    const zero = task.decode(atZero().tokens);
    const three = task.decode(atThree().tokens);
    assert.equal(three, zero.replace(/\[(\d)\]/g, (_, h) => `[${Number(h) + 3}]`));
    assert.match(three, /^\^\[3\]\d\[4\]\d\[5\]\d\[6\]\d\+\[3\]/);
  }
  // 4-digit operands need places 0..4: from id 4 that is id 8, the last of 9; from id 5 it does not fit
  additionTestStream(4, 3, config, 4);
  assert.throws(
    () => additionTestStream(4, 3, config, 5),
    /need 5 hint ids \(places 0\.\.4\) from hint id 5; the task has indexHints = 9/,
  );
  assert.throws(() => additionTestStream(4, 3, config, -1), /hint offset must be an integer >= 0, got -1/);
  assert.throws(
    () => additionTestStream(4, 3, additionConfig(), 1),
    /hint offset 1 given but the task has no index hints/,
  );
});
