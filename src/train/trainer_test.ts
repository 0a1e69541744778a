import assert from "node:assert/strict";
import { loadCheckpoint } from "../checkpoint/checkpoint.ts";
import { modelConfig } from "../model/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { additionConfig } from "../tasks/addition.ts";
import { mqarConfig } from "../tasks/mqar.ts";
import { createToyModel, type ToyOptions } from "./_toy_model.ts";
import { trainConfig } from "./config.ts";
import { parseJsonl } from "./metrics_log.ts";
import {
  CHECKPOINT_FILE,
  METRICS_FILE,
  type ModelFactory,
  train,
  TrainingDivergedError,
  type TrainSetup,
  validateSetup,
} from "./trainer.ts";
import { createTask } from "../tasks/mod.ts";
import { trainingEvaluation } from "../eval/periodic.ts";
import { withTempDir } from "../testing/temp_dir.ts";

function setup(runDir: string, overrides: Partial<TrainSetup> = {}, toy: ToyOptions = {}): TrainSetup {
  return {
    backend: createRefBackend(),
    model: modelConfig({ vocabSize: 14, dModel: 8, heads: 2 }),
    task: additionConfig({ maxDigits: 3 }),
    train: trainConfig({
      steps: 12,
      batchSize: 4,
      seqLen: 16,
      lr: 0.05,
      warmupSteps: 3,
      checkpointEvery: 0,
      seed: 9,
    }),
    runDir,
    createModel: (b, c, s) => createToyModel(b, c, s, toy),
    ...overrides,
  };
}

Deno.test("train is deterministic for a seed, learns, and logs one JSONL line per step", async () => {
  await withTempDir(async (dir) => {
    const a = await train(
      setup(`${dir}/a`, {
        train: trainConfig({ steps: 40, batchSize: 4, seqLen: 16, lr: 0.05, seed: 1, warmupSteps: 3 }),
      }),
    );
    const b = await train(
      setup(`${dir}/b`, {
        train: trainConfig({ steps: 40, batchSize: 4, seqLen: 16, lr: 0.05, seed: 1, warmupSteps: 3 }),
      }),
    );
    const c = await train(
      setup(`${dir}/c`, {
        train: trainConfig({ steps: 40, batchSize: 4, seqLen: 16, lr: 0.05, seed: 2, warmupSteps: 3 }),
      }),
    );
    assert.equal(a.status, "completed");
    assert.deepEqual(a.losses, b.losses);
    assert.notDeepEqual(a.losses, c.losses);
    const head = a.losses.slice(0, 5).reduce((s, x) => s + x) / 5;
    const tail = a.losses.slice(-5).reduce((s, x) => s + x) / 5;
    // a bigram model cannot add: it only learns the token statistics (ln 14 = 2.64 at chance)
    assert.ok(tail < 0.92 * head, `toy bigram loss did not fall: ${head} -> ${tail}`);
    const lines = parseJsonl(await Deno.readTextFile(`${dir}/a/${METRICS_FILE}`), METRICS_FILE);
    assert.equal(lines.length, 40);
    assert.deepEqual(lines.map((l) => l.loss), a.losses);
    assert.equal(a.parameterCount, 14 * 8 * 2 + 14);
    assert.ok(a.peakRssBytes > 0);
  });
});

Deno.test("an interrupted run resumed from its checkpoint reproduces the uninterrupted losses bit for bit", async () => {
  await withTempDir(async (dir) => {
    const full = await train(setup(`${dir}/full`));
    const controller = new AbortController();
    const first = await train(setup(`${dir}/part`, {
      signal: controller.signal,
      onProgress: (p) => p.event === "step" && p.step === 5 && controller.abort(),
    }));
    assert.equal(first.status, "interrupted");
    assert.equal(first.step, 5);
    const saved = await loadCheckpoint(first.checkpointPath);
    assert.equal(saved.step, 5);
    const rest = await train(setup(`${dir}/part`, { resumeFrom: saved }));
    assert.equal(rest.status, "completed");
    assert.equal(rest.firstStep, 6);
    assert.equal(rest.step, 12);
    assert.deepEqual([...first.losses, ...rest.losses], full.losses); // exact equality, not a tolerance
    const a = await loadCheckpoint(full.checkpointPath);
    const b = await loadCheckpoint(rest.checkpointPath);
    assert.deepEqual(b.params, a.params);
    assert.deepEqual(b.adamV, a.adamV);
  });
});

