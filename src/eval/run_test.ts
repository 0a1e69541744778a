import { assertEquals, assertRejects, assertThrows } from "./_assert.ts";
import { additionOracle, placeOracle, uniformModel } from "./_oracle.ts";
import { buildGroups, evaluateCheckpoints, heldOutRange } from "./run.ts";
import { formatTable } from "./table.ts";
import { type EvalCheckpoint, loadEvalCheckpoint } from "./load.ts";
import { InputError } from "../errors.ts";
import {
  ADDITION_EOS_ID,
  ADDITION_PAD_ID,
  ADDITION_VOCAB_SIZE,
  additionConfig,
  additionTestSet,
  createTask,
  mqarConfig,
  textConfig,
} from "../tasks/mod.ts";
import { createModel, modelConfig } from "../model/mod.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { teacherForcedAccuracy } from "../train/accuracy.ts";
import { train } from "../train/trainer.ts";
import { trainConfig } from "../train/config.ts";
import type { Batch } from "../model/types.ts";

function additionCheckpoint(upTo: number, seed: number, trainLength = 2): EvalCheckpoint {
  return {
    meta: { path: `oracle${upTo}`, mixer: "falcon1a", alignment: "prefix", seed, trainLength },
    task: additionConfig({ maxDigits: trainLength }),
    model: additionOracle(upTo),
  };
}

Deno.test("evaluateCheckpoints() gives 100% up to the oracle's reach and 0% beyond, split at Ltrain", async () => {
  const progress: number[] = [];
  const report = await evaluateCheckpoints(
    [additionCheckpoint(3, 0), additionCheckpoint(1, 1)],
    { task: "addition", keys: [1, 2, 3, 4], samples: 5, seed: 3, batchSize: 2, date: new Date(0) },
    (p) => progress.push(p.done),
  );
  assertEquals(report.keys, [1, 2, 3, 4]);
  assertEquals(report.date, "1970-01-01T00:00:00.000Z");
  const [a, b] = report.checkpoints;
  assertEquals(a.label, "falcon1a prefix s0");
  assertEquals(a.groups.map((g) => [g.digitAccuracy, g.exactMatch]), [[1, 1], [1, 1], [1, 1], [0, 0]]);
  assertEquals(b.groups.map((g) => [g.digitAccuracy, g.exactMatch]), [[1, 1], [0, 0], [0, 0], [0, 0]]);
  assertEquals(a.groups.map((g) => g.sequences), [5, 5, 5, 5]);
  assertEquals(a.inDistribution?.digitAccuracy, 1);
  assertEquals(a.extrapolation, { from: 3, to: 4, groups: 2, digitAccuracy: 0.5, exactMatch: 0.5 });
  assertEquals(b.inDistribution?.exactMatch, 0.5);
  // 4 lengths x 3 batches (2 + 2 + 1 rows) x 2 models
  assertEquals(progress.length, 24);
  assertEquals(progress[23], 24);
});

Deno.test("evaluateCheckpoints() measures 8 bits per byte for a uniform model on text", async () => {
  const corpus = new TextEncoder().encode("the quick brown fox jumps over the lazy dog. ".repeat(8));
  const config = textConfig(corpus, "fox.txt", 8);
  const report = await evaluateCheckpoints(
    [{
      meta: { path: "u", mixer: "linear", alignment: "same-step", seed: 0, trainLength: null },
      task: config,
      model: uniformModel(256),
    }],
    {
      task: "text",
      keys: [],
      samples: 1000,
      seed: 0,
      batchSize: 4,
      text: { bytes: corpus, name: "fox.txt" },
    },
  );
  const range = heldOutRange(config, corpus);
  assertEquals(range.from, Math.floor(corpus.length * 0.9));
  assertEquals(report.checkpoints[0].text?.bytes, range.to - range.from - 1);
  assertEquals(report.checkpoints[0].text?.bitsPerByte, 8);
  // another file is held out whole
  assertEquals(heldOutRange(config, corpus.subarray(0, 100)), {
    from: 0,
    to: 100,
    what: "the whole file (not the training corpus)",
  });
});

Deno.test("evaluateCheckpoints() refuses a task the checkpoint was not trained for", async () => {
  const mqar: EvalCheckpoint = {
    meta: { path: "m.safetensors", mixer: "deltanet", alignment: "same-step", seed: 0, trainLength: 8 },
    task: mqarConfig(),
    model: uniformModel(65),
  };
  await assertRejects(
    () => evaluateCheckpoints([mqar], { task: "addition", keys: [1], samples: 1, seed: 0, batchSize: 1 }),
    InputError,
    "m.safetensors was trained on the mqar task, not addition",
  );
  const msd = { ...additionCheckpoint(1, 0), task: additionConfig({ format: "msd" }) };
  await assertRejects(
    () =>
      evaluateCheckpoints([additionCheckpoint(1, 0), msd], {
        task: "addition",
        keys: [1],
        samples: 1,
        seed: 0,
        batchSize: 1,
      }),
    InputError,
    "need different test sets",
  );
});

