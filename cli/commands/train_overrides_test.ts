/**
 * `falcon train` preset overrides: every flag and `--config FILE` round-trip into the checkpoint,
 * the effective configuration is printed at start, and bad values are refused naming the flag.
 */

import assert from "node:assert/strict";
import { runCli } from "../_run_in_process.ts";
import { loadCheckpoint } from "../../src/checkpoint/checkpoint.ts";
import { withTempDir } from "../../src/testing/temp_dir.ts";

/** Every override with a value unlike the tiny preset's, and the field it lands in. */
const EVERY: [string, string, "model" | "train", string, number][] = [
  ["--lr", "0.004", "train", "lr", 0.004],
  ["--batch-size", "3", "train", "batchSize", 3],
  ["--seq-len", "40", "train", "seqLen", 40],
  ["--warmup", "7", "train", "warmupSteps", 7],
  ["--weight-decay", "0.2", "train", "weightDecay", 0.2],
  ["--clip", "0.5", "train", "clipNorm", 0.5],
  ["--checkpoint-every", "1", "train", "checkpointEvery", 1],
  ["--d-model", "24", "model", "dModel", 24],
  ["--layers", "1", "model", "layers", 1],
  ["--heads", "3", "model", "heads", 3],
  ["--chunk-size", "8", "model", "chunkSize", 8],
];

Deno.test("every override flag round-trips into the checkpoint and is printed at start", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const flags = EVERY.flatMap(([flag, text]) => [flag, text]);
    const r = await runCli(["train", "--out", out, "--steps", "2", "--backend", "wasm", ...flags]);
    assert.equal(r.code, 0, r.err);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    const configs = { model: saved.model as unknown as Record<string, unknown>, train: saved.train };
    for (const [flag, , part, field, value] of EVERY) assert.equal(configs[part][field], value, flag);
    // the MLP keeps the tiny preset's ratio (64 / 32) to the model width
    assert.equal(saved.model.ffnHidden, 48);
    assert.deepEqual(saved.runConfig, {
      preset: "tiny",
      overrides: Object.fromEntries(EVERY.map(([flag, , , , value]) => [flag.slice(2), value])),
    });
    const line = r.err.split("\n").find((l) => l.startsWith("config: "));
    assert.ok(line, r.err);
    assert.match(line!, /^config: preset tiny with --lr 0\.004 --batch-size 3 .* --chunk-size 8; /);
    assert.match(line!, /model dModel 24, layers 1, heads 3, ffnHidden 48, chunkSize 8; /);
    assert.match(
      line!,
      /training steps 2, batchSize 3, seqLen 40, lr 0\.004, warmup 7, weightDecay 0\.2, clip 0\.5, /,
    );
  });
});

Deno.test("--config FILE sets every override (and steps); a flag wins over the file", async () => {
  await withTempDir(async (dir) => {
    const file = `${dir}/run.json`;
    const json = Object.fromEntries(EVERY.map(([flag, , , , value]) => [flag.slice(2), value]));
    await Deno.writeTextFile(file, JSON.stringify({ ...json, steps: 2 }));
    const out = `${dir}/run`;
    const r = await runCli(["train", "--out", out, "--config", file, "--lr", "0.006", "--backend", "wasm"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /completed at step 2\/2/);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    const configs = { model: saved.model as unknown as Record<string, unknown>, train: saved.train };
    for (const [flag, , part, field, value] of EVERY) {
      assert.equal(configs[part][field], flag === "--lr" ? 0.006 : value, flag);
    }
  });
});

Deno.test("bad override values and config files are refused with exit 2, naming the flag or key and the value", async () => {
  await withTempDir(async (dir) => {
    const write = async (name: string, text: string) => {
      await Deno.writeTextFile(`${dir}/${name}`, text);
      return `${dir}/${name}`;
    };
    const cases: [string[], RegExp][] = [
      [["--lr", "0"], /--lr must be a number > 0, got "0"/],
      [["--lr", "fast"], /--lr must be a number > 0, got "fast"/],
      [["--batch-size", "2.5"], /--batch-size must be an integer >= 1, got "2.5"/],
      [["--seq-len", "0"], /--seq-len must be an integer >= 1, got "0"/],
      [["--warmup", "-1"], /--warmup must be an integer >= 0, got "-1"/],
      [["--weight-decay", "-0.1"], /--weight-decay must be a number >= 0, got "-0.1"/],
      [["--clip", "x"], /--clip must be a number >= 0, got "x"/],
      [["--checkpoint-every", "1.5"], /--checkpoint-every must be an integer >= 0, got "1.5"/],
      [["--d-model", "0"], /--d-model must be an integer >= 1, got "0"/],
      [["--layers", "none"], /--layers must be an integer >= 1, got "none"/],
      [["--chunk-size", "-4"], /--chunk-size must be an integer >= 1, got "-4"/],
      [["--heads", "3"], /model \(preset tiny with --heads 3\): dModel 32 is not divisible by heads 3/],
      [["--seq-len", "4"], /--seq-len 4: setup: seqLen 4 is shorter than the longest addition example/],
      [["--config", `${dir}/none.json`], /--config .*none\.json does not exist/],
      [["--config", await write("bad.json", "{lr: 1}")], /--config .*bad\.json: not JSON/],
      [["--config", await write("list.json", "[1]")], /--config .*list\.json: must be a JSON object/],
      [
        ["--config", await write("key.json", '{"learning-rate": 0.1}')],
        /--config .*key\.json: unknown key "learning-rate"; expected steps or one of lr, batch-size/,
      ],
      [
        ["--config", await write("value.json", '{"lr": "0.1x"}')],
        /--config .*value\.json: "lr" must be a number > 0, got "0.1x"/,
      ],
      [["--config", await write("steps.json", '{"steps": 0}')], /"steps" must be an integer >= 1, got 0/],
    ];
    for (const [args, pattern] of cases) {
      const out = `${dir}/run`;
      const r = await runCli(["train", "--out", out, "--backend", "wasm", ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: exit ${r.code}\n${r.err}`);
      assert.match(r.err, pattern, args.join(" "));
      await assert.rejects(() => Deno.stat(out), `${args.join(" ")} created the run directory`);
    }
  });
});

Deno.test("--resume may change --checkpoint-every; run_config keeps the preset and records the change", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const first = await runCli(["train", "--out", out, "--steps", "2", "--layers", "1", "--backend", "wasm"]);
    assert.equal(first.code, 0, first.err);
    const r = await runCli([
      "train",
      "--out",
      out,
      "--resume",
      "--steps",
      "4",
      "--checkpoint-every",
      "1",
      "--layers",
      "1",
      "--preset",
      "tiny",
      "--backend",
      "wasm",
    ]);
    assert.equal(r.code, 0, r.err);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    assert.equal(saved.train.checkpointEvery, 1);
    assert.deepEqual(saved.runConfig, { preset: "tiny", overrides: { layers: 1, "checkpoint-every": 1 } });
  });
});
