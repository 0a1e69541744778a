import { assertEquals } from "../../src/eval/_assert.ts";
import { additionResult, type EvalReport } from "../../src/eval/report.ts";
import { summariseVariants } from "./aggregate.ts";
import { renderMarkdown } from "./markdown.ts";
import { makePlan } from "./plan.ts";

/** One falcon1a run trained on 32 digits with per-place results: right on 3 of 4 digits of place >= 32. */
function report(): EvalReport {
  const meta = { path: "p", mixer: "falcon1a", alignment: "prefix", seed: 0, trainLength: 32 };
  const places = { total: [...new Array(32).fill(2), 4], correct: [...new Array(32).fill(2), 3] };
  const tally = { tokens: 68, correctTokens: 67, sequences: 2, exactSequences: 1, places };
  return {
    task: "addition",
    keyName: "length",
    keys: [32],
    samples: 2,
    seed: 0,
    date: "2026-12-01T00:00:00.000Z",
    checkpoints: [additionResult(meta, "falcon1a prefix s0", new Map([[32, tally]]))],
  };
}

Deno.test("renderMarkdown() puts the no-extrapolation reference beside the paper figures and the per-place measure last", () => {
  const plan = makePlan("full");
  const info = {
    command: "test",
    date: "2026-12-01",
    backend: "ref",
    plan,
    wallSeconds: 1,
    runs: [],
    plotFile: "a.svg",
    jsonFile: "a.json",
  };
  const md = renderMarkdown(info, summariseVariants(report()));
  assertEquals(md.includes("| paper 33-48 | paper at 48 | digit acc places >= 32 |"), true);
  // the run's row ends with its pooled accuracy over places >= 32: 3 of 4
  assertEquals(/\| falcon1a \| prefix \| 1 \| .* \| 85\.9 \| 69\.0 \| 75\.0 \|/.test(md), true);
  // the reference at Ltrain 32 over 1..48: 99.9% over 1-32 (the carry digit of 32-digit sums is guessed),
  // 81.0% over 33-48, 69.3% at 48, 10% on places >= 32
  const row = md.split("\n").find((l) => l.startsWith("| no extrapolation (reference) |"))!;
  assertEquals(row.split(" | ").slice(3), ["99.9", "81.0", "69.3", "0.3", "81.0", "69.3", "10.0 |"]);
  // a run stored before the per-place metric shows "-" there
  const old = report();
  const { places: _, reference: __, ...bare } = old.checkpoints[0];
  const oldMd = renderMarkdown(info, summariseVariants({ ...old, checkpoints: [{ ...bare }] }));
  assertEquals(/\| 85\.9 \| 69\.0 \| - \|/.test(oldMd), true);
});
