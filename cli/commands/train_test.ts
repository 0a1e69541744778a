import assert from "node:assert/strict";
import { runCli } from "../_run_in_process.ts";
import { loadCheckpoint } from "../../src/checkpoint/checkpoint.ts";
import { parseJsonl } from "../../src/train/metrics_log.ts";
import { withTempDir } from "../../src/testing/temp_dir.ts";

const run = runCli;

Deno.test("falcon train --help lists every option with its choices and default", async () => {
  const r = await run(["train", "--help"]);
  assert.equal(r.code, 0);
  for (
    const text of [
      "--task <task>",
      'choices: "addition", "mqar", "text", default: "addition"',
      '"falcon1"',
      '"transformer"',
      'default: "falcon1"',
      'choices: "prefix", "same-step", default: "prefix"',
      "--no-short-conv",
      "--qk-norm <norm>",
      'choices: "rms", "l2", "none"',
      'choices: "auto", "ref", "wasm", "webgpu", default: "auto"',
      'choices: "tiny", "lab", "addition", default: "tiny"',
      "--steps <n>",
      "--out <dir>",
      "--resume",
      "--seed <n>",
      '(default: "0")',
      "--corpus <file>",
      "--operand-order <order>",
      'choices: "msd", "lsd"',
      "--answer-order <order>",
      'choices: "lsd", "msd"',
      "--bos",
      "--index-hints <n>",
      "--equal-length",
      "--curriculum <start:fraction>",
      "e.g. 8:0.1",
      "--eval-every <n>",
    ]
  ) assert.ok(r.out.replace(/\s+/g, " ").includes(text), `help lacks ${text}:\n${r.out}`);
});

