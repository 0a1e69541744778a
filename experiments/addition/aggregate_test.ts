import { assertAlmostEquals, assertEquals } from "../../src/eval/_assert.ts";
import { accuracyResult, type EvalReport } from "../../src/eval/report.ts";
import { meanReport, meanSd, summariseVariants } from "./aggregate.ts";
import { formatMeanSd } from "./markdown.ts";

Deno.test("meanSd() is the mean and the n-1 standard deviation of the finite values", () => {
  const m = meanSd([0.5, 0.7, 0.9, NaN]);
  assertEquals(m.n, 3);
  assertAlmostEquals(m.mean, 0.7, 1e-15);
  assertAlmostEquals(m.sd, 0.2, 1e-15);
  assertEquals(meanSd([0.4]), { mean: 0.4, sd: 0, n: 1 });
  assertEquals(formatMeanSd(m), "70.0 ± 20.0");
  assertEquals(formatMeanSd(meanSd([0.4])), "40.0");
});

/** Two seeds of falcon1a (prefix), one of falcon1a (same-step); trained on 1 digit, evaluated on 1..2. */
function report(): EvalReport {
  const run = (alignment: string, seed: number, right1: number, right2: number) =>
    accuracyResult(
      { path: `${alignment}${seed}`, mixer: "falcon1a", alignment, seed, trainLength: 1 },
      `falcon1a ${alignment} s${seed}`,
      new Map([
        [1, { tokens: 10, correctTokens: right1, sequences: 5, exactSequences: 1 }],
        [2, { tokens: 10, correctTokens: right2, sequences: 5, exactSequences: seed }],
      ]),
    );
  return {
    task: "addition",
    keyName: "length",
    keys: [1, 2],
    samples: 5,
    seed: 0,
    date: "2026-01-01T00:00:00.000Z",
    checkpoints: [run("prefix", 0, 10, 4), run("prefix", 1, 8, 6), run("same-step", 0, 9, 1)],
  };
}

Deno.test("summariseVariants() averages over seeds; the paper's figures go to the prefix Falcon row", () => {
  const [prefix, same] = summariseVariants(report());
  assertEquals([prefix.mixer, prefix.alignment, prefix.seeds], ["falcon1a", "prefix", [0, 1]]);
  assertAlmostEquals(prefix.inDistribution.mean, 0.9, 1e-15);
  assertAlmostEquals(prefix.inDistribution.sd, Math.sqrt(0.02), 1e-15);
  assertAlmostEquals(prefix.extrapolation.mean, 0.5, 1e-15);
  assertAlmostEquals(prefix.atMax.mean, 0.5, 1e-15);
  assertAlmostEquals(prefix.extrapolationExact.mean, 0.1, 1e-15);
  assertEquals(prefix.paper, { extrapolation: 0.859, atMax: 0.69 });
  assertEquals([same.seeds, same.extrapolation.n, same.paper], [[0], 1, {}]);
  assertAlmostEquals(same.extrapolation.mean, 0.1, 1e-15);
});

Deno.test("meanReport() has one line per variant with the seed means, ready to plot", () => {
  const r = report();
  const mean = meanReport(r, summariseVariants(r));
  assertEquals(mean.checkpoints.map((c) => c.label), [
    "falcon1a prefix (2 seeds)",
    "falcon1a same-step (1 seed)",
  ]);
  assertAlmostEquals(mean.checkpoints[0].groups[1].digitAccuracy, 0.5, 1e-15);
  assertEquals(mean.checkpoints[0].groups[1].sequences, 10);
  assertAlmostEquals(mean.checkpoints[0].extrapolation!.digitAccuracy, 0.5, 1e-15);
});

Deno.test("summariseVariants() keeps two Transformer variants apart by the names the experiment gives", () => {
  const run = (path: string, seed: number, right: number) =>
    accuracyResult(
      { path, mixer: "transformer", alignment: "same-step", seed, trainLength: 1 },
      `transformer s${seed}`,
      new Map([[1, { tokens: 10, correctTokens: right, sequences: 5, exactSequences: 1 }]]),
    );
  const r: EvalReport = {
    ...report(),
    keys: [1],
    checkpoints: [run("a/0", 0, 10), run("a/1", 1, 8), run("b/0", 0, 3)],
  };
  const names = new Map([["a/0", "transformer"], ["a/1", "transformer"], ["b/0", "transformer-plain"]]);
  const [conv, plain] = summariseVariants(r, names);
  assertEquals([conv.variant, conv.mixer, conv.alignment, conv.seeds], ["transformer", "transformer", "-", [
    0,
    1,
  ]]);
  assertEquals([plain.variant, plain.seeds], ["transformer-plain", [0]]);
  assertAlmostEquals(conv.inDistribution.mean, 0.9, 1e-15);
  assertAlmostEquals(plain.inDistribution.mean, 0.3, 1e-15);
  assertEquals(meanReport(r, [conv, plain]).checkpoints.map((c) => c.label), [
    "transformer (2 seeds)",
    "transformer-plain (1 seed)",
  ]);
  // without names every Transformer checkpoint is one variant, named by its mixer
  const [all] = summariseVariants(r);
  assertEquals([all.variant, all.seeds.length], ["transformer", 3]);
});
