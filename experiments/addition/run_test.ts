import { assertEquals, assertThrows } from "../../src/eval/_assert.ts";
import { parseDriverArgs, runExperiment } from "./run.ts";

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
    const json = JSON.parse(await Deno.readTextFile(paths.jsonPath));
    assertEquals(json.summaries.length, 2);
    assertEquals(json.report.checkpoints.length, 2);
    assertEquals(json.report.keys, [1, 2, 3, 4, 5, 6]);
    const svg = await Deno.readTextFile(paths.plotPath);
    assertEquals(svg.includes("falcon1a prefix (1 seed)") && svg.includes("train length 3"), true);
    assertEquals(lines.some((l) => l.startsWith("[2/2] training transformer-s0")), true);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
