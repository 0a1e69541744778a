/**
 * `falcon convert` and `falcon inspect` through the CLI: hostile files (one test per hand-made
 * file in fixtures/bad_checkpoints/), refusals with exit code 2 and nothing left behind, and the
 * happy paths' output.
 */

import assert from "node:assert/strict";
import { type BadFile, badFiles } from "../../fixtures/bad_checkpoints/generate.ts";
import { listDir, tinyCheckpointBytes, tinyConfig } from "../../src/convert/_test_checkpoints.ts";
import { parameterCount } from "../../src/model/params.ts";
import { runCli } from "../_run_in_process.ts";
import { withTempDir } from "../../src/testing/temp_dir.ts";

const BAD_DIR = new URL("../../fixtures/bad_checkpoints/", import.meta.url).pathname;

const run = runCli;

const BAD = await badFiles();

Deno.test("fixtures/bad_checkpoints/ holds exactly the files generate.ts makes, byte for byte", async () => {
  const committed = (await listDir(BAD_DIR)).filter((n) => n.endsWith(".safetensors"));
  assert.deepEqual(committed, BAD.map((b) => b.name).sort());
  for (const bad of BAD) {
    assert.deepEqual(
      await Deno.readFile(`${BAD_DIR}${bad.name}`),
      bad.bytes,
      `${bad.name} differs from generate.ts (regenerate: deno run --allow-read --allow-write fixtures/bad_checkpoints/generate.ts)`,
    );
  }
});

function checkRefusal(bad: BadFile, path: string, result: { code: number; err: string }): void {
  assert.equal(result.code, 2, `${bad.name}: exit code ${result.code}, stderr: ${result.err}`);
  assert.ok(result.err.includes(path), `${bad.name}: the error does not name the file: ${result.err}`);
  for (const word of bad.mentions) {
    assert.ok(
      result.err.toLowerCase().includes(word.toLowerCase()),
      `${bad.name}: error lacks "${word}": ${result.err}`,
    );
  }
}

for (const bad of BAD) {
  Deno.test(`falcon convert and inspect refuse ${bad.name} (${bad.fault}) with exit 2 and leave no output`, async () => {
    await withTempDir(async (dir) => {
      const path = `${BAD_DIR}${bad.name}`;
      checkRefusal(bad, path, await run(["inspect", path]));
      checkRefusal(bad, path, await run(["convert", path, `${dir}/out`, "--to", "hf"]));
      checkRefusal(bad, path, await run(["convert", path, `${dir}/out.safetensors`, "--to", "native"]));
      assert.deepEqual(await listDir(dir), [], "a refusal left files behind");
    });
  });
}

Deno.test("--allow-nonfinite converts a checkpoint holding NaN", async () => {
  await withTempDir(async (dir) => {
    const path = `${BAD_DIR}nonfinite_weight.safetensors`;
    const r = await run(["convert", path, `${dir}/out`, "--to", "hf", "--allow-nonfinite"]);
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(await listDir(`${dir}/out`), ["config.json", "model.safetensors"]);
  });
});

