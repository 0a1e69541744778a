import assert from "node:assert/strict";
import { LOCK_FILE, openRunDirectory, RunDirectoryError } from "./run_dir.ts";
import { CHECKPOINT_FILE, METRICS_FILE } from "./trainer.ts";
import { withTempDir } from "../testing/temp_dir.ts";

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

Deno.test("openRunDirectory() locks the directory: a second opener is refused naming the pid and host", async () => {
  await withTempDir(async (dir) => {
    const run = `${dir}/run`;
    const first = await openRunDirectory(run, { resume: false });
    assert.equal(first.created, true);
    const lock = JSON.parse(await Deno.readTextFile(`${run}/${LOCK_FILE}`));
    assert.equal(lock.pid, Deno.pid);
    assert.equal(typeof lock.host, "string");
    await assert.rejects(() => openRunDirectory(run, { resume: true }), {
      name: "RunDirectoryError",
      message: new RegExp(
        `--out ${run} is in use by another run \\(pid ${Deno.pid} on host ${lock.host}, started `,
      ),
    });
    await Deno.writeTextFile(`${run}/${METRICS_FILE}`, "{}\n"); // the run wrote something
    await first.release();
    assert.deepEqual(await names(run), [METRICS_FILE]);
    // released: the next run takes it
    const second = await openRunDirectory(run, { resume: true });
    await second.release();
  });
});

Deno.test("a lock file nobody holds (its process died) is recognised as stale and replaced", async () => {
  await withTempDir(async (dir) => {
    const stale = { pid: 999999, host: "gone-host", started: "2026-01-01T00:00:00.000Z" };
    await Deno.writeTextFile(`${dir}/${LOCK_FILE}`, JSON.stringify(stale));
    const opened = await openRunDirectory(dir, { resume: false });
    assert.deepEqual(opened.staleLock, stale);
    assert.equal(JSON.parse(await Deno.readTextFile(`${dir}/${LOCK_FILE}`)).pid, Deno.pid);
    await opened.release();
    assert.deepEqual(await names(dir), []);
  });
});

Deno.test("a lock held by a killed process is stale: the kernel dropped its flock", async () => {
  await withTempDir(async (dir) => {
    const holder = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `import { openRunDirectory } from "${new URL("./run_dir.ts", import.meta.url).href}";` +
        `await openRunDirectory(${JSON.stringify(dir)}, { resume: true }); console.log("locked");` +
        "setInterval(() => {}, 1000);",
      ],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = holder.stdout.getReader();
    const { value } = await reader.read();
    assert.match(new TextDecoder().decode(value), /locked/);
    await assert.rejects(() => openRunDirectory(dir, { resume: true }), /is in use by another run \(pid \d+/);
    holder.kill("SIGKILL");
    await holder.status;
    reader.releaseLock();
    await holder.stdout.cancel();
    const opened = await openRunDirectory(dir, { resume: true });
    assert.equal(opened.staleLock?.pid, holder.pid);
    await opened.release();
  });
});

Deno.test("a fresh run refuses a non-empty directory unless --force, which removes only the run's files", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/${METRICS_FILE}`, '{"step":1}\n');
    await assert.rejects(() => openRunDirectory(dir, { resume: false }), {
      name: "RunDirectoryError",
      message: new RegExp(
        `${dir} is not empty \\(it holds metrics.jsonl\\); pass --resume .* --force to start clean`,
      ),
    });
    await Deno.writeFile(`${dir}/${CHECKPOINT_FILE}`, new Uint8Array(8));
    await assert.rejects(
      () => openRunDirectory(dir, { resume: false }),
      /already holds a checkpoint; pass --resume/,
    );
    await Deno.writeTextFile(`${dir}/notes.txt`, "mine");
    assert.deepEqual(await names(dir), [CHECKPOINT_FILE, METRICS_FILE, "notes.txt"]);
    const forced = await openRunDirectory(dir, { resume: false, force: true });
    assert.deepEqual(forced.removedRunFiles, [CHECKPOINT_FILE, METRICS_FILE]);
    await forced.release();
    assert.deepEqual(await names(dir), ["notes.txt"]);
    await assert.rejects(() => openRunDirectory(dir, { resume: true, force: true }), RunDirectoryError);
  });
});

Deno.test("stale temporary checkpoint files are removed at start; other dot files stay", async () => {
  await withTempDir(async (dir) => {
    const stale = `.${CHECKPOINT_FILE}.4242.0a1b2c3d.tmp`;
    await Deno.writeFile(`${dir}/${stale}`, new Uint8Array(16));
    await Deno.writeFile(`${dir}/.${METRICS_FILE}.4242.0a1b2c3d.tmp`, new Uint8Array(4));
    await Deno.writeFile(`${dir}/${CHECKPOINT_FILE}`, new Uint8Array(8));
    await Deno.writeTextFile(`${dir}/.keep`, "");
    const opened = await openRunDirectory(dir, { resume: true });
    assert.deepEqual(opened.removedTemporaryFiles, [stale, `.${METRICS_FILE}.4242.0a1b2c3d.tmp`].sort());
    await opened.release();
    assert.deepEqual(await names(dir), [".keep", CHECKPOINT_FILE]);
  });
});

Deno.test("--out naming a file is refused before anything is created", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/some_file`, "x");
    await assert.rejects(() => openRunDirectory(`${dir}/some_file`, { resume: false }), {
      name: "RunDirectoryError",
      message: /--out .*some_file is not a directory/,
    });
    await assert.rejects(() => openRunDirectory(`${dir}/some_file/run`, { resume: false }), {
      name: "RunDirectoryError",
      message: /some_file\/run: cannot create the run directory: .*not a directory|already exists/,
    });
    assert.deepEqual(await names(dir), ["some_file"]);
  });
});
