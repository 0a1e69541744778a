import assert from "node:assert/strict";
import * as layout from "./pool_layout.js";
import { workerSource } from "./worker_source.ts";

Deno.test("workerSource() declares every export of pool_layout.js and then runs the worker program", () => {
  const source = workerSource();
  for (const [name, value] of Object.entries(layout)) {
    if (typeof value === "function") assert.ok(source.includes(`function ${name}(`), `${name} missing`);
    else assert.ok(source.includes(`const ${name} = ${JSON.stringify(value)};`), `${name} missing`);
  }
  assert.ok(!/\bimport\b/.test(source), "the worker source must import nothing");
  assert.match(source, /\(function workerMain\(\) \{[\s\S]*postMessage\("loaded"\)[\s\S]*\}\)\(\);\n$/);
});

Deno.test("the pool starts its worker threads under --allow-read of an unrelated directory only", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "falcon_blob_worker_" });
  try {
    const script = `${tmp}/threads.ts`;
    await Deno.writeTextFile(
      script,
      `import { createWasmBackend } from ${JSON.stringify(new URL("./backend.ts", import.meta.url).href)};
import { ruleConfig } from ${JSON.stringify(new URL("../rules/config.ts", import.meta.url).href)};
const results = [];
for (const threads of [1, 2]) {
  const be = await createWasmBackend({ threads });
  const n = 2 * 9 * 3 * 5;
  const t = (seed, shape) => be.fromArray(Array.from({ length: shape.reduce((a, b) => a * b) }, (_, i) => Math.sin(seed * 7 + i)), shape);
  const inputs = { q: t(1, [2, 9, 3, 5]), k: t(2, [2, 9, 3, 5]), v: t(3, [2, 9, 3, 5]), beta: t(4, [2, 9, 3]), lambdabar: t(5, [2, 9, 3]) };
  const { o } = be.fastWeightForward(ruleConfig("falcon1"), inputs);
  results.push({ threads: be.threads, o: Array.from(await be.read(o)), n });
  be.close();
}
console.log(JSON.stringify(results));
`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", `--allow-read=${tmp}`, "--no-prompt", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.ok(out.success, `child failed: ${stderr}`);
    const [one, two] = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.deepEqual([one.threads, two.threads], [1, 2]);
    assert.deepEqual(two.o, one.o);
    assert.ok(one.o.every(Number.isFinite) && one.o.some((x: number) => x !== 0));
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
