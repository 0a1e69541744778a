/**
 * `falcon train` and its run directory: path faults refused before any work, one run at a time
 * (a lock; a stale one from a killed run replaced), no fresh run into a non-empty directory
 * without `--force`, stale temporary files cleaned, SIGTERM saving like Ctrl-C, resume refusals,
 * a cumulative `elapsed` and loss summary, and a full disk reported in one line. The signal and
 * kill cases spawn `deno run cli/main.ts` on the tiny preset with the wasm backend; the full and
 * read-only file systems are tmpfs mounts in a private mount namespace (`unshare -rm`).
 */

import assert from "node:assert/strict";
import { runCli } from "../_run_in_process.ts";
import { loadCheckpoint } from "../../src/checkpoint/checkpoint.ts";
import { parseJsonl } from "../../src/train/metrics_log.ts";
import { LOCK_FILE } from "../../src/train/run_dir.ts";
import { withTempDir } from "../../src/testing/temp_dir.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

async function stepLines(dir: string) {
  return parseJsonl(await Deno.readTextFile(`${dir}/metrics.jsonl`), "metrics.jsonl").filter((l) =>
    !("eval" in l)
  );
}

/** Wait until `ready()` holds (polled), at most `seconds`. */
async function until(ready: () => Promise<boolean>, seconds = 20): Promise<void> {
  const end = performance.now() + seconds * 1000;
  while (!(await ready())) {
    if (performance.now() > end) throw new Error(`timed out after ${seconds} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function metricsLineCount(dir: string): Promise<number> {
  try {
    return (await Deno.readTextFile(`${dir}/metrics.jsonl`)).split("\n").filter((l) => l.trim()).length;
  } catch {
    return 0;
  }
}

/** `deno run cli/main.ts train ...` as a child process (stdout and stderr collected). */
function spawnTrain(args: string[]) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "train", "--backend", "wasm", "--threads", "1", ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  return {
    child,
    async finish() {
      const o = await output;
      return {
        code: o.code,
        out: new TextDecoder().decode(o.stdout),
        err: new TextDecoder().decode(o.stderr),
      };
    },
  };
}

/** Run a shell script in a private user and mount namespace (so it may mount a tmpfs). */
async function inMountNamespace(script: string) {
  const o = await new Deno.Command("unshare", {
    args: ["-rm", "sh", "-c", script],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: o.code, out: new TextDecoder().decode(o.stdout), err: new TextDecoder().decode(o.stderr) };
}

const SMALL = ["--backend", "wasm", "--threads", "1", "--d-model", "16", "--layers", "1", "--heads", "2"];

Deno.test("train --out FILE exits 2 naming the path before printing the header or creating anything", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/some_file`, "mine");
    const r = await runCli(["train", "--out", `${dir}/some_file`, "--steps", "1", ...SMALL]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /--out .*some_file is not a directory/);
    assert.doesNotMatch(r.err, /^train addition/m);
    const below = await runCli(["train", "--out", `${dir}/some_file/run`, "--steps", "1", ...SMALL]);
    assert.equal(below.code, 2, below.err);
    assert.match(below.err, /some_file\/run: cannot create the run directory/);
    assert.deepEqual(await names(dir), ["some_file"]);
    assert.equal(await Deno.readTextFile(`${dir}/some_file`), "mine");
  });
});

