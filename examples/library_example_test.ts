import assert from "node:assert/strict";

const REPO = new URL("..", import.meta.url).pathname;
const EXAMPLE = new URL("./library_example.ts", import.meta.url);

Deno.test("library_example.ts matches the forms and trains a few steps, with file access to TMPDIR only", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "falcon_example_test_" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", `--allow-read=${tmp}`, `--allow-write=${tmp}`, EXAMPLE.pathname],
      cwd: REPO,
      env: { NO_COLOR: "1", TMPDIR: tmp },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, `exit ${out.code}\n${stdout}\n${new TextDecoder().decode(out.stderr)}`);
    const diff = stdout.match(/recurrent vs chunk \(C=4\): 192 outputs, max \|diff\| (\S+)/);
    assert.ok(diff, `no comparison line in:\n${stdout}`);
    assert.ok(Number(diff[1]) < 1e-12, `forms differ by ${diff[1]}`);
    const losses = stdout.match(/completed 4 steps of \d+ parameters, losses (.*)/)?.[1].split(", ").map(
      Number,
    );
    assert.equal(losses?.length, 4, `no training line in:\n${stdout}`);
    assert.ok(losses.every((l) => Number.isFinite(l) && l > 0), `losses ${losses}`);
    // the example cleans up after itself
    assert.deepEqual([...Deno.readDirSync(tmp)], []);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("the README's Library section shows library_example.ts verbatim", async () => {
  const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
  const section = readme.split(/^## /m).find((s) => s.startsWith("Library\n"));
  assert.ok(section, "README.md has no '## Library' section");
  const block = section.match(/```ts\n([\s\S]*?)```/)?.[1];
  assert.equal(block, await Deno.readTextFile(EXAMPLE));
});