Deno.test("falcon convert refuses an output path equal to the input (file, directory, via symlink, inside)", async () => {
  await withTempDir(async (dir) => {
    const native = `${dir}/n.safetensors`;
    const original = await tinyCheckpointBytes();
    await Deno.writeFile(native, original);
    let r = await run(["convert", native, native, "--to", "native"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /output path is the input/);
    await Deno.symlink(native, `${dir}/link.safetensors`);
    r = await run(["convert", native, `${dir}/link.safetensors`, "--to", "native", "--dtype", "f32"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /output path is the input/);
    assert.deepEqual(await Deno.readFile(native), original);
    assert.equal((await run(["convert", native, `${dir}/hf`, "--to", "hf"])).code, 0);
    r = await run(["convert", `${dir}/hf`, `${dir}/hf/`, "--to", "hf"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /output path is the input/);
    r = await run(["convert", `${dir}/hf`, `${dir}/hf/model.safetensors`, "--to", "native"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /inside the input directory/);
    assert.deepEqual(await listDir(dir), ["hf", "link.safetensors", "n.safetensors"]);
    assert.deepEqual(await listDir(`${dir}/hf`), ["config.json", "model.safetensors"]);
  });
});

Deno.test("falcon convert refuses a missing input, a non-empty output directory and bad options with exit 2", async () => {
  await withTempDir(async (dir) => {
    let r = await run(["convert", `${dir}/nope.safetensors`, `${dir}/o`, "--to", "hf"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /nope\.safetensors: no such file/);
    const native = `${dir}/n.safetensors`;
    await Deno.writeFile(native, await tinyCheckpointBytes());
    await Deno.mkdir(`${dir}/full`);
    await Deno.writeTextFile(`${dir}/full/keep`, "x");
    r = await run(["convert", native, `${dir}/full`, "--to", "hf"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /not empty/);
    assert.deepEqual(await listDir(`${dir}/full`), ["keep"]);
    assert.equal((await run(["convert", native, `${dir}/o`])).code, 2, "--to is required");
    assert.equal((await run(["convert", native, `${dir}/o`, "--to", "onnx"])).code, 2);
    assert.equal((await run(["convert", native, `${dir}/o`, "--to", "hf", "--dtype", "f8"])).code, 2);
    assert.deepEqual(await listDir(dir), ["full", "n.safetensors"]);
  });
});

Deno.test("falcon convert prints the largest relative change; falcon inspect shows format, config, tensors and size", async () => {
  await withTempDir(async (dir) => {
    const config = tinyConfig({ mixer: "falcon3", tieEmbeddings: false });
    const native = `${dir}/n.safetensors`;
    await Deno.writeFile(native, await tinyCheckpointBytes(config, { dtype: "f32", optimizer: true }));
    let r = await run(["convert", native, `${dir}/hf`, "--to", "hf", "--dtype", "bf16"]);
    assert.equal(r.code, 0, r.err);
    const change = Number(r.out.match(/largest relative change of a weight: (\S+)/)?.[1]);
    assert.ok(change > 0 && change <= 2 ** -8, r.out);
    assert.match(r.out, /optimizer state \(\d+ tensors\) is not part of an hf export: dropped/);

    r = await run(["inspect", `${dir}/hf`, "--json"]);
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out);
    assert.equal(report.format, "hf");
    assert.equal(report.version, 2);
    assert.deepEqual(report.config, config);
    assert.equal(report.parameterCount, parameterCount(config));
    assert.equal(report.storedParameters, parameterCount(config));
    assert.ok(
      report.tensors.some((t: { name: string; dtype: string; shape: number[] }) =>
        t.name === "lm_head.weight" && t.dtype === "BF16" && t.shape.join() === "14,8"
      ),
    );
    const size = (await Deno.stat(`${dir}/hf/model.safetensors`)).size +
      (await Deno.stat(`${dir}/hf/config.json`)).size;
    assert.equal(report.totalBytes, size);

    r = await run(["inspect", native]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`^${native}: native checkpoint, format version 2`, "m"));
    assert.match(r.out, /model: falcon3, prefix alignment/);
    assert.match(r.out, new RegExp(`parameters: ${parameterCount(config)}`));
    assert.match(r.out, /optimizer\.m\.embed\s+F32\s+\[14, 8\]/);
    assert.match(r.out, /layers\.1\.mixer\.q_conv\s+F32\s+\[8, 4\]/);
    assert.match(r.out, new RegExp(`total size: .*\\(${(await Deno.stat(native)).size} bytes\\)`));
  });
});

Deno.test("inspect shows a checkpoint's digest; an edited file is refused by inspect, convert, predict and eval", async () => {
  await withTempDir(async (dir) => {
    const native = `${dir}/n.safetensors`;
    const bytes = await tinyCheckpointBytes(tinyConfig({ mixer: "falcon3a" }));
    await Deno.writeFile(native, bytes);
    let r = await run(["inspect", native]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^digest: sha256:[0-9a-f]{64} \(verified\)$/m);
    // a JSON-valid edit of the rule: the container and config still parse
    const text = new TextDecoder("latin1").decode(bytes).replace("falcon3a", "falcon1a");
    const edited = Uint8Array.from(text, (c) => c.charCodeAt(0));
    await Deno.writeFile(`${dir}/edited.safetensors`, edited);
    for (
      const args of [
        ["inspect", `${dir}/edited.safetensors`],
        ["convert", `${dir}/edited.safetensors`, `${dir}/out.safetensors`, "--to", "native"],
        ["predict", `${dir}/edited.safetensors`, "--prompt", "1+2=", "--backend", "ref"],
        ["eval", `${dir}/edited.safetensors`, "--lengths", "1", "--samples", "2", "--backend", "ref"],
      ]
    ) {
      r = await run(args);
      assert.equal(r.code, 2, `${args[0]}: exit ${r.code}\n${r.out}\n${r.err}`);
      assert.match(r.err, /edited\.safetensors: content digest mismatch/, args[0]);
    }
    // a file from before digests loads; inspect says it has none
    const { readSafetensors, writeSafetensors } = await import("../../src/checkpoint/safetensors.ts");
    const { tensors, metadata: { content_digest: _, ...metadata } } = readSafetensors(bytes, "n");
    await Deno.writeFile(`${dir}/old.safetensors`, writeSafetensors(tensors, metadata));
    r = await run(["inspect", `${dir}/old.safetensors`]);
    assert.equal(r.code, 0, r.err);
    assert.match(
      r.out,
      /^digest: no digest \(written before falcon stored digests; integrity not checked\)$/m,
    );
    assert.deepEqual(await listDir(dir), ["edited.safetensors", "n.safetensors", "old.safetensors"]);
  });
});