Deno.test("a fresh run into a non-empty directory is refused; --force starts clean, so metrics restart at step 1", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    // what a run killed before its first checkpoint leaves
    await Deno.mkdir(out);
    await Deno.writeTextFile(out + "/metrics.jsonl", '{"step":1,"loss":2}\n{"step":2,"loss":2}\n');
    const refused = await runCli(["train", "--out", out, "--steps", "2", ...SMALL]);
    assert.equal(refused.code, 2);
    assert.match(
      refused.err,
      /run is not empty \(it holds metrics.jsonl\); pass --resume .* --force to start clean/,
    );
    const resume = await runCli(["train", "--out", out, "--resume", ...SMALL]);
    assert.equal(resume.code, 2);
    assert.match(resume.err, /no checkpoint to resume/);
    const forced = await runCli(["train", "--out", out, "--steps", "3", "--force", ...SMALL]);
    assert.equal(forced.code, 0, forced.err);
    assert.match(forced.err, /--force: removed .*run\/metrics.jsonl/);
    assert.deepEqual((await stepLines(out)).map((l) => l.step), [1, 2, 3]);
    assert.deepEqual(await names(out), ["checkpoint.safetensors", "metrics.jsonl"]);
    const both = await runCli(["train", "--out", out, "--resume", "--force", ...SMALL]);
    assert.equal(both.code, 2);
    assert.match(both.err, /pass one of them/);
  });
});

Deno.test("--resume refuses fewer steps than the checkpoint's, another preset and a different override", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const first = await runCli(["train", "--out", out, "--steps", "4", "--lr", "0.02", ...SMALL]);
    assert.equal(first.code, 0, first.err);
    const cases: [string[], RegExp][] = [
      [["--steps", "3"], /--steps 3 is below the step of the checkpoint .* \(4\)/],
      [
        ["--preset", "lab"],
        /--preset lab does not match the checkpoint .*, which was trained with preset tiny/,
      ],
      [["--lr", "0.5"], /--lr 0.5 does not match the checkpoint .*, which has 0.02/],
      [["--layers", "2"], /--layers 2 does not match the checkpoint .*, which has 1/],
    ];
    for (const [args, pattern] of cases) {
      const r = await runCli(["train", "--out", out, "--resume", "--backend", "wasm", ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
      assert.match(r.err, pattern, args.join(" "));
    }
    assert.equal((await loadCheckpoint(`${out}/checkpoint.safetensors`)).step, 4);
    assert.deepEqual(await names(out), ["checkpoint.safetensors", "metrics.jsonl"]);
  });
});

Deno.test("--resume --preset on a checkpoint from before run_config compares the sizes the preset fixes", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const first = await runCli([
      "train",
      "--out",
      out,
      "--preset",
      "lab",
      "--steps",
      "1",
      "--backend",
      "wasm",
    ]);
    assert.equal(first.code, 0, first.err);
    // rewrite it as an older falcon wrote it: no run_config, no digest
    const path = `${out}/checkpoint.safetensors`;
    const { readSafetensors, writeSafetensors } = await import("../../src/checkpoint/safetensors.ts");
    const { tensors, metadata: { run_config: _r, content_digest: _d, ...metadata } } = readSafetensors(
      await Deno.readFile(path),
      path,
    );
    await Deno.writeFile(path, writeSafetensors(tensors, metadata));
    const tiny = await runCli(["train", "--out", out, "--resume", "--preset", "tiny", "--backend", "wasm"]);
    assert.equal(tiny.code, 2);
    assert.match(
      tiny.err,
      /--preset tiny does not match the checkpoint .*: the preset has dModel 32, the checkpoint 64/,
    );
    const lab = await runCli([
      "train",
      "--out",
      out,
      "--resume",
      "--preset",
      "lab",
      "--steps",
      "2",
      "--backend",
      "wasm",
    ]);
    assert.equal(lab.code, 0, lab.err);
    assert.match(lab.err, /^config: preset lab; model dModel 64/m);
    assert.deepEqual((await loadCheckpoint(path)).runConfig, { preset: "lab", overrides: {} });
  });
});

