/**
 * The PyTorch bridge end to end (interop/torch/prepare_run.ts, train_ddp.py, falcon_torch.py):
 *
 * - the Python rule list and fla split agree with `RULES`;
 * - PyTorch training (one process, float64) reproduces `falcon train` on the reference backend:
 *   the same losses and gradient norms step by step and the same weights and stream state after;
 * - 2 processes (torchrun, gloo, DDP) on half the rows each equal 1 process on the whole batch;
 * - the round trip native -> hf -> one PyTorch step -> hf -> native -> `falcon eval`.
 *
 * Needs python3 with torch (skip rule: `src/testing/torch_python.ts`). The runs are the `tiny` preset's model
 * (2 layers x 32) for 3 steps, one thread per process.
 */

import { deepStrictEqual, ok, rejects } from "node:assert/strict";
import { InputError } from "../../src/errors.ts";
import { runCli } from "../../cli/_run_in_process.ts";
import { loadCheckpoint } from "../../src/checkpoint/checkpoint.ts";
import { RULES } from "../../src/rules/mod.ts";
import { catalogTable, type StreamKind } from "../../src/rules/catalog.ts";
import { maxAbsDiff } from "../../src/testing/compare.ts";
import { runPython, torchTest } from "../../src/testing/torch_python.ts";
import { prepareRun } from "./prepare_run.ts";

const HERE = new URL(".", import.meta.url).pathname;
const TRAIN = `${HERE}train_ddp.py`;
/** float64 on both sides: the two trainers differ only in the order of sums. */
const LOSS_TOLERANCE = 1e-10;
const WEIGHT_TOLERANCE = 1e-10;

interface StepLine {
  step: number;
  loss: number;
  gradNorm: number;
  lr: number;
}

async function readMetrics(path: string): Promise<StepLine[]> {
  const text = await Deno.readTextFile(path);
  return text.trim().split("\n").map((l) => JSON.parse(l) as StepLine).filter((l) => "loss" in l);
}

function relative(a: number, b: number): number {
  return Math.abs(a - b) / Math.max(Math.abs(b), 1e-300);
}

/** Largest |a - b| over every parameter of two native checkpoints (same names required). */
async function weightDifference(a: string, b: string): Promise<{ value: number; name: string }> {
  const [x, y] = await Promise.all([loadCheckpoint(a), loadCheckpoint(b)]);
  deepStrictEqual(Object.keys(x.params).sort(), Object.keys(y.params).sort());
  let worst = { value: 0, name: "" };
  for (const name of Object.keys(x.params)) {
    const d = maxAbsDiff(x.params[name].data, y.params[name].data).value;
    if (d > worst.value) worst = { value: d, name };
  }
  return worst;
}

async function cli(args: string[]): Promise<string> {
  const run = await runCli(args);
  ok(run.code === 0, `falcon ${args.join(" ")} exited ${run.code}: ${run.err}`);
  return run.out;
}

torchTest(
  "interop/torch's rule list equals RULES, and every rule has an fla op or the chunked form",
  async (python) => {
    const script =
      `import sys, json; sys.path.insert(0, ${JSON.stringify(HERE)}); import falcon_torch, falcon_fla; ` +
      `print(json.dumps({"rules": list(falcon_torch.RULES), "fla": list(falcon_fla.FLA_OPS)}))`;
    const got = JSON.parse(await runPython(python, ["-c", script])) as { rules: string[]; fla: string[] };
    deepStrictEqual(got.rules, [...RULES]);
    ok(
      got.fla.every((r) => (RULES as readonly string[]).includes(r)),
      `fla rules ${got.fla} not all in RULES`,
    );
  },
);

torchTest(
  "interop/torch's per-rule predicates and coefficient streams agree with the rule catalog, rule by rule",
  async (python) => {
    const script =
      `import sys, json; sys.path.insert(0, ${JSON.stringify(HERE)}); import falcon_torch as f; ` +
      `print(json.dumps({r: {"falcon": f.is_falcon_rule(r), "window": f.is_window_rule(r), ` +
      `"perColumn": f.is_per_column_rule(r), "streams": f.coefficient_plan(r, 2.5)} for r in f.RULES}))`;
    const got = JSON.parse(await runPython(python, ["-c", script])) as Record<
      string,
      { falcon: boolean; window: boolean; perColumn: boolean; streams: [unknown, unknown] }
    >;
    // the catalog's stream kinds as the bridge writes them: (activation, scale, per column) or none
    const stream = (kind: StreamKind, perColumn: boolean) =>
      ({
        "step-gate": ["sigmoid", 2.5, perColumn],
        "unit-gate": ["sigmoid", 1, false],
        dt: ["softplus", 1, false],
        ridge: ["softplus", 1, false],
        none: null,
      })[kind];
    for (const { rule, statistic, window, coefficients, betaStream, lambdaStream } of catalogTable()) {
      const perColumn = coefficients === "per-column";
      deepStrictEqual(
        got[rule],
        {
          falcon: statistic !== "none",
          window,
          perColumn,
          streams: [stream(betaStream, perColumn), stream(lambdaStream, false)],
        },
        `interop/torch disagrees with src/rules/catalog.ts on ${rule}`,
      );
    }
  },
);

