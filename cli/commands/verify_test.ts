import { runCli } from "../_run_in_process.ts";
import { probeGpuAdapter } from "../../src/info/gpu_adapter.ts";
import { SMALL_CHUNK } from "../../src/testing/shapes.ts";

const FIXTURES = new URL("../../fixtures/vectors/", import.meta.url).pathname;

const run = runCli;

function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Error(message);
}

Deno.test("falcon verify passes every bundled vector on the reference backend", async () => {
  const { code, out } = await run(["verify", "--vectors", FIXTURES]);
  assert(code === 0, `exit code ${code}\n${out}`);
  assert(out.includes("22 passed, 0 failed"), `summary missing:\n${out}`);
});

Deno.test("falcon verify names a malformed file and its field, still runs the others, and exits 1", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.copyFile(`${FIXTURES}/falcon1__prefix__default.json`, `${dir}/good.json`);
    const bad = JSON.parse(await Deno.readTextFile(`${FIXTURES}/falcon1a__prefix__default.json`));
    bad.inputs.q[3].pop();
    await Deno.writeTextFile(`${dir}/bad.json`, JSON.stringify(bad));
    await Deno.writeTextFile(`${dir}/broken.json`, "{ not json");
    const { code, out } = await run(["verify", "--vectors", dir]);
    assert(code === 1, `exit code ${code}, expected 1\n${out}`);
    assert(/ERROR bad\.json: .*inputs\.q\[3\]/.test(out), `bad.json error should name inputs.q[3]:\n${out}`);
    assert(/ERROR broken\.json: .*not valid JSON/.test(out), `broken.json error missing:\n${out}`);
    assert(/ok +good\.json/.test(out), `good.json should still pass:\n${out}`);
    assert(out.includes("1 passed, 2 failed"), `summary wrong:\n${out}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("falcon verify --json reports every array of every file", async () => {
  const { code, out } = await run(["verify", "--vectors", FIXTURES, "--json"]);
  assert(code === 0, `exit code ${code}`);
  const report = JSON.parse(out);
  assert(report.passed === true && report.results.length === 22, "report should pass with 22 files");
  const arrays = report.results[0].check.arrays.map((a: { name: string }) => a.name);
  assert(arrays.join(",") === "o,S_final,dq,dk,dv,dbeta,dlambdabar,dS0", `arrays: ${arrays}`);
});

Deno.test("falcon verify exits 2 with a clear message for a missing directory or option", async () => {
  const missing = await run(["verify", "--vectors", "/nonexistent/vectors"]);
  assert(missing.code === 2, `exit code ${missing.code}`);
  assert(missing.err.includes("/nonexistent/vectors does not exist"), `message: ${missing.err}`);
  const noOption = await run(["verify"]);
  assert(noOption.code === 2, `exit code ${noOption.code}`);
  const badBackend = await run(["verify", "--vectors", FIXTURES, "--backend", "cuda"]);
  assert(badBackend.code === 2, `exit code ${badBackend.code}`);
});

Deno.test("falcon verify passes every bundled vector on the reference chunk and parallel forms", async () => {
  for (const form of ["chunk", "parallel"]) {
    const { code, out } = await run(["verify", "--vectors", FIXTURES, "--form", form, "--chunk-size", "16"]);
    assert(code === 0, `form ${form}: exit code ${code}\n${out}`);
    assert(out.includes("22 passed, 0 failed"), `form ${form}: summary missing:\n${out}`);
  }
});

Deno.test("falcon verify --backend wasm passes every bundled vector at float32 tolerances", async () => {
  const { code, out } = await run(["verify", "--vectors", FIXTURES, "--backend", "wasm"]);
  assert(code === 0, `exit code ${code}\n${out}`);
  assert(out.includes("22 passed, 0 failed (backend wasm"), `summary missing:\n${out}`);
});

Deno.test("falcon verify --backend wasm --threads 2 --form chunk passes; a bad --threads exits 2 naming it", async () => {
  const ok = await run([
    "verify",
    "--vectors",
    FIXTURES,
    "--backend",
    "wasm",
    "--threads",
    "2",
    "--form",
    "chunk",
  ]);
  assert(ok.code === 0, `exit code ${ok.code}\n${ok.out}`);
  assert(ok.out.includes("22 passed, 0 failed (backend wasm, form chunk)"), `summary missing:\n${ok.out}`);
  for (const bad of ["0", "65", "two"]) {
    const r = await run(["verify", "--vectors", FIXTURES, "--backend", "wasm", "--threads", bad]);
    assert(r.code === 2, `--threads ${bad}: exit code ${r.code}`);
    assert(
      r.err.includes(`--threads must be an integer in 1..64, got "${bad}"`),
      `message missing:\n${r.err}`,
    );
  }
});

const gpu = await probeGpuAdapter();
Deno.test({
  name: gpu.ok
    ? "falcon verify --backend webgpu passes every bundled vector at float32 tolerances"
    : `falcon verify --backend webgpu (SKIPPED: ${gpu.reason})`,
  ignore: !gpu.ok,
  sanitizeResources: false,
  async fn() {
    // the small chunk size (the recurrent backward's checkpoint interval), as in
    // wgpu/fast_weight_vectors_test.ts: the same pipelines, compiled once per run on a software adapter
    const { code, out } = await run([
      "verify",
      "--vectors",
      FIXTURES,
      "--backend",
      "webgpu",
      "--chunk-size",
      String(SMALL_CHUNK),
    ]);
    assert(code === 0, `exit code ${code}\n${out}`);
    assert(out.includes("22 passed, 0 failed (backend webgpu"), `summary missing:\n${out}`);
  },
});

Deno.test("falcon verify shows progress per vector on stderr before each file runs, with --json too", async () => {
  for (const json of [false, true]) {
    const { code, err } = await run(["verify", "--vectors", FIXTURES, ...(json ? ["--json"] : [])]);
    assert(code === 0, `exit code ${code}`);
    const starts = err.split("\n").filter((l) => /^\[\d+\/22\] \S+\.json \.\.\.$/.test(l));
    assert(starts.length === 22, `expected 22 progress lines, got ${starts.length}:\n${err}`);
    assert(starts[0].startsWith("[1/22] ") && starts[21].startsWith("[22/22] "), starts.join("\n"));
    assert(/^ {2}\S+\.json: \d+\.\d s$/m.test(err), `time per vector missing:\n${err}`);
  }
});
