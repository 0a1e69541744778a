/**
 * Driver of the addition length-extrapolation experiment (issue 6):
 *
 * ```
 * deno task experiment:addition [--backend auto|ref|wasm|webgpu] [--steps N] [--seeds N] [--samples N]
 *                               [--plan full|lab|smoke] [--smoke] [--runs DIR] [--out DIR]
 * ```
 *
 * Trains every variant of the plan (see `plan.ts`) for every seed with the same size, budget and
 * data, evaluates all checkpoints on the same seeded test sets, and writes to `--out`
 * (default `docs/results`): `addition.md` (summary over seeds next to the paper's figures, the
 * command, date, steps and wall time), `addition.json` (the full evaluation report plus the
 * summaries and run records) and `addition.svg` (seed means by operand length). The smoke plan
 * writes `addition-smoke.*` instead, so it never overwrites a real result.
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  BACKEND_CHOICES,
  type BackendChoice,
  releaseBackend,
  selectBackend,
} from "../../src/backend_select.ts";
import { loadEvalCheckpoint } from "../../src/eval/load.ts";
import { plotSvg } from "../../src/eval/plot.ts";
import { evaluateCheckpoints } from "../../src/eval/run.ts";
import { formatTable } from "../../src/eval/table.ts";
import { modelConfig } from "../../src/model/config.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../../src/tasks/mod.ts";
import { trainConfig } from "../../src/train/config.ts";
import { train } from "../../src/train/trainer.ts";
import { meanReport, summariseVariants } from "./aggregate.ts";
import { type ExperimentInfo, renderMarkdown, type RunRecord } from "./markdown.ts";
import { makePlan, type Plan, type PlanName, runName } from "./plan.ts";

/** Parsed command line of the driver. */
export interface DriverOptions {
  /** Backend choice. */
  readonly backend: BackendChoice;
  /** The plan to run. */
  readonly plan: Plan;
  /** Where run directories (checkpoints, metrics logs) go. */
  readonly runsDir: string;
  /** Where the results page, JSON and plot go. */
  readonly outDir: string;
}

function intOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new RangeError(`--${name} must be an integer >= 1, got "${value}"`);
  }
  return Number(value);
}

/** Parse the driver's arguments; throws a RangeError naming a bad option. */
export function parseDriverArgs(args: string[]): DriverOptions {
  const { values } = parseArgs({
    args,
    options: {
      backend: { type: "string", default: "auto" },
      steps: { type: "string" },
      seeds: { type: "string" },
      samples: { type: "string" },
      smoke: { type: "boolean", default: false },
      plan: { type: "string", default: "full" },
      runs: { type: "string" },
      out: { type: "string", default: "docs/results" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (!(BACKEND_CHOICES as readonly string[]).includes(values.backend)) {
    throw new RangeError(`--backend must be one of ${BACKEND_CHOICES.join(", ")}, got "${values.backend}"`);
  }
  const plan = makePlan((values.smoke ? "smoke" : values.plan) as PlanName, {
    steps: intOption("steps", values.steps),
    seeds: intOption("seeds", values.seeds),
    samples: intOption("samples", values.samples),
  });
  return {
    backend: values.backend as BackendChoice,
    plan,
    runsDir: values.runs ?? `runs/addition-${plan.name}`,
    outDir: values.out,
  };
}

/** Train, evaluate and write the results; `log` receives progress lines. */
export async function runExperiment(
  options: DriverOptions,
  command: string,
  log: (line: string) => void = (line) => console.error(line),
): Promise<{ markdownPath: string; jsonPath: string; plotPath: string }> {
  const { plan } = options;
  const started = performance.now();
  const date = new Date();
  const backend = await selectBackend(options.backend, { onNote: log });
  const task = additionConfig({ maxDigits: plan.maxDigits });
  const runs: RunRecord[] = [];
  const checkpointPaths: string[] = [];
  const total = plan.variants.length * plan.seeds.length;
  for (const variant of plan.variants) {
    for (const seed of plan.seeds) {
      const name = runName(variant, seed);
      const model = modelConfig({
        ...plan.model,
        vocabSize: ADDITION_VOCAB_SIZE,
        mixer: variant.mixer,
        alignment: variant.alignment,
      });
      const tc = trainConfig({ ...plan.train, seed });
      log(`[${runs.length + 1}/${total}] training ${name}: ${tc.steps} steps`);
      const result = await train({
        backend,
        model,
        task,
        train: tc,
        runDir: `${options.runsDir}/${name}`,
        onProgress: (p) => {
          if (p.event === "step" && (p.step % Math.max(1, Math.floor(p.totalSteps / 10)) === 0)) {
            log(
              `  step ${p.step}/${p.totalSteps} loss ${p.loss.toFixed(4)} (${p.elapsedSeconds.toFixed(0)} s)`,
            );
          }
        },
      });
      runs.push({
        name,
        mixer: variant.mixer,
        alignment: variant.alignment,
        seed,
        steps: result.step,
        finalLoss: result.losses[result.losses.length - 1] ?? NaN,
        wallSeconds: result.elapsedSeconds,
        parameterCount: result.parameterCount,
      });
      checkpointPaths.push(result.checkpointPath);
    }
  }
  log(
    `evaluating ${checkpointPaths.length} checkpoints on lengths ${plan.lengths[0]}..${plan.lengths.at(-1)}`,
  );
  // a fresh backend for evaluation: the trained models' buffers go with the training one
  releaseBackend(backend);
  const evalBackend = await selectBackend(options.backend, { onNote: log });
  const checkpoints = [];
  for (const path of checkpointPaths) checkpoints.push(await loadEvalCheckpoint(path, evalBackend));
  let lastKey = -1;
  const report = await evaluateCheckpoints(
    checkpoints,
    { task: "addition", keys: plan.lengths, samples: plan.samples, seed: plan.evalSeed, batchSize: 32, date },
    (p) => {
      if (p.key !== lastKey) log(`  length ${p.key} (${p.done}/${p.total})`);
      lastKey = p.key;
    },
  );
  log(formatTable(report).trimEnd());
  const summaries = summariseVariants(report);
  const base = plan.name === "smoke" ? "addition-smoke" : "addition";
  await Deno.mkdir(options.outDir, { recursive: true });
  const info: ExperimentInfo = {
    command,
    date: date.toISOString(),
    backend: backend.name,
    plan,
    wallSeconds: (performance.now() - started) / 1000,
    runs,
    plotFile: `${base}.svg`,
    jsonFile: `${base}.json`,
  };
  const paths = {
    markdownPath: `${options.outDir}/${base}.md`,
    jsonPath: `${options.outDir}/${base}.json`,
    plotPath: `${options.outDir}/${base}.svg`,
  };
  await Deno.writeTextFile(paths.plotPath, await plotSvg(meanReport(report, summaries)));
  const json = { info: { ...info, plan: { ...plan } }, summaries, report };
  await Deno.writeTextFile(
    paths.jsonPath,
    JSON.stringify(json, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v), 2) + "\n",
  );
  await Deno.writeTextFile(paths.markdownPath, renderMarkdown(info, summaries));
  return paths;
}

if (import.meta.main) {
  let options: DriverOptions;
  try {
    options = parseDriverArgs(Deno.args);
  } catch (err) {
    console.error(`experiment:addition: ${err instanceof Error ? err.message : err}`);
    Deno.exit(2);
  }
  const command = ["deno task experiment:addition", ...Deno.args].join(" ");
  const paths = await runExperiment(options, command);
  console.log(`wrote ${paths.markdownPath}, ${paths.jsonPath}, ${paths.plotPath}`);
}