Deno.test("after a resume, elapsed in metrics.jsonl and the loss summary cover the whole run", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const first = await runCli(["train", "--out", out, "--steps", "8", ...SMALL]);
    assert.equal(first.code, 0, first.err);
    const before = await stepLines(out);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    assert.ok(saved.elapsedSeconds! >= (before.at(-1)!.elapsed as number), "checkpoint elapsed");
    const resumed = await runCli(["train", "--out", out, "--resume", "--steps", "16", ...SMALL]);
    assert.equal(resumed.code, 0, resumed.err);
    const lines = await stepLines(out);
    assert.deepEqual(lines.map((l) => l.step), Array.from({ length: 16 }, (_, i) => i + 1));
    const elapsed = lines.map((l) => l.elapsed as number);
    for (let i = 1; i < elapsed.length; i++) assert.ok(elapsed[i] >= elapsed[i - 1], `elapsed ${elapsed}`);
    assert.ok(elapsed[8] >= saved.elapsedSeconds!, "the resumed part continues the count");
    // the summary's first mean is over steps 1..k of the whole run, not of the resumed part
    const k = 4;
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    const losses = lines.map((l) => l.loss as number);
    assert.match(
      resumed.out,
      new RegExp(
        `loss ${mean(losses.slice(0, k)).toFixed(4)} -> ${
          mean(losses.slice(-k)).toFixed(4)
        } \\(mean of first/last ${k} steps,`,
      ),
    );
    assert.match(resumed.out, /tokens\/s, [\d.]+ s \([\d.]+ s in total\)/);
  });
});

Deno.test("SIGTERM saves a checkpoint like Ctrl-C and exits 143; a second run meanwhile is refused by the lock", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const run = spawnTrain(["--out", out, "--steps", "5000", "--checkpoint-every", "0"]);
    await until(async () => (await metricsLineCount(out)) >= 3);
    const lock = JSON.parse(await Deno.readTextFile(`${out}/${LOCK_FILE}`));
    assert.equal(lock.pid, run.child.pid);
    const second = await runCli(["train", "--out", out, "--resume", ...SMALL]);
    assert.equal(second.code, 2);
    assert.match(second.err, new RegExp(`is in use by another run \\(pid ${run.child.pid} on host `));
    run.child.kill("SIGTERM");
    const r = await run.finish();
    assert.equal(r.code, 143, r.err);
    assert.match(r.err, /SIGTERM: finishing the step and saving a checkpoint/);
    assert.match(r.out, /interrupted at step \d+\/5000/);
    const saved = await loadCheckpoint(`${out}/checkpoint.safetensors`);
    const lines = await stepLines(out);
    // nothing lost: the checkpoint holds the last step logged
    assert.equal(saved.step, lines.at(-1)!.step);
    assert.deepEqual(await names(out), ["checkpoint.safetensors", "metrics.jsonl"]);
  });
});