Deno.test("a NaN gradient stops training with an error naming the step and keeps the last checkpoint", async () => {
  await withTempDir(async (dir) => {
    const s = setup(
      dir,
      { train: trainConfig({ steps: 12, batchSize: 2, seqLen: 16, checkpointEvery: 2 }) },
      { nanGradAtCall: 5 },
    );
    await assert.rejects(() => train(s), (e: Error) => {
      assert.ok(e instanceof TrainingDivergedError);
      assert.equal(e.step, 5);
      assert.match(e.message, /diverged at step 5: gradient norm is NaN/);
      return true;
    });
    const kept = await loadCheckpoint(`${dir}/${CHECKPOINT_FILE}`);
    assert.equal(kept.step, 4);
    for (const t of Object.values(kept.params)) assert.ok(t.data.every(Number.isFinite));
  });
});

Deno.test("an infinite loss stops training at that step before the first checkpoint is overwritten", async () => {
  await withTempDir(async (dir) => {
    const s = setup(
      dir,
      { train: trainConfig({ steps: 12, batchSize: 2, seqLen: 16, checkpointEvery: 3 }) },
      { infLossAtCall: 7 },
    );
    await assert.rejects(() => train(s), /diverged at step 7: loss is Infinity/);
    assert.equal((await loadCheckpoint(`${dir}/${CHECKPOINT_FILE}`)).step, 6);
  });
});

Deno.test("train checks the setup before any work", async () => {
  await withTempDir(async (dir) => {
    await assert.rejects(
      () => train(setup(`${dir}/x`, { train: trainConfig({ seqLen: 8 }) })),
      /seqLen 8 is shorter than the longest addition example \(13 tokens\)/,
    );
    await assert.rejects(
      () => train(setup(`${dir}/x`, { model: modelConfig({ vocabSize: 20, dModel: 8, heads: 2 }) })),
      /model vocabSize 20 does not match task addition \(14\)/,
    );
    const done = await train(
      setup(`${dir}/ok`, { train: trainConfig({ steps: 1, batchSize: 1, seqLen: 16 }) }),
    );
    const saved = await loadCheckpoint(done.checkpointPath);
    const mqar = mqarConfig({ keys: 6, values: 7, pairs: 2, queries: 2 });
    await assert.rejects(
      () => train(setup(`${dir}/y`, { task: mqar, resumeFrom: saved })),
      /checkpoint is from task "addition", not "mqar"/,
    );
    await assert.rejects(() => Deno.stat(`${dir}/x`)); // nothing was created for the rejected setups
  });
});

Deno.test("validateSetup compares a resumed task config after normalising both (old checkpoints resume)", async () => {
  await withTempDir(async (dir) => {
    const done = await train(
      setup(`${dir}/ok`, { train: trainConfig({ steps: 1, batchSize: 1, seqLen: 16 }) }),
    );
    const saved = await loadCheckpoint(done.checkpointPath);
    const task = createTask(saved.task);
    // the config as the first version stored it: no format options
    const old = { ...saved, task: JSON.parse('{"task":"addition","maxDigits":3,"format":"lsd"}') };
    validateSetup(setup(dir, { resumeFrom: old }), task);
    validateSetup(
      setup(dir, { task: JSON.parse('{"task":"addition","maxDigits":3}'), resumeFrom: saved }),
      task,
    );
    const hinted = additionConfig({ maxDigits: 3, indexHints: 4 });
    assert.throws(
      () => validateSetup(setup(dir, { task: hinted, resumeFrom: old }), task),
      /the checkpoint's task config .* differs from .*"indexHints":4/,
    );
  });
});