Deno.test("falcon train rejects bad input with exit 2 before any work", async () => {
  await withTempDir(async (dir) => {
    const empty = `${dir}/empty.txt`;
    await Deno.writeTextFile(empty, "");
    const cases: [string[], RegExp][] = [
      [["--rule", "falcon9"], /argument 'falcon9' is invalid/],
      [["--task", "poetry"], /argument 'poetry' is invalid/],
      [["--steps", "0"], /--steps must be an integer >= 1, got "0"/],
      [["--steps", "-3"], /--steps must be an integer >= 1, got "-3"/],
      [["--seed", "x"], /--seed must be an integer >= 0, got "x"/],
      [["--task", "text", "--corpus", `${dir}/missing.txt`], /--corpus .*missing.txt does not exist/],
      [["--task", "text", "--corpus", empty], /--corpus .*empty.txt is empty/],
      [["--task", "addition", "--corpus", empty], /is empty|applies to the text task only/],
      [["--resume"], /no checkpoint to resume in/],
      [["--qk-norm", "cosine"], /argument 'cosine' is invalid/],
      [
        ["--rule", "transformer", "--qk-norm", "l2"],
        /the transformer takes qkNorm "rms" or "none", got "l2"/,
      ],
      [["--operand-order", "reversed"], /--operand-order <order>' argument 'reversed' is invalid/],
      [["--answer-order", "up"], /--answer-order <order>' argument 'up' is invalid/],
      [["--index-hints", "-1"], /--index-hints must be an integer >= 0, got "-1"/],
      [["--index-hints", "x"], /--index-hints must be an integer >= 0, got "x"/],
      // the tiny preset trains on 2 digits: the answer has places 0..2
      [
        ["--index-hints", "2"],
        /--index-hints 2: addition: indexHints must be 0 \(off\) or an integer >= maxDigits \+ 1 = 3/,
      ],
      [["--curriculum", "8"], /--curriculum must be start:fraction.*, got "8"/],
      [["--curriculum", "0:0.1"], /--curriculum must be start:fraction.*, got "0:0.1"/],
      [["--curriculum", "1:1.5"], /--curriculum must be start:fraction.*, got "1:1.5"/],
      [
        ["--curriculum", "3:0.5"],
        /--curriculum 3:0.5: addition: curriculum.startDigits must be an integer in \[1, maxDigits = 2\], got 3/,
      ],
      [["--task", "mqar", "--bos"], /--bos applies to the addition task only, not mqar/],
    ];
    for (const [args, pattern] of cases) {
      const out = `${dir}/run`;
      const r = await run(["train", "--out", out, ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: exit ${r.code}\n${r.err}`);
      assert.match(r.err, pattern, args.join(" "));
      await assert.rejects(() => Deno.stat(out), `${args.join(" ")} created the run directory`);
    }
  });
});

Deno.test("falcon train writes a checkpoint and metrics, resumes to more steps, and refuses another task", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const base = ["train", "--rule", "transformer", "--out", out, "--seed", "3"];
    const r = await run([...base, "--steps", "3"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /completed at step 3\/3/);
    assert.match(r.out, /parameters \d+, peak memory \d+ MiB/);
    assert.match(r.out, /in-distribution \(1-2 digits, \d+ examples\): digit accuracy [\d.]+%/);
    assert.equal((await loadCheckpoint(`${out}/checkpoint.safetensors`)).step, 3);
    const again = await run([...base, "--steps", "3"]);
    assert.equal(again.code, 2);
    assert.match(again.err, /already holds a checkpoint; pass --resume/);
    const resumed = await run(["train", "--out", out, "--resume", "--steps", "5"]);
    assert.equal(resumed.code, 0, resumed.err);
    assert.match(resumed.err, /resuming at step 3/);
    assert.match(resumed.out, /completed at step 5\/5/);
    const lines = parseJsonl(await Deno.readTextFile(`${out}/metrics.jsonl`), "metrics.jsonl");
    assert.deepEqual(lines.map((l) => l.step), [1, 2, 3, 4, 5]);
    // within the 20 warmup steps the schedule does not depend on the total, so 3 + 2 resumed
    // steps must reproduce a fresh 5-step run exactly
    const fresh = await run([...base.map((a) => (a === out ? `${dir}/fresh` : a)), "--steps", "5"]);
    assert.equal(fresh.code, 0, fresh.err);
    const freshLines = parseJsonl(await Deno.readTextFile(`${dir}/fresh/metrics.jsonl`), "metrics.jsonl");
    assert.deepEqual(lines.map((l) => l.loss), freshLines.map((l) => l.loss));
    const other = await run(["train", "--out", out, "--resume", "--task", "mqar"]);
    assert.equal(other.code, 2);
    assert.match(other.err, /--task mqar does not match the checkpoint .*, which has addition/);
  });
});

Deno.test("falcon train records the addition format options in the checkpoint and checks them on resume", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const options = ["--operand-order", "lsd", "--bos", "--index-hints", "8", "--equal-length"];
    const r = await run([
      "train",
      "--rule",
      "transformer",
      "--steps",
      "2",
      "--out",
      out,
      ...options,
      "--curriculum",
      "1:0.5",
      "--answer-order",
      "msd",
    ]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /in-distribution \(1-2 digits, \d+ examples\): digit accuracy [\d.]+%/);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    assert.deepEqual(saved.task, {
      task: "addition",
      maxDigits: 2,
      format: "msd",
      operandOrder: "lsd",
      bos: true,
      indexHints: 8,
      equalLength: true,
      curriculum: { startDigits: 1, fraction: 0.5 },
    });
    assert.equal(saved.model.vocabSize, 14 + 1 + 8);
    // the tiny preset's rows (32) hold the longest hinted 2-digit example (1 + 10 + 7 = 18)
    assert.equal(saved.train.seqLen, 32);
    // resuming with the same options (or none) continues; another value is refused, naming it
    const same = await run([
      "train",
      "--out",
      out,
      "--resume",
      "--steps",
      "3",
      "--bos",
      "--index-hints",
      "8",
    ]);
    assert.equal(same.code, 0, same.err);
    const other = await run(["train", "--out", out, "--resume", "--steps", "4", "--index-hints", "9"]);
    assert.equal(other.code, 2);
    assert.match(other.err, /--index-hints 9 does not match the checkpoint .*, which has --index-hints 8/);
    const order = await run(["train", "--out", out, "--resume", "--steps", "4", "--operand-order", "msd"]);
    assert.equal(order.code, 2);
    assert.match(
      order.err,
      /--operand-order msd does not match the checkpoint .*, which has --operand-order lsd/,
    );
  });
});

Deno.test("falcon train runs mqar and text (default corpus and a user file)", async () => {
  await withTempDir(async (dir) => {
    const mqar = await run([
      "train",
      "--task",
      "mqar",
      "--rule",
      "transformer",
      "--steps",
      "2",
      "--out",
      `${dir}/m`,
    ]);
    assert.equal(mqar.code, 0, mqar.err);
    assert.match(mqar.out, /completed at step 2\/2/);
    const text = await run([
      "train",
      "--task",
      "text",
      "--rule",
      "transformer",
      "--steps",
      "2",
      "--out",
      `${dir}/t`,
    ]);
    assert.equal(text.code, 0, text.err);
    assert.equal((await loadCheckpoint(`${dir}/t/checkpoint.safetensors`)).task.task, "text");
    const file = `${dir}/corpus.txt`;
    await Deno.writeTextFile(file, "the quick fast weight writes and reads. ".repeat(20));
    // resuming the text run needs no --task: the checkpoint says text, and the default corpus matches
    const textResumed = await run(["train", "--out", `${dir}/t`, "--resume", "--steps", "3"]);
    assert.equal(textResumed.code, 0, textResumed.err);
    assert.match(textResumed.out, /completed at step 3\/3/);
    const user = await run([
      "train",
      "--task",
      "text",
      "--corpus",
      file,
      "--rule",
      "transformer",
      "--steps",
      "1",
      "--out",
      `${dir}/u`,
    ]);
    assert.equal(user.code, 0, user.err);
    const saved = await loadCheckpoint(`${dir}/u/checkpoint.safetensors`);
    assert.equal(saved.task.task === "text" && saved.task.corpusName, file);
    const otherCorpus = await run(["train", "--out", `${dir}/u`, "--resume", "--steps", "2"]);
    assert.equal(otherCorpus.code, 2);
    assert.match(
      otherCorpus.err,
      /trained on corpus ".*corpus.txt" \(800 bytes, hash [0-9a-f]{8}\), not on "default"/,
    );
  });
});

Deno.test("falcon train --rule transformer --no-short-conv --qk-norm none trains the plain Transformer and says so", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/plain`;
    const args = ["train", "--rule", "transformer", "--no-short-conv", "--qk-norm", "none", "--out", out];
    const r = await run([...args, "--steps", "2", "--backend", "ref"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /with transformer \(prefix, short conv off, qkNorm none\)/);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    assert.deepEqual([saved.model.shortConv, saved.model.qkNorm], [false, "none"]);
    assert.equal(Object.keys(saved.params).some((n) => n.includes("conv")), false);
    // the default Transformer has the convolutions and the QK norm
    const conv = await run([
      "train",
      "--rule",
      "transformer",
      "--out",
      `${dir}/conv`,
      "--steps",
      "1",
      "--backend",
      "ref",
    ]);
    assert.equal(conv.code, 0, conv.err);
    assert.match(conv.err, /short conv on, qkNorm rms/);
    const withConv = await loadCheckpoint(`${dir}/conv/checkpoint.safetensors`);
    assert.ok("layers.0.mixer.q_conv" in withConv.params);
    // resuming with another architecture is refused, naming the flag and both values
    const other = await run(["train", "--out", out, "--resume", "--qk-norm", "rms", "--steps", "3"]);
    assert.equal(other.code, 2);
    assert.match(other.err, /--qk-norm rms does not match the checkpoint .*, which has none/);
    const same = await run([
      "train",
      "--out",
      out,
      "--resume",
      "--no-short-conv",
      "--steps",
      "3",
      "--backend",
      "ref",
    ]);
    assert.equal(same.code, 0, same.err);
  });
});

Deno.test("falcon train --eval-every logs eval lines at those steps without changing the losses", async () => {
  await withTempDir(async (dir) => {
    const base = ["train", "--rule", "transformer", "--seed", "2", "--steps", "3"];
    const bad = await run([...base, "--out", `${dir}/bad`, "--eval-every", "0"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--eval-every must be an integer >= 1, got "0"/);
    await assert.rejects(() => Deno.stat(`${dir}/bad`));
    const plain = await run([...base, "--out", `${dir}/plain`]);
    assert.equal(plain.code, 0, plain.err);
    const evaluated = await run([...base, "--out", `${dir}/eval`, "--eval-every", "2"]);
    assert.equal(evaluated.code, 0, evaluated.err);
    assert.match(evaluated.err, /eval every 2 steps/);
    // the progress output shows the evaluation: validation loss and the task metric
    assert.match(
      evaluated.err,
      /^eval at step 2: loss \d+\.\d{4}, digitAccuracy [\d.]+%, exactMatch [\d.]+%/m,
    );
    const read = async (name: string) =>
      parseJsonl(await Deno.readTextFile(`${dir}/${name}/metrics.jsonl`), "metrics.jsonl");
    const lines = await read("eval");
    assert.deepEqual(lines.map((l) => ("eval" in l ? `eval ${l.step}` : l.step)), [1, 2, "eval 2", 3]);
    const record = lines[2].eval as Record<string, number>;
    assert.ok(
      record.digitAccuracy >= 0 && record.digitAccuracy <= 1 && "place0" in record,
      JSON.stringify(record),
    );
    assert.ok(record.loss > 0 && Number.isFinite(record.loss), `validation loss ${record.loss}`);
    const steps = lines.filter((l) => !("eval" in l));
    assert.deepEqual(steps.map((l) => l.loss), (await read("plain")).map((l) => l.loss));
  });
});

Deno.test("train's in-distribution summary is falcon eval's avg 1-L row on its default test sets", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const r = await run(["train", "--out", out, "--steps", "30", "--backend", "wasm", "--layers", "1"]);
    assert.equal(r.code, 0, r.err);
    const m = /in-distribution \(1-2 digits, 200 examples\): digit accuracy ([\d.]+)%, exact match ([\d.]+)%/
      .exec(r.out);
    assert.ok(m, r.out);
    const e = await run(["eval", `${out}/checkpoint.safetensors`, "--lengths", "1-4", "--backend", "wasm"]);
    assert.equal(e.code, 0, e.err);
    const row = e.out.split("\n").find((l) => l.startsWith("avg 1-2 "));
    assert.ok(row, e.out);
    assert.equal(row!.split(/\s{2,}/)[1], `${m![1]} / ${m![2]}`);
  });
});
