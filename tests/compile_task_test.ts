/**
 * `deno task compile` builds `dist/falcon` with only file access baked in and every Worker module
 * embedded: a Worker started from `new URL("./x.ts", import.meta.url)` is not in the static module
 * graph, so `deno compile` leaves it out unless `--include` names it. (The WASM pool's workers run
 * from a `blob:` URL and need no file.) The task runs `scripts/compile.ts`, which holds the
 * `deno compile` arguments and explains a failure (no `denort`) in a few lines.
 *
 * @module
 */

import assert from "node:assert/strict";
import { compileArgs } from "../scripts/compile.ts";

const REPO = new URL("..", import.meta.url);

function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** The `deno compile` command line the compile task runs (through `scripts/compile.ts`). */
async function compileTask(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", REPO)));
  const task = config.tasks?.compile;
  assert.equal(typeof task, "string", "deno.json has no compile task");
  assert.equal(words(task).at(-1), "scripts/compile.ts", task);
  return ["deno", ...compileArgs()];
}

/** Repository-relative paths of the modules that library and CLI code start as Workers. */
async function workerModules(): Promise<string[]> {
  const found: string[] = [];
  async function walk(dir: string): Promise<void> {
    for await (const e of Deno.readDir(new URL(dir, REPO))) {
      const path = `${dir}${e.name}`;
      if (e.isDirectory) await walk(`${path}/`);
      else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) {
        const text = await Deno.readTextFile(new URL(path, REPO));
        for (
          const m of text.matchAll(/new Worker\(\s*new URL\(\s*["']([^"']+)["']\s*,\s*import\.meta\.url/g)
        ) {
          found.push(new URL(m[1], new URL(path, REPO)).pathname.slice(REPO.pathname.length));
        }
      }
    }
  }
  for (const dir of ["src/", "wgpu/", "cli/"]) await walk(dir);
  return found;
}

Deno.test("the compile task bakes in file read and write only", async () => {
  const w = await compileTask();
  assert.deepEqual(w.slice(0, 2), ["deno", "compile"]);
  const permissions = w.filter((x) =>
    /^(-A|-[RWNESI]|--allow-|--deny-|--no-prompt|-P|--permission-set)/.test(x)
  );
  assert.deepEqual(permissions.sort(), ["--allow-read", "--allow-write", "--no-prompt"]);
  assert.equal(w.at(-1), "cli/main.ts");
  assert.equal(w[w.indexOf("--output") + 1], "dist/falcon");
});

Deno.test("the compile task includes every module started as a Worker (the WASM pool's is a blob)", async () => {
  const w = await compileTask();
  const included = w.flatMap((x, i) => (x === "--include" ? [w[i + 1]] : []));
  const workers = await workerModules();
  // the WASM pool starts its workers from a blob: URL (src/wasm/worker_source.ts): no file to include
  assert.ok(!workers.includes("src/wasm/worker.ts"), `the WASM pool worker is a file again: ${workers}`);
  for (const worker of workers) {
    assert.ok(
      included.includes(worker),
      `${worker} is started as a Worker but not --include'd by the compile task`,
    );
  }
});

Deno.test("a compile without denort says in a few lines how to point DENORT_BIN at one and leaves no empty dist/", async () => {
  const dir = await Deno.makeTempDir({ prefix: "falcon_compile_" });
  try {
    const output = `${dir}/dist/falcon`;
    const r = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-run",
        "--allow-read",
        "--allow-write",
        "--allow-env=DENORT_BIN",
        "scripts/compile.ts",
        "--output",
        output,
      ],
      cwd: REPO.pathname,
      env: { DENORT_BIN: `${dir}/no/denort` },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(r.stderr);
    assert.notEqual(r.code, 0);
    assert.match(err, /^deno task compile failed:$/m);
    assert.match(err, /Could not find denort at '.*no\/denort'/);
    assert.match(err, /DENORT_BIN is ".*no\/denort", which does not name a usable denort/);
    assert.match(err, /DENORT_BIN=\/path\/to\/denort deno task compile/);
    assert.doesNotMatch(err, /Stack backtrace/);
    assert.deepEqual([...Deno.readDirSync(dir)], [], "the failed build left dist/ behind");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
