import { assertEquals, assertRejects, assertThrows } from "../../src/eval/_assert.ts";
import { childArgs, costliestFirst, mapWithJobs, parseDriverArgs, runExperiment } from "./run.ts";

Deno.test("parseDriverArgs() reads the options and names a bad one", () => {
  const o = parseDriverArgs(["--smoke", "--steps", "3", "--backend", "ref", "--out", "x"]);
  assertEquals([o.plan.name, o.plan.train.steps, o.backend, o.outDir, o.runsDir], [
    "smoke",
    3,
    "ref",
    "x",
    "runs/addition-smoke",
  ]);
  assertEquals(parseDriverArgs([]).plan.name, "full");
  assertThrows(() => parseDriverArgs(["--backend", "gpu"]), RangeError, `--backend must be one of`);
  assertThrows(
    () => parseDriverArgs(["--steps", "0"]),
    RangeError,
    `--steps must be an integer >= 1, got "0"`,
  );
  assertEquals(parseDriverArgs(["--jobs", "auto"]).jobs, "auto");
  assertEquals(parseDriverArgs(["--jobs", "3"]).jobs, 3);
  assertEquals(parseDriverArgs([]).jobs, 1);
  assertThrows(
    () => parseDriverArgs(["--jobs", "many"]),
    RangeError,
    `--jobs must be an integer >= 1 or auto, got "many"`,
  );
});

Deno.test("runExperiment() trains, evaluates and writes the page, JSON and plot (smoke plan, 2 steps)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const options = parseDriverArgs([
      "--smoke",
      "--steps",
      "2",
      "--samples",
      "2",
      "--backend",
      "ref",
      "--runs",
      `${dir}/runs`,
      "--out",
      `${dir}/out`,
    ]);
    const lines: string[] = [];
    const paths = await runExperiment(options, "deno task experiment:addition --smoke", (l) => lines.push(l));
    assertEquals(paths.markdownPath, `${dir}/out/addition-smoke.md`);
    const md = await Deno.readTextFile(paths.markdownPath);
    assertEquals(md.startsWith("# Addition length extrapolation (SMOKE RUN: not a result)"), true);
    assertEquals(md.includes("- Command: `deno task experiment:addition --smoke`"), true);
    assertEquals(
      /\| falcon1a \| prefix \| 1 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| 85\.9 \| 69\.0 \|/.test(md),
      true,
    );
    assertEquals(/\| transformer-s0 \| \d+ \| 2 \| \d+\.\d{4} \|/.test(md), true);
    // the page says which Transformer ran, and names it in the summary
    assertEquals(
      md.includes(
        "- Variant transformer: RoPE softmax attention with the short convolution (width 4, SiLU) on q, k, v " +
          "and QK RMS-norm (shortConv true, qkNorm rms).",
      ),
      true,
    );
    assertEquals(/\| transformer \| - \| 1 \|/.test(md), true);
    const json = JSON.parse(await Deno.readTextFile(paths.jsonPath));
    assertEquals(json.summaries.length, 2);
    assertEquals(json.report.checkpoints.length, 2);
    assertEquals(json.report.keys, [1, 2, 3, 4, 5, 6]);
    const svg = await Deno.readTextFile(paths.plotPath);
    assertEquals(svg.includes("falcon1a prefix (1 seed)") && svg.includes("train length 3"), true);
    assertEquals(lines.some((l) => l.startsWith("training transformer-s0: 2 steps")), true);
    // the costlier Transformer starts (and, in one process, finishes) first; the page keeps the plan's order
    assertEquals(lines.filter((l) => l.includes(": done")).map((l) => l.split(":")[0]), [
      "[1/2] transformer-s0",
      "[2/2] falcon1a-prefix-s0",
    ]);
    assertEquals(json.report.checkpoints.map((c: { label: string }) => c.label), [
      "falcon1a prefix s0",
      "transformer s0",
    ]);
    // a second call with the same plan reuses both stored results instead of training again (and
    // --jobs auto, with nothing left to train, runs in this process)
    const again: string[] = [];
    await runExperiment(
      { ...options, jobs: "auto" },
      "deno task experiment:addition --smoke",
      (l) => again.push(l),
    );
    assertEquals(
      again.some((l) => /^--jobs auto: 1 at once \(0 runs to train on the CPU, \d+ cores\)$/.test(l)),
      true,
    );
    assertEquals(again.filter((l) => l.includes(": reusing ")).length, 2);
    assertEquals(again.some((l) => l.startsWith("training")), false);
    assertEquals((await Deno.readTextFile(paths.markdownPath)).includes("2 of 2 runs were reused"), true);
    assertEquals(
      JSON.parse(await Deno.readTextFile(paths.jsonPath)).report.checkpoints,
      json.report.checkpoints,
    );
    // --stored-only with a second seed in the plan: trains nothing, summarises the stored seed-0 runs and
    // names the two seed-1 runs as missing on the page
    const storedOnly = parseDriverArgs([
      "--smoke",
      "--steps",
      "2",
      "--samples",
      "2",
      "--seeds",
      "2",
      "--backend",
      "ref",
      "--runs",
      `${dir}/runs`,
      "--out",
      `${dir}/out`,
      "--stored-only",
    ]);
    const partial: string[] = [];
    await runExperiment(
      storedOnly,
      "deno task experiment:addition --smoke --stored-only",
      (l) => partial.push(l),
    );
    assertEquals(partial.some((l) => l.startsWith("training")), false);
    const partialMd = await Deno.readTextFile(paths.markdownPath);
    assertEquals(
      partialMd.includes(
        "- **Partial:** 2 of the plan's 4 runs have no result yet (falcon1a-prefix-s1, transformer-s1)",
      ),
      true,
    );
    assertEquals(JSON.parse(await Deno.readTextFile(paths.jsonPath)).report.checkpoints.length, 2);
    // and with nothing stored it says so instead of writing an empty page
    await assertRejects(
      () =>
        runExperiment(
          { ...storedOnly, runsDir: `${dir}/empty` },
          "deno task experiment:addition --smoke --stored-only",
          () => {},
        ),
      RangeError,
      "--stored-only: no stored result of plan smoke",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mapWithJobs() keeps at most N calls in flight and the results in order", async () => {
  let inFlight = 0;
  let most = 0;
  const out = await mapWithJobs([5, 1, 4, 2, 3], 2, async (x) => {
    most = Math.max(most, ++inFlight);
    await new Promise((r) => setTimeout(r, x));
    inFlight--;
    return x * 10;
  });
  assertEquals([out, most], [[50, 10, 40, 20, 30], 2]);
  const started: number[] = [];
  await mapWithJobs([0, 1, 2], 1, (x) => Promise.resolve(started.push(x)), [2, 0, 1]);
  assertEquals(started, [2, 0, 1]);
});

