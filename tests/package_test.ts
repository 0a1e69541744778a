/**
 * The JSR package: every entry of the export map is fully documented (`deno doc --lint`), and a
 * publish dry run passes (no slow types, nothing missing from the package).
 *
 * @module
 */

import assert from "node:assert/strict";

const REPO = new URL("..", import.meta.url).pathname;
const decoder = new TextDecoder();

async function deno(args: string[]): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: REPO,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, output: decoder.decode(out.stdout) + decoder.decode(out.stderr) };
}

async function exportEntries(): Promise<Record<string, string>> {
  return JSON.parse(await Deno.readTextFile(`${REPO}deno.json`)).exports;
}

Deno.test("the export map has the root and the rules, model, wasm and webgpu entry points", async () => {
  assert.deepEqual(Object.keys(await exportEntries()).sort(), [
    ".",
    "./model",
    "./rules",
    "./wasm",
    "./webgpu",
  ]);
});

Deno.test("every exported entry point passes deno doc --lint", async () => {
  const entries = Object.values(await exportEntries());
  const r = await deno(["doc", "--lint", ...entries]);
  assert.equal(r.code, 0, `deno doc --lint ${entries.join(" ")}:\n${r.output}`);
});

Deno.test("deno publish --dry-run passes and leaves tests, fixtures and tools out of the package", async () => {
  const r = await deno(["publish", "--dry-run", "--allow-dirty"]);
  assert.equal(r.code, 0, r.output);
  assert.doesNotMatch(r.output, /warning/i);
  const files = [...r.output.matchAll(/file:\/\/\S+/g)].map((m) => m[0].slice(`file://${REPO}`.length));
  assert.ok(files.includes("mod.ts"), `mod.ts missing from the package: ${files}`);
  const leaked = files.filter((f) =>
    /_test\.ts$|^(tests|bench|experiments|interop|scripts|assembly|fixtures\/vectors|dist)\//.test(f)
  );
  assert.deepEqual(leaked, []);
});