Deno.test("evaluateCheckpoints() agrees with the trainer's teacherForcedAccuracy on a real (untrained) model", async () => {
  const model = createModel(
    createRefBackend(),
    modelConfig({
      vocabSize: ADDITION_VOCAB_SIZE,
      dModel: 8,
      heads: 2,
      layers: 1,
      chunkSize: 4,
      mixer: "falcon1",
    }),
    3,
  );
  const checkpoint: EvalCheckpoint = {
    meta: { path: "m", mixer: "falcon1", alignment: "prefix", seed: 3, trainLength: 2 },
    task: additionConfig({ maxDigits: 2 }),
    model,
  };
  const report = await evaluateCheckpoints([checkpoint], {
    task: "addition",
    keys: [3],
    samples: 6,
    seed: 9,
    batchSize: 4,
  });
  const trainer = await teacherForcedAccuracy(model, additionTestSet(3, 6, 9), {
    eosId: ADDITION_EOS_ID,
    padId: ADDITION_PAD_ID,
  });
  const group = report.checkpoints[0].groups[0];
  assertEquals(group.tokens, trainer.tokens);
  assertEquals(group.digitAccuracy, trainer.tokenAccuracy);
  assertEquals(group.exactMatch, trainer.exactMatch);
});

Deno.test("every addition option round-trips: train 2 steps -> checkpoint -> eval task and examples in that format", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const task = additionConfig({
      maxDigits: 2,
      format: "msd",
      operandOrder: "lsd",
      bos: true,
      indexHints: 5,
      equalLength: true,
      curriculum: { startDigits: 1, fraction: 0.5 },
    });
    const taskInstance = createTask(task);
    const trained = await train({
      backend: createRefBackend(),
      model: modelConfig({ vocabSize: taskInstance.vocabSize, dModel: 8, heads: 2, layers: 1, chunkSize: 4 }),
      task,
      train: trainConfig({ steps: 2, batchSize: 2, seqLen: taskInstance.maxExampleLength, warmupSteps: 1 }),
      runDir: dir,
    });
    const checkpoint = await loadEvalCheckpoint(trained.checkpointPath, createRefBackend());
    assertEquals(checkpoint.task, task);
    assertEquals(checkpoint.model.config.vocabSize, 14 + 1 + 5);
    const options = { task: "addition" as const, keys: [1, 3], samples: 3, seed: 5, batchSize: 3 };
    const groups = buildGroups(checkpoint, options);
    const decode = createTask(checkpoint.task).decode;
    for (const [g, digits] of [[0, 1], [1, 3]]) {
      for (const batch of groups[g].batches() as Iterable<Batch>) {
        for (let r = 0; r < batch.B; r++) {
          const text = decode(batch.ids.subarray(r * batch.T, (r + 1) * batch.T)).replace(/_+$/, "");
          // BOS, both operands of exactly `digits` digits, units first, hints from h_0; msd answer
          const operand = Array.from({ length: digits }, (_, i) => `\\[${i}\\]\\d`).join("");
          const m = new RegExp(`^\\^${operand}\\+${operand}=((\\[\\d\\]\\d)+)\\$$`).exec(text);
          assertEquals(m !== null, true, text);
          const answerPlaces = [...m![1].matchAll(/\[(\d)\]/g)].map((h) => Number(h[1]));
          assertEquals(answerPlaces, answerPlaces.map((_, i) => answerPlaces.length - 1 - i), text);
        }
      }
    }
    // the full evaluation runs on those groups (an untrained model: any accuracy, but every sum scored)
    const report = await evaluateCheckpoints([checkpoint], options);
    assertEquals(report.checkpoints[0].groups.map((g) => g.sequences), [3, 3]);
    // at a hint offset the same sums carry hint ids from the offset on; the report and its table say so
    const shifted = buildGroups(checkpoint, { ...options, keys: [1], hintOffset: 2 });
    const unshifted = buildGroups(checkpoint, { ...options, keys: [1] });
    const texts = (g: typeof shifted) =>
      [...(g[0].batches() as Iterable<Batch>)].flatMap((batch) =>
        Array.from(
          { length: batch.B },
          (_, r) => decode(batch.ids.subarray(r * batch.T, (r + 1) * batch.T)).replace(/_+$/, ""),
        )
      );
    assertEquals(
      texts(shifted),
      texts(unshifted).map((t) => t.replace(/\[(\d)\]/g, (_, h) => `[${Number(h) + 2}]`)),
    );
    const shiftedReport = await evaluateCheckpoints([checkpoint], { ...options, keys: [1], hintOffset: 2 });
    assertEquals(shiftedReport.hintOffset, 2);
    assertEquals(formatTable(shiftedReport).split("\n")[0].endsWith(", hints from id 2"), true);
    assertEquals("hintOffset" in report, false);
    // 3-digit sums need ids up to offset + 3: from id 2 that is 5, beyond the checkpoint's 5 ids (0..4)
    await assertRejects(
      () => evaluateCheckpoints([checkpoint], { ...options, hintOffset: 2 }),
      InputError,
      "need 4 hint ids (places 0..3) from hint id 2; the task has indexHints = 5",
    );
    assertThrows(
      () => buildGroups(checkpoint, { ...options, task: "mqar", hintOffset: 1 }),
      InputError,
      "the hint offset applies to the addition task only, not mqar",
    );
    // a checkpoint of another format needs other test sets
    const lsdOperands = {
      ...checkpoint,
      meta: { ...checkpoint.meta, path: "other" },
      task: { ...task, operandOrder: "msd" as const },
    };
    await assertRejects(
      () => evaluateCheckpoints([checkpoint, lsdOperands], options),
      InputError,
      'other has addition operandOrder "msd", ' +
        `${trained.checkpointPath} "lsd": they need different test sets`,
    );
    // lengths beyond the checkpoint's hint ids are an input error naming the file
    await assertRejects(
      () => evaluateCheckpoints([checkpoint], { ...options, keys: [5] }),
      InputError,
      "operands of 5 digits need 6 hint ids",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Per place of the answers of `additionTestSet(n, samples, seed)` for each n: answer digits counted. */
function placeCounts(lengths: number[], samples: number, seed: number, format: "lsd" | "msd"): number[] {
  const counts: number[] = [];
  for (const n of lengths) {
    for (const ex of additionTestSet(n, samples, seed, format)) {
      const text = String.fromCharCode(...[...ex.tokens].map((t) => (t <= 9 ? 48 + t : 32)));
      const answer = text.split(" ").filter((part) => part !== "")[2]; // a, b, then the answer digits
      for (let place = 0; place < answer.length; place++) counts[place] = (counts[place] ?? 0) + 1;
    }
  }
  return counts;
}

Deno.test("evaluateCheckpoints() on a model right on places < L and wrong beyond: exact per-place numbers", async () => {
  const L = 3;
  const lengths = [1, 2, 3, 4, 5];
  for (const format of ["lsd", "msd"] as const) {
    const checkpoint: EvalCheckpoint = {
      meta: { path: `places-${format}`, mixer: "falcon1a", alignment: "prefix", seed: 0, trainLength: L },
      task: additionConfig({ maxDigits: L, format }),
      model: placeOracle((place) => place < L, format),
    };
    const report = await evaluateCheckpoints([checkpoint], {
      task: "addition",
      keys: lengths,
      samples: 7,
      seed: 5,
      batchSize: 3,
    });
    const c = report.checkpoints[0];
    const counts = placeCounts(lengths, 7, 5, format);
    assertEquals(c.places!.perPlace.map((p) => p.tokens), counts);
    assertEquals(c.places!.perPlace.map((p) => p.digitAccuracy), counts.map((_, p) => (p < L ? 1 : 0)));
    const beyond = counts.slice(L).reduce((s, n) => s + n, 0);
    assertEquals(c.places!.extrapolation, {
      from: L,
      to: counts.length - 1,
      tokens: beyond,
      digitAccuracy: 0,
    });
    assertEquals(c.places!.inRange?.digitAccuracy, 1);
    assertEquals(c.places!.inRange?.tokens, counts.slice(0, L).reduce((s, n) => s + n, 0));
    // per length: right digits are the places < L of that length's answers
    for (const g of c.groups) {
      const own = placeCounts([g.key], 7, 5, format);
      const right = own.slice(0, L).reduce((s, n) => s + n, 0);
      assertEquals(g.digitAccuracy, right / own.reduce((s, n) => s + n, 0));
    }
    assertEquals(c.reference?.trainLength, L);
    assertEquals(c.reference?.perLength.map((g) => g.key), lengths);
  }
});

Deno.test("evaluateCheckpoints() pools the extrapolation over digits: a model right on even places beyond L", async () => {
  const L = 2;
  const lengths = [2, 4, 6];
  const report = await evaluateCheckpoints([{
    meta: { path: "even", mixer: "falcon3a", alignment: "prefix", seed: 1, trainLength: L },
    task: additionConfig({ maxDigits: L }),
    model: placeOracle((place) => place < L || place % 2 === 0),
  }], { task: "addition", keys: lengths, samples: 9, seed: 2, batchSize: 4 });
  const counts = placeCounts(lengths, 9, 2, "lsd");
  const beyond = counts.slice(L);
  const evenBeyond = beyond.filter((_, i) => (L + i) % 2 === 0).reduce((s, n) => s + n, 0);
  const places = report.checkpoints[0].places!;
  assertEquals(places.extrapolation?.digitAccuracy, evenBeyond / beyond.reduce((s, n) => s + n, 0));
  assertEquals(places.perPlace[3].digitAccuracy, 0);
  assertEquals(places.perPlace[4].digitAccuracy, 1);
});