Deno.test("costliestFirst() starts the window rule and the Transformer before the cheaper rules", () => {
  const work = (["falcon1a", "falcon3", "linear", "transformer"] as const).map((mixer) => ({
    variant: { mixer, alignment: "prefix" as const },
  }));
  assertEquals(costliestFirst(work), [1, 3, 0, 2]);
});

Deno.test("--jobs 2 trains the runs in child processes and writes one page from both runs", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const options = parseDriverArgs([
      "--smoke",
      "--steps",
      "2",
      "--samples",
      "2",
      "--backend",
      "ref",
      "--jobs",
      "2",
      "--no-plot",
      "--runs",
      `${dir}/runs`,
      "--out",
      `${dir}/out`,
    ]);
    assertEquals([options.jobs, options.plot], [2, false]);
    const args = childArgs(options, options.plan.variants[0], 0, 1);
    assertEquals(args.slice(-8), [
      "--seed",
      "0",
      "--runs",
      `${dir}/runs`,
      "--backend",
      "ref",
      "--threads",
      "1",
    ]);
    const lines: string[] = [];
    const paths = await runExperiment(
      options,
      "deno task experiment:addition --smoke --jobs 2",
      (l) => lines.push(l),
    );
    // the children's progress lines come through, indented
    assertEquals(lines.some((l) => /^ {2}falcon1a-prefix-s0: trained in \d+ s/.test(l)), true);
    const json = JSON.parse(await Deno.readTextFile(paths.jsonPath));
    assertEquals(json.report.checkpoints.map((c: { label: string }) => c.label), [
      "falcon1a prefix s0",
      "transformer s0",
    ]);
    assertEquals(json.info.backend, "ref (2 processes, 1 thread(s) each)");
    // no plot was written
    assertEquals(await Deno.stat(paths.plotPath).then(() => true, () => false), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