Deno.test("the trainer passes the step to the sampler: a curriculum run trains on short sums first", async () => {
  await withTempDir(async (dir) => {
    const curriculum = additionConfig({ maxDigits: 3, curriculum: { startDigits: 1, fraction: 0.5 } });
    const seen: number[] = [];
    const recordingModel: ModelFactory = (b, c, s) => {
      const toy = createToyModel(b, c, s);
      return {
        ...toy,
        config: toy.config,
        parameters: () => toy.parameters(),
        logits: (batch) => toy.logits(batch),
        forwardBackward(batch) {
          // the longest first operand of the batch: the run of digits at each sequence start
          let longest = 0;
          for (let i = 0; i < batch.B * batch.T; i++) {
            if (!batch.starts[i]) continue;
            let n = 0;
            while (i + n < batch.B * batch.T && batch.ids[i + n] <= 9) n++;
            longest = Math.max(longest, n);
          }
          seen.push(longest);
          return toy.forwardBackward(batch);
        },
      };
    };
    await train(setup(dir, {
      task: curriculum,
      train: trainConfig({ steps: 6, batchSize: 4, seqLen: 16, warmupSteps: 1 }),
      createModel: recordingModel,
    }));
    // 3 ramp steps over 3 stages: up to 1, 2, 3 digits, then 3
    assert.equal(seen.length, 6);
    assert.ok(seen[0] === 1 && seen[1] <= 2, seen.join());
    assert.equal(Math.max(...seen.slice(3)), 3, seen.join());
    const saved = await loadCheckpoint(`${dir}/${CHECKPOINT_FILE}`);
    assert.deepEqual(saved.task, curriculum);
  });
});

Deno.test("resume is bit-identical with the real FalconLM (falcon1, chunked form) too", async () => {
  await withTempDir(async (dir) => {
    const real = (runDir: string, extra: Partial<TrainSetup> = {}): TrainSetup => ({
      ...setup(runDir),
      model: modelConfig({ vocabSize: 14, dModel: 16, heads: 2, layers: 1, ffnHidden: 16, chunkSize: 4 }),
      train: trainConfig({ steps: 6, batchSize: 2, seqLen: 16, lr: 0.01, warmupSteps: 2, seed: 4 }),
      createModel: undefined, // the default: createModel of src/model/falcon_lm.ts
      ...extra,
    });
    const full = await train(real(`${dir}/full`));
    const controller = new AbortController();
    const first = await train(real(`${dir}/part`, {
      signal: controller.signal,
      onProgress: (p) => p.event === "step" && p.step === 3 && controller.abort(),
    }));
    assert.equal(first.step, 3);
    const rest = await train(real(`${dir}/part`, { resumeFrom: await loadCheckpoint(first.checkpointPath) }));
    assert.deepEqual([...first.losses, ...rest.losses], full.losses);
    assert.ok(full.losses.every(Number.isFinite));
  });
});

Deno.test("a resume drops metrics lines logged after its checkpoint, so every step appears once", async () => {
  await withTempDir(async (dir) => {
    const s = setup(dir, { train: trainConfig({ steps: 8, batchSize: 2, seqLen: 16, checkpointEvery: 3 }) }, {
      nanGradAtCall: 5,
    });
    await assert.rejects(() => train(s), TrainingDivergedError); // logged 1-4, checkpoint at 3
    const before = parseJsonl(await Deno.readTextFile(`${dir}/${METRICS_FILE}`), METRICS_FILE);
    assert.deepEqual(before.map((l) => l.step), [1, 2, 3, 4]);
    const saved = await loadCheckpoint(`${dir}/${CHECKPOINT_FILE}`);
    assert.equal(saved.step, 3);
    await train(setup(dir, { train: s.train, resumeFrom: saved }));
    const after = parseJsonl(await Deno.readTextFile(`${dir}/${METRICS_FILE}`), METRICS_FILE);
    assert.deepEqual(after.map((l) => l.step), [1, 2, 3, 4, 5, 6, 7, 8]);
  });
});

/** `step` of each metrics line, eval lines written `eval <step>`. */
function lineKinds(lines: Record<string, unknown>[]): string[] {
  return lines.map((l) => ("eval" in l ? `eval ${l.step}` : String(l.step)));
}

