import assert from "node:assert/strict";
import { createRefBackend } from "../rules/reference/backend.ts";
import { additionConfig } from "../tasks/addition.ts";
import { planRun, type RunRequest } from "./plan.ts";
import { withTempDir } from "../testing/temp_dir.ts";

function request(outDir: string, overrides: Partial<RunRequest> = {}): RunRequest {
  return {
    task: "addition",
    mixer: "transformer",
    alignment: "same-step",
    preset: "tiny",
    seed: 0,
    outDir,
    resume: false,
    explicit: new Set<string>(),
    backend: createRefBackend(),
    ...overrides,
  };
}

Deno.test("planRun() applies the addition options to the preset's task and sizes the vocabulary", async () => {
  await withTempDir(async (dir) => {
    const plain = await planRun(request(dir));
    assert.deepEqual(plain.task, additionConfig({ maxDigits: 2 }));
    assert.equal(plain.model.vocabSize, 14);
    const setup = await planRun(request(dir, {
      addition: {
        operandOrder: "lsd",
        bos: true,
        indexHints: 5,
        curriculum: { startDigits: 1, fraction: 0.2 },
      },
    }));
    assert.deepEqual(
      setup.task,
      additionConfig({
        maxDigits: 2,
        operandOrder: "lsd",
        bos: true,
        indexHints: 5,
        curriculum: { startDigits: 1, fraction: 0.2 },
      }),
    );
    assert.equal(setup.model.vocabSize, 14 + 1 + 5);
  });
});

Deno.test("planRun() lengthens a preset's rows to one example of the chosen format, and only then", async () => {
  await withTempDir(async (dir) => {
    // the addition preset: 32 digits in rows of 128; BOS and hints make the longest example 1 + 100 + 97
    assert.equal((await planRun(request(dir, { preset: "addition" }))).train.seqLen, 128);
    const hinted = await planRun(
      request(dir, { preset: "addition", addition: { bos: true, indexHints: 40 } }),
    );
    assert.equal(hinted.train.seqLen, 198);
    // the lab preset: 3 digits in rows of 32, the hinted example (1 + 13 + 10 = 24) fits as it is
    const lab = await planRun(request(dir, { preset: "lab", addition: { bos: true, indexHints: 4 } }));
    assert.equal(lab.train.seqLen, 32);
  });
});

Deno.test("planRun() names the option and its value when an addition option is bad or misplaced", async () => {
  await withTempDir(async (dir) => {
    await assert.rejects(
      () => planRun(request(dir, { addition: { indexHints: 2 } })),
      /--index-hints 2: addition: indexHints must be 0 \(off\) or an integer >= maxDigits \+ 1 = 3/,
    );
    await assert.rejects(
      () => planRun(request(dir, { addition: { curriculum: { startDigits: 5, fraction: 0.1 } } })),
      /--curriculum 5:0.1: addition: curriculum.startDigits/,
    );
    await assert.rejects(
      () => planRun(request(dir, { task: "mqar", addition: { equalLength: true } })),
      /--equal-length applies to the addition task only, not mqar/,
    );
  });
});