Deno.test("after kill -9 the stale lock and temporary file are cleaned and --resume continues", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/run`;
    const run = spawnTrain(["--out", out, "--steps", "5000", "--checkpoint-every", "2", ...SMALL]);
    await until(async () => (await metricsLineCount(out)) >= 5);
    run.child.kill("SIGKILL");
    await run.finish();
    assert.ok((await names(out)).includes(LOCK_FILE), "the killed run left its lock");
    // what a kill during a checkpoint write leaves
    const tmp = `.checkpoint.safetensors.${run.child.pid}.0123abcd.tmp`;
    await Deno.writeFile(`${out}/${tmp}`, new Uint8Array(100));
    const step = (await loadCheckpoint(`${out}/checkpoint.safetensors`)).step;
    const resumed = await runCli(["train", "--out", out, "--resume", "--steps", String(step + 2), ...SMALL]);
    assert.equal(resumed.code, 0, resumed.err);
    assert.match(
      resumed.err,
      new RegExp(`replaced a stale lock of a run that is gone \\(pid ${run.child.pid}`),
    );
    assert.match(resumed.err, new RegExp(`removed .*${tmp.replaceAll(".", "\\.")}, left by a run killed`));
    assert.deepEqual(await names(out), ["checkpoint.safetensors", "metrics.jsonl"]);
    const lines = await stepLines(out);
    assert.deepEqual(lines.map((l) => l.step), Array.from({ length: step + 2 }, (_, i) => i + 1));
  });
});

Deno.test("a full disk at a checkpoint keeps the last good one and says so in one line (exit 2)", async () => {
  await withTempDir(async (dir) => {
    // the size of one checkpoint of this model, measured
    const probe = await runCli(["train", "--out", `${dir}/probe`, "--steps", "1", ...SMALL]);
    assert.equal(probe.code, 0, probe.err);
    const size = (await Deno.stat(`${dir}/probe/checkpoint.safetensors`)).size;
    // room for one checkpoint and the metrics, not for the second beside it (atomic replacement)
    const kib = Math.ceil((1.5 * size) / 1024);
    const mnt = `${dir}/mnt`;
    await Deno.mkdir(mnt);
    const args = ["--out", `${mnt}/run`, "--steps", "50", "--checkpoint-every", "2", ...SMALL];
    const r = await inMountNamespace(
      `mount -t tmpfs -o size=${kib}k tmpfs ${mnt} && "${Deno.execPath()}" run -A ${MAIN} train ${
        args.join(" ")
      }; echo "exit $?"; ls -a ${mnt}/run`,
    );
    assert.match(r.out, /^exit 2$/m, r.out + r.err);
    const errorLines = r.err.split("\n").filter((l) => l.startsWith("falcon:"));
    assert.equal(errorLines.length, 1, r.err);
    assert.match(
      errorLines[0],
      /^falcon: cannot write .*run\/(checkpoint\.safetensors|metrics\.jsonl) at step \d+: no space left on device \(ENOSPC\); the last good checkpoint \(step 2\) is kept: .*run\/checkpoint\.safetensors$/,
    );
    assert.doesNotMatch(r.err, /Uncaught|at async/);
    // no temporary file is left behind, the lock is gone
    assert.doesNotMatch(r.out, /\.tmp|run\.lock/);
  });
});

Deno.test("read-only output directories fail train, convert and eval --json at once with exit 2 naming the path", async () => {
  await withTempDir(async (dir) => {
    const ckpt = `${dir}/c/checkpoint.safetensors`;
    const made = await runCli(["train", "--out", `${dir}/c`, "--steps", "1", ...SMALL]);
    assert.equal(made.code, 0, made.err);
    const ro = `${dir}/ro`;
    await Deno.mkdir(ro);
    const cli = `"${Deno.execPath()}" run -A ${MAIN}`;
    const r = await inMountNamespace(
      [
        `mount -t tmpfs -o ro,size=64k tmpfs ${ro} || exit 9`,
        `${cli} train --out ${ro} --steps 1 ${SMALL.join(" ")}; echo "train $?"`,
        `${cli} train --out ${ro}/run --steps 1 ${SMALL.join(" ")}; echo "train-sub $?"`,
        `${cli} convert ${ckpt} ${ro}/x.safetensors --to native; echo "convert $?"`,
        `${cli} convert ${ckpt} ${ro}/hf --to hf; echo "convert-hf $?"`,
        `${cli} eval ${ckpt} --lengths 1-2 --samples 2 --backend ref --json ${ro}/r.json; echo "eval $?"`,
      ].join("\n"),
    );
    for (const what of ["train", "train-sub", "convert", "convert-hf", "eval"]) {
      assert.match(r.out, new RegExp(`^${what} 2$`, "m"), `${what}:\n${r.out}\n${r.err}`);
    }
    assert.match(r.err, /--out .*\/ro: cannot write in the run directory: read-only file system \(EROFS\)/);
    assert.match(r.err, /ro\/run: cannot create the run directory: read-only file system/);
    assert.match(r.err, /output .*ro\/x\.safetensors: cannot write in .*ro: read-only file system/);
    assert.match(r.err, /output .*ro\/hf: cannot write in .*ro: read-only file system/);
    assert.match(r.err, /--json .*ro\/r\.json: cannot write in .*ro: read-only file system/);
    // eval refused before evaluating: no table was printed
    assert.doesNotMatch(r.out, /digit accuracy|avg/);
    assert.doesNotMatch(r.err, /Uncaught/);
  });
});
