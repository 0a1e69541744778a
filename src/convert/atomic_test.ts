import assert from "node:assert/strict";
import { listDir } from "./_test_checkpoints.ts";
import { refuseSamePath, resolvePath, writeDirAtomic, writeFileAtomic } from "./atomic.ts";
import { CheckpointError } from "./errors.ts";
import { withTempDir } from "../testing/temp_dir.ts";

Deno.test("a write that fails leaves neither the output nor a temporary file or directory", async () => {
  await withTempDir(async (dir) => {
    const boom = new Error("disk full");
    await assert.rejects(() =>
      writeFileAtomic(`${dir}/out.safetensors`, async (tmp) => {
        await Deno.writeTextFile(tmp, "partial");
        throw boom;
      }), boom);
    await assert.rejects(() =>
      writeDirAtomic(`${dir}/hf`, async (tmp) => {
        await Deno.writeTextFile(`${tmp}/config.json`, "{}");
        throw boom;
      }), boom);
    assert.deepEqual(await listDir(dir), []);
  });
});

Deno.test("a complete write appears under the output name only", async () => {
  await withTempDir(async (dir) => {
    await writeFileAtomic(`${dir}/a`, (tmp) => Deno.writeTextFile(tmp, "A"));
    await writeDirAtomic(`${dir}/d`, (tmp) => Deno.writeTextFile(`${tmp}/f`, "F"));
    await Deno.mkdir(`${dir}/empty`);
    await writeDirAtomic(`${dir}/empty`, (tmp) => Deno.writeTextFile(`${tmp}/g`, "G"));
    assert.deepEqual(await listDir(dir), ["a", "d", "empty"]);
    assert.equal(await Deno.readTextFile(`${dir}/d/f`), "F");
    assert.equal(await Deno.readTextFile(`${dir}/empty/g`), "G");
    await assert.rejects(() => writeDirAtomic(`${dir}/a`, () => Promise.resolve()), CheckpointError);
  });
});

Deno.test("refuseSamePath() sees through relative paths, trailing slashes and symlinks", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/in`, "x");
    await Deno.symlink(`${dir}/in`, `${dir}/alias`);
    await assert.rejects(() => refuseSamePath(`${dir}/in`, `${dir}/alias`), /output path is the input/);
    await assert.rejects(() => refuseSamePath(`${dir}/in`, `${dir}/./in`), /output path is the input/);
    await refuseSamePath(`${dir}/in`, `${dir}/out`);
    assert.equal(await resolvePath(`${dir}/missing/../in`), `${dir}/in`);
    assert.equal(await resolvePath(`${dir}/new/`), `${dir}/new`);
  });
});