Deno.test("evaluate logs an eval line right after every N-th step and leaves the losses bit-identical", async () => {
  await withTempDir(async (dir) => {
    const plain = await train(setup(`${dir}/plain`));
    const seen: number[] = [];
    const run = trainingEvaluation(additionConfig({ maxDigits: 3 }), { seed: 9, samples: 8 });
    const evaluated = await train(setup(`${dir}/eval`, {
      evaluate: {
        every: 5,
        run: (model, step) => {
          seen.push(step);
          return run(model, step);
        },
      },
    }));
    assert.deepEqual(evaluated.losses, plain.losses); // exact equality: the training stream is untouched
    assert.deepEqual(seen, [5, 10]);
    const lines = parseJsonl(await Deno.readTextFile(`${dir}/eval/${METRICS_FILE}`), METRICS_FILE);
    assert.deepEqual(lineKinds(lines), [
      "1",
      "2",
      "3",
      "4",
      "5",
      "eval 5",
      "6",
      "7",
      "8",
      "9",
      "10",
      "eval 10",
      "11",
      "12",
    ]);
    const record = lines[5].eval as Record<string, number>;
    for (const key of ["digitAccuracy", "exactMatch", "placesInRange", "place0", "place2"]) {
      assert.ok(record[key] >= 0 && record[key] <= 1, `${key} = ${record[key]}`);
    }
    // the step lines keep their format
    assert.deepEqual(Object.keys(lines[4]), ["step", "loss", "lr", "gradNorm", "tokens", "elapsed"]);
  });
});

Deno.test("evaluate leaves the real FalconLM's losses bit-identical too", async () => {
  await withTempDir(async (dir) => {
    const real = (runDir: string, extra: Partial<TrainSetup> = {}): TrainSetup => ({
      ...setup(runDir),
      model: modelConfig({ vocabSize: 14, dModel: 16, heads: 2, layers: 1, ffnHidden: 16, chunkSize: 4 }),
      train: trainConfig({ steps: 4, batchSize: 2, seqLen: 16, lr: 0.01, warmupSteps: 2, seed: 4 }),
      createModel: undefined,
      ...extra,
    });
    const plain = await train(real(`${dir}/plain`));
    const run = trainingEvaluation(additionConfig({ maxDigits: 3 }), { seed: 4, samples: 4 });
    const evaluated = await train(real(`${dir}/eval`, { evaluate: { every: 1, run } }));
    assert.deepEqual(evaluated.losses, plain.losses);
    const lines = parseJsonl(await Deno.readTextFile(`${dir}/eval/${METRICS_FILE}`), METRICS_FILE);
    assert.equal(lines.filter((l) => "eval" in l).length, 4);
  });
});

Deno.test("a resume drops the eval lines logged after its checkpoint and redoes them once", async () => {
  await withTempDir(async (dir) => {
    const evaluate = {
      every: 2,
      run: (_model: unknown, step: number) => Promise.resolve({ step2: 2 * step }),
    };
    const s = setup(dir, {
      train: trainConfig({ steps: 8, batchSize: 2, seqLen: 16, checkpointEvery: 3 }),
      evaluate,
    }, { nanGradAtCall: 5 });
    await assert.rejects(() => train(s), TrainingDivergedError); // logged 1-4 and evals 2, 4; checkpoint at 3
    const before = parseJsonl(await Deno.readTextFile(`${dir}/${METRICS_FILE}`), METRICS_FILE);
    assert.deepEqual(lineKinds(before), ["1", "2", "eval 2", "3", "4", "eval 4"]);
    const saved = await loadCheckpoint(`${dir}/${CHECKPOINT_FILE}`);
    assert.equal(saved.step, 3);
    await train(setup(dir, { train: s.train, resumeFrom: saved, evaluate }));
    const after = parseJsonl(await Deno.readTextFile(`${dir}/${METRICS_FILE}`), METRICS_FILE);
    assert.deepEqual(lineKinds(after), [
      "1",
      "2",
      "eval 2",
      "3",
      "4",
      "eval 4",
      "5",
      "6",
      "eval 6",
      "7",
      "8",
      "eval 8",
    ]);
    assert.deepEqual(
      after.filter((l) => "eval" in l).map((l) => l.eval),
      [2, 4, 6, 8].map((k) => ({ step2: 2 * k })),
    );
  });
});

Deno.test("train rejects an evaluation interval that is not an integer >= 1", async () => {
  await withTempDir(async (dir) => {
    const run = () => Promise.resolve({});
    await assert.rejects(
      () => train(setup(`${dir}/x`, { evaluate: { every: 0, run } })),
      /evaluate.every must be an integer >= 1, got 0/,
    );
    await assert.rejects(() => Deno.stat(`${dir}/x`));
  });
});
