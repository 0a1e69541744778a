/**
 * Output rules of `falcon convert` and `falcon eval`: every output path is checked before any
 * work; an existing output is replaced only with `--force` (convert); two outputs, or an output
 * and an input, may not be one file (eval). Also `eval --label`, and predict / eval reading an hf
 * export directory.
 */

import assert from "node:assert/strict";
import { listDir, tinyCheckpointBytes } from "../../src/convert/_test_checkpoints.ts";
import { writeTinyCheckpoint } from "../../src/eval/_tiny_checkpoint.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../../src/tasks/mod.ts";
import { runCli as run } from "../_run_in_process.ts";
import { withTempDir } from "../../src/testing/temp_dir.ts";

Deno.test("convert refuses an existing output file (even an unrelated one) unless --force", async () => {
  await withTempDir(async (dir) => {
    const native = `${dir}/n.safetensors`;
    await Deno.writeFile(native, await tinyCheckpointBytes());
    await Deno.writeTextFile(`${dir}/notes.txt`, "my notes");
    let r = await run(["convert", native, `${dir}/notes.txt`, "--to", "native"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /output .*notes\.txt: already exists; pass --force to replace it/);
    assert.equal(await Deno.readTextFile(`${dir}/notes.txt`), "my notes");
    r = await run(["convert", native, `${dir}/notes.txt`, "--to", "native", "--force"]);
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(await Deno.readFile(`${dir}/notes.txt`), await Deno.readFile(native));
  });
});

Deno.test("convert refuses a missing output directory and a directory as a native output, before reading the input", async () => {
  await withTempDir(async (dir) => {
    const native = `${dir}/n.safetensors`;
    await Deno.writeFile(native, await tinyCheckpointBytes());
    let r = await run(["convert", native, "/nonexistent/dir/x.safetensors", "--to", "native"]);
    assert.equal(r.code, 2, r.err);
    assert.match(
      r.err,
      /output \/nonexistent\/dir\/x\.safetensors: directory \/nonexistent\/dir does not exist/,
    );
    r = await run(["convert", native, "/nonexistent/dir/hf", "--to", "hf"]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /directory \/nonexistent\/dir does not exist/);
    await Deno.mkdir(`${dir}/d`);
    r = await run(["convert", native, `${dir}/d`, "--to", "native"]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /output .*\/d: is a directory; a file goes here/);
    // the output is checked first: a bad output with a missing input names the output
    r = await run(["convert", `${dir}/missing.safetensors`, `${dir}/d`, "--to", "native"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /is a directory/);
    assert.doesNotMatch(r.err, /Uncaught/);
  });
});

Deno.test("convert --to hf replaces an earlier export only with --force, and never a directory with other files", async () => {
  await withTempDir(async (dir) => {
    const native = `${dir}/n.safetensors`;
    await Deno.writeFile(native, await tinyCheckpointBytes());
    assert.equal((await run(["convert", native, `${dir}/hf`, "--to", "hf"])).code, 0);
    let r = await run(["convert", native, `${dir}/hf`, "--to", "hf", "--dtype", "f16"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /hf: output directory exists and is not empty; pass --force to replace it/);
    r = await run(["convert", native, `${dir}/hf`, "--to", "hf", "--dtype", "f16", "--force"]);
    assert.equal(r.code, 0, r.err);
    const inspect = JSON.parse((await run(["inspect", `${dir}/hf`, "--json"])).out);
    assert.ok(inspect.tensors.every((t: { dtype: string }) => t.dtype === "F16"));
    await Deno.writeTextFile(`${dir}/hf/README.md`, "mine");
    r = await run(["convert", native, `${dir}/hf`, "--to", "hf", "--force"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /holds files that are not part of an export \(README\.md\)/);
    assert.deepEqual(await listDir(`${dir}/hf`), ["README.md", "config.json", "model.safetensors"]);
    assert.deepEqual(await listDir(dir), ["hf", "n.safetensors"]);
  });
});

async function tinyAddition(path: string, mixer: "falcon1a" | "transformer" = "falcon1a") {
  await writeTinyCheckpoint(path, additionConfig({ maxDigits: 2 }), ADDITION_VOCAB_SIZE, { mixer }, 0);
}

Deno.test("eval refuses --json X --csv X, an output that is an input, and a bad output path before evaluating", async () => {
  await withTempDir(async (dir) => {
    const a = `${dir}/a.safetensors`;
    await tinyAddition(a);
    const base = ["eval", a, "--lengths", "1-2", "--samples", "2", "--backend", "ref"];
    const cases: [string[], RegExp][] = [
      [["--json", `${dir}/r`, "--csv", `${dir}/r`], /--csv .*\/r: is the same file as --json .*\/r/],
      [["--json", `${dir}/r`, "--csv", `${dir}/./r`], /--csv .*\/\.\/r: is the same file as --json/],
      [["--json", a], /--json .*a\.safetensors: is the same file as checkpoint/],
      [["--plot", `${dir}/none/p.svg`], /--plot .*none\/p\.svg: directory .*none does not exist/],
      [["--csv", dir], /--csv .*: is a directory; a file goes here/],
    ];
    for (const [args, pattern] of cases) {
      const r = await run([...base, ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
      assert.match(r.err, pattern, args.join(" "));
      assert.equal(r.out, "", "refused before the evaluation printed its table");
    }
    assert.deepEqual(await listDir(dir), ["a.safetensors"]);
  });
});

Deno.test("eval --label names each checkpoint's column; a count that does not match is refused", async () => {
  await withTempDir(async (dir) => {
    const a = `${dir}/a.safetensors`;
    const b = `${dir}/b.safetensors`;
    await tinyAddition(a);
    await tinyAddition(b); // same rule and seed: without labels told apart only by "#2"
    const base = ["eval", a, b, "--lengths", "1-2", "--samples", "2", "--backend", "ref"];
    const plain = await run(base);
    assert.equal(plain.code, 0, plain.err);
    assert.match(plain.out, /falcon1a prefix s0 #2/);
    const r = await run([...base, "--label", "early", "--label", "late", "--json", `${dir}/r.json`]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /early.*late/);
    const report = JSON.parse(await Deno.readTextFile(`${dir}/r.json`));
    assert.deepEqual(report.checkpoints.map((c: { label: string }) => c.label), ["early", "late"]);
    const wrong = await run([...base, "--label", "only-one"]);
    assert.equal(wrong.code, 2);
    assert.match(
      wrong.err,
      /--label: give one per checkpoint, in their order: 2 checkpoint\(s\), 1 label\(s\)/,
    );
  });
});

Deno.test("predict and eval accept an hf export directory and answer as the native checkpoint does", async () => {
  await withTempDir(async (dir) => {
    const trained = await run([
      "train",
      "--out",
      `${dir}/run`,
      "--steps",
      "3",
      "--backend",
      "ref",
      "--layers",
      "1",
    ]);
    assert.equal(trained.code, 0, trained.err);
    const native = `${dir}/run/checkpoint.safetensors`;
    assert.equal((await run(["convert", native, `${dir}/hf`, "--to", "hf"])).code, 0);
    const prompt = ["--prompt", "12+34=", "--backend", "ref", "--json"];
    const fromNative = await run(["predict", native, ...prompt]);
    const fromHf = await run(["predict", `${dir}/hf`, ...prompt]);
    assert.equal(fromHf.code, 0, fromHf.err);
    const { checkpoint: _a, ...n } = JSON.parse(fromNative.out);
    const { checkpoint: _b, ...h } = JSON.parse(fromHf.out);
    assert.deepEqual(h, n);
    const evalArgs = ["--lengths", "1-2", "--samples", "4", "--backend", "ref"];
    const e1 = await run(["eval", native, ...evalArgs, "--label", "x"]);
    const e2 = await run(["eval", `${dir}/hf`, ...evalArgs, "--label", "x"]);
    assert.equal(e2.code, 0, e2.err);
    assert.equal(e2.out, e1.out);
  });
});