torchTest(
  "train_ddp.py (1 process, float64) reproduces falcon train on the reference backend step by step, " +
    "and 2 gloo processes (torchrun) equal 1",
  async (python) => {
    const root = await Deno.makeTempDir({ prefix: "falcon_bridge_" });
    try {
      const steps = ["--preset", "tiny", "--rule", "falcon3a", "--steps", "3", "--seed", "4"];
      await prepareRun(["--out", `${root}/torch`, "--dtype", "f64", ...steps]);
      await runPython(python, [
        TRAIN,
        `${root}/torch`,
        "--dtype",
        "float64",
        "--threads",
        "1",
        "--form",
        "chunked",
      ]);
      await cli(["train", ...steps, "--backend", "ref", "--out", `${root}/falcon`]);
      const [mine, theirs] = await Promise.all([
        readMetrics(`${root}/torch/metrics.jsonl`),
        readMetrics(`${root}/falcon/metrics.jsonl`),
      ]);
      ok(mine.length === 3 && theirs.length === 3, `${mine.length} and ${theirs.length} step lines`);
      for (const [i, m] of mine.entries()) {
        const t = theirs[i];
        ok(m.step === t.step && m.lr === t.lr, `step ${m.step}: lr ${m.lr} vs ${t.lr}`);
        ok(relative(m.loss, t.loss) < LOSS_TOLERANCE, `step ${m.step}: loss ${m.loss} vs falcon ${t.loss}`);
        ok(
          relative(m.gradNorm, t.gradNorm) < LOSS_TOLERANCE,
          `step ${m.step}: gradient norm ${m.gradNorm} vs falcon ${t.gradNorm}`,
        );
      }
      await cli(["convert", `${root}/torch/hf`, `${root}/torch.safetensors`, "--to", "native"]);
      const d = await weightDifference(`${root}/torch.safetensors`, `${root}/falcon/checkpoint.safetensors`);
      ok(d.value < WEIGHT_TOLERANCE, `weights after 3 steps differ by ${d.value} (${d.name})`);
      const [a, b] = await Promise.all([
        loadCheckpoint(`${root}/torch.safetensors`),
        loadCheckpoint(`${root}/falcon/checkpoint.safetensors`),
      ]);
      deepStrictEqual([a.step, a.rngState, a.train], [b.step, b.rngState, b.train]);

      // 2 processes x 8 rows == 1 process x 16 rows. torchrun of torch 1.13 on Python 3.11 cannot parse
      // its default --redirects/--tee (0 is no IntFlag member there): 1 and 1 work everywhere.
      await runPython(python, [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "--redirects",
        "1",
        "--tee",
        "1",
        "--monitor_interval",
        "0.1",
        TRAIN,
        `${root}/torch`,
        "--out",
        `${root}/torch/hf2`,
        "--metrics",
        `${root}/torch/metrics2.jsonl`,
        "--dtype",
        "float64",
        "--threads",
        "1",
      ]);
      const two = await readMetrics(`${root}/torch/metrics2.jsonl`);
      ok(two.length === 3, `${two.length} step lines from the 2-process run`);
      for (const [i, m] of two.entries()) {
        ok(
          relative(m.loss, mine[i].loss) < 1e-12,
          `2 processes, step ${m.step}: loss ${m.loss} vs ${mine[i].loss}`,
        );
        ok(
          relative(m.gradNorm, mine[i].gradNorm) < 1e-12,
          `2 processes, step ${m.step}: gradient norm ${m.gradNorm} vs ${mine[i].gradNorm}`,
        );
      }
      await cli(["convert", `${root}/torch/hf2`, `${root}/torch2.safetensors`, "--to", "native"]);
      const d2 = await weightDifference(`${root}/torch2.safetensors`, `${root}/torch.safetensors`);
      ok(d2.value < 1e-12, `2 processes vs 1: weights differ by ${d2.value} (${d2.name})`);
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
);

torchTest("round trip: native -> hf -> one PyTorch step -> hf -> native -> falcon eval", async (python) => {
  const root = await Deno.makeTempDir({ prefix: "falcon_round_trip_" });
  try {
    const run = ["--preset", "tiny", "--rule", "falcon1", "--seed", "2", "--backend", "ref"];
    await cli(["train", ...run, "--steps", "2", "--out", `${root}/run`]);
    await Deno.copyFile(`${root}/run/checkpoint.safetensors`, `${root}/step2.safetensors`);
    // falcon's own step 3 from the same checkpoint: its loss depends only on the weights and the batch
    await cli(["train", ...run, "--steps", "3", "--out", `${root}/run`, "--resume"]);
    const falconStep3 = (await readMetrics(`${root}/run/metrics.jsonl`)).find((l) => l.step === 3)!;

    await Deno.mkdir(`${root}/pt`);
    await cli(["convert", `${root}/step2.safetensors`, `${root}/pt/init`, "--to", "hf"]);
    await prepareRun(["--out", `${root}/pt`, "--from", `${root}/step2.safetensors`, "--steps", "3"]);
    await runPython(python, [TRAIN, `${root}/pt`, "--dtype", "float64", "--threads", "1"]);
    const [step3] = await readMetrics(`${root}/pt/metrics.jsonl`);
    ok(step3.step === 3, `the PyTorch run's first step is ${step3.step}`);
    ok(
      relative(step3.loss, falconStep3.loss) < LOSS_TOLERANCE,
      `loss ${step3.loss} vs falcon ${falconStep3.loss}`,
    );

    await cli(["convert", `${root}/pt/hf`, `${root}/step3.safetensors`, "--to", "native"]);
    const [before, after, falcon] = await Promise.all([
      loadCheckpoint(`${root}/step2.safetensors`),
      loadCheckpoint(`${root}/step3.safetensors`),
      loadCheckpoint(`${root}/run/checkpoint.safetensors`),
    ]);
    ok(
      after.step === 3 && after.rngState === falcon.rngState,
      `step ${after.step}, stream ${after.rngState}`,
    );
    deepStrictEqual([after.model, after.task], [before.model, before.task]);
    const moved = maxAbsDiff(after.params["embed"].data, before.params["embed"].data).value;
    ok(moved > 1e-6, `the PyTorch step moved the embedding by ${moved}`);

    await cli([
      "eval",
      `${root}/step3.safetensors`,
      "--lengths",
      "1-2",
      "--samples",
      "8",
      "--backend",
      "ref",
      "--json",
      `${root}/eval.json`,
    ]);
    const report = JSON.parse(await Deno.readTextFile(`${root}/eval.json`)) as {
      checkpoints: { mixer: string; groups: { key: number; sequences: number; digitAccuracy: number }[] }[];
    };
    const [evaluated] = report.checkpoints;
    ok(evaluated.mixer === "falcon1", `evaluated mixer ${evaluated.mixer}`);
    deepStrictEqual(evaluated.groups.map((g) => [g.key, g.sequences]), [[1, 8], [2, 8]]);
    ok(
      evaluated.groups.every((g) => g.digitAccuracy >= 0 && g.digitAccuracy <= 1),
      `digit accuracies ${evaluated.groups.map((g) => g.digitAccuracy)}`,
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("prepare_run.ts refuses bad flags with an InputError naming the flag and the value", async () => {
  const root = await Deno.makeTempDir({ prefix: "falcon_prepare_" });
  try {
    const cases: [string[], RegExp][] = [
      [["--preset", "tiny"], /--out DIR is required/],
      [["--out", `${root}/a`, "--rule", "bogus"], /unknown mixer "bogus"/],
      [["--out", `${root}/b`, "--dtype", "f16"], /--dtype must be f32 or f64, got "f16"/],
      [["--out", `${root}/c`, "--steps", "0"], /--steps must be an integer >= 1, got "0"/],
      [["--out", `${root}/d`, "--curriculum", "8"], /--curriculum must be start:fraction .* got "8"/],
      [["--out", `${root}/e`, "--task", "mqar", "--bos"], /--bos applies to the addition task only/],
    ];
    for (const [args, message] of cases) {
      await rejects(
        () => prepareRun(args),
        (err: Error) => err instanceof InputError && message.test(err.message),
      );
    }
    await prepareRun(["--out", `${root}/run`, "--preset", "tiny", "--steps", "2"]);
    await rejects(
      () => prepareRun(["--out", `${root}/run`, "--preset", "tiny", "--steps", "2"]),
      /run\/init exists; choose another --out/,
    );
    await rejects(
      () => prepareRun(["--out", `${root}/more`, "--from", `${root}/run/init.safetensors`, "--steps", "0"]),
      /--steps must be an integer >= 1/,
    );
    // the header of the fresh run: steps 1..2, the stream state after each
    const header = JSON.parse(
      new TextDecoder().decode((await Deno.readFile(`${root}/run/batches.bin`)).subarray(0, 2000)).split(
        "\n",
      )[0],
    );
    ok(
      header.firstStep === 1 && header.batches === 2 && header.rngStates.length === 2,
      JSON.stringify(header),
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
