/**
 * Driver of the addition length-extrapolation experiment (issue 6):
 *
 * ```
 * deno task experiment:addition [--backend auto|ref|wasm|webgpu] [--steps N] [--seeds N] [--samples N]
 *                               [--plan full|lab|smoke] [--smoke] [--runs DIR] [--out DIR]
 *                               [--jobs N|auto] [--no-plot] [--stored-only]
 * deno task experiment:addition --replot docs/results/addition-gpu.json
 * ```
 *
 * Trains every variant of the plan (see `plan.ts`) for every seed with the same size, budget and
 * data, evaluates all checkpoints on the same seeded test sets, and writes to `--out`
 * (default `docs/results`) as `addition-PLAN.*` (`addition-gpu.md`, `addition-full.md`, ...): the page
 * (summary over seeds next to the paper's figures, the command, date, steps and wall time), the JSON
 * (the full evaluation report plus the summaries and run records) and the SVG (seed means by operand
 * length). `docs/results/addition.md` is the hand-written reading of these pages; no plan writes it.
 *
 * Every run trains, then evaluates its own checkpoint, and stores `result.json` in its run
 * directory; a later call with the same plan reuses stored results (an interrupted experiment
 * resumes). `--jobs N` runs N runs at once in child processes (`run_one.ts`), each with
 * `cores / N` WASM threads: on many cores this beats one run on all of them, since small models
 * do not scale over threads. `--jobs auto` picks N from the measurements in `jobs.ts` (8 on a
 * hardware GPU, one run per core on the CPU). `--no-plot` skips the SVG (for machines without the npm plotting
 * packages); `--replot` renders it later from the JSON. `--stored-only` trains nothing: it writes
 * the page from the results already stored (runs trained elsewhere, e.g. by `run_many.sh` on the GPU
 * machine) and names the runs still missing on the page.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { type BackendChoice, backendChoice } from "../../backend_select.ts";
import { jsonWithNulls, mergeReports } from "../../src/eval/report.ts";
import { formatTable } from "../../src/eval/table.ts";
import { probeGpuAdapter } from "../../src/info/gpu_adapter.ts";
import { meanReport, summariseVariants, type VariantSummary } from "./aggregate.ts";
import { autoJobs, type JobsDevice } from "./jobs.ts";
import { type ExperimentInfo, renderMarkdown } from "./markdown.ts";
import { resultPath, type RunResult, storedResult, trainAndEvaluate } from "./one_run.ts";
import { makePlan, type Plan, type PlanName, runName, type Variant, variantName } from "./plan.ts";

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
  /**
   * Runs trained at once, each in its own process (1: in this process, one after another); `auto`
   * picks the number when the runs start (`jobs.ts`: 8 on a hardware GPU, one per core on the CPU).
   */
  readonly jobs: number | "auto";
  /** Render the SVG plot (needs the npm plotting packages; `--no-plot` skips it, `--replot` adds it later). */
  readonly plot: boolean;
  /** Train nothing: summarise only the runs with a stored result and name the missing ones. */
  readonly storedOnly: boolean;
}

function intOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new RangeError(`--${name} must be an integer >= 1, got "${value}"`);
  }
  return Number(value);
}

function jobsOption(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new RangeError(`--jobs must be an integer >= 1 or auto, got "${value}"`);
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
      jobs: { type: "string", default: "1" },
      "no-plot": { type: "boolean", default: false },
      "stored-only": { type: "boolean", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  const backendName = backendChoice(values.backend);
  const plan = makePlan((values.smoke ? "smoke" : values.plan) as PlanName, {
    steps: intOption("steps", values.steps),
    seeds: intOption("seeds", values.seeds),
    samples: intOption("samples", values.samples),
  });
  return {
    backend: backendName,
    plan,
    runsDir: values.runs ?? `runs/addition-${plan.name}`,
    outDir: values.out,
    jobs: values.jobs === "auto" ? "auto" : jobsOption(values.jobs),
    plot: !values["no-plot"],
    storedOnly: values["stored-only"],
  };
}

/** The command line a child process runs for one run (same plan, same overrides). */
export function childArgs(options: DriverOptions, variant: Variant, seed: number, threads: number): string[] {
  const { plan } = options;
  return [
    "run",
    "--allow-read",
    "--allow-write",
    new URL("./run_one.ts", import.meta.url).pathname,
    "--plan",
    plan.name,
    "--steps",
    String(plan.train.steps),
    "--seeds",
    String(plan.seeds.length),
    "--samples",
    String(plan.samples),
    "--variant",
    variantName(variant),
    "--seed",
    String(seed),
    "--runs",
    options.runsDir,
    "--backend",
    options.backend,
    "--threads",
    String(threads),
  ];
}

/** Run one training + evaluation in a child Deno process, forwarding its progress lines. */
async function runInChild(
  options: DriverOptions,
  variant: Variant,
  seed: number,
  threads: number,
  log: (line: string) => void,
): Promise<RunResult> {
  const child = new Deno.Command(Deno.execPath(), {
    args: childArgs(options, variant, seed, threads),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let tail = "";
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of child.stderr) {
    pending += decoder.decode(chunk, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      log(`  ${line}`);
      tail = line;
    }
  }
  const status = await child.status;
  if (!status.success) {
    throw new Error(`run ${runName(variant, seed)} failed (exit ${status.code}): ${pending || tail}`);
  }
  const result = await storedResult(options.runsDir, options.plan, variant, seed);
  if (!result) throw new Error(`run ${runName(variant, seed)} exited without writing its result`);
  return result;
}

/**
 * Map `work` through `fn` with at most `jobs` calls in flight, starting the items in the order of
 * `schedule` (indices; default: in order); results keep the order of `work`.
 */
export async function mapWithJobs<T, R>(
  work: readonly T[],
  jobs: number,
  fn: (item: T, index: number) => Promise<R>,
  schedule: readonly number[] = work.map((_, i) => i),
): Promise<R[]> {
  const results: R[] = new Array(work.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(jobs, work.length) }, async () => {
    while (next < schedule.length) {
      const i = schedule[next++];
      results[i] = await fn(work[i], i);
    }
  });
  await Promise.all(lanes);
  return results;
}

/** Relative training cost per step of a mixer (measured on WASM, 1 thread); unlisted mixers are 1. */
const RELATIVE_COST: Readonly<Record<string, number>> = { falcon3: 1.7, transformer: 1.3, falcon3a: 1.2 };

/** Indices of `work`, most expensive first (so the slowest runs do not start last). */
export function costliestFirst(work: readonly { variant: Variant }[]): number[] {
  const cost = (i: number) => RELATIVE_COST[work[i].variant.mixer] ?? 1;
  return work.map((_, i) => i).sort((a, b) => cost(b) - cost(a) || a - b);
}

/** Write the plot of a results JSON written by {@linkcode runExperiment} next to it; returns its path. */
export async function replot(jsonPath: string): Promise<string> {
  const { plotSvg } = await import("../../src/eval/plot.ts");
  const json = JSON.parse(await Deno.readTextFile(jsonPath));
  const plotPath = jsonPath.replace(/\.json$/, ".svg");
  // results written before summaries named their variant: the mixer was the name
  const summaries = (json.summaries as VariantSummary[]).map((s) => ({
    ...s,
    variant: s.variant ?? s.mixer,
  }));
  await Deno.writeTextFile(plotPath, await plotSvg(meanReport(json.report, summaries)));
  return plotPath;
}

/**
 * `--jobs auto`: the number of runs to train at once for the runs of `work` without a stored result
 * (`jobs.ts`), on a GPU when the backend is `webgpu` or `auto` finds a hardware adapter.
 */
async function pickJobs(
  options: DriverOptions,
  work: readonly { variant: Variant; seed: number }[],
  cores: number,
  log: (line: string) => void,
): Promise<number> {
  let toTrain = 0;
  for (const { variant, seed } of work) {
    if (!(await storedResult(options.runsDir, options.plan, variant, seed))) toTrain++;
  }
  let device: JobsDevice = options.backend === "webgpu" ? "gpu" : "cpu";
  if (options.backend === "auto") {
    const probe = await probeGpuAdapter();
    if (probe.ok && !probe.adapter.isFallbackAdapter) device = "gpu";
  }
  const jobs = autoJobs(device, cores, toTrain);
  log(
    `--jobs auto: ${jobs} at once (${toTrain} runs to train on the ${
      device === "gpu" ? "GPU" : `CPU, ${cores} cores`
    })`,
  );
  return jobs;
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
  const planned = plan.variants.flatMap((variant) => plan.seeds.map((seed) => ({ variant, seed })));
  const missingRuns: string[] = [];
  const work = options.storedOnly ? [] as typeof planned : planned;
  if (options.storedOnly) {
    for (const run of planned) {
      if (await storedResult(options.runsDir, plan, run.variant, run.seed)) work.push(run);
      else missingRuns.push(runName(run.variant, run.seed));
    }
    if (work.length === 0) {
      throw new RangeError(`--stored-only: no stored result of plan ${plan.name} in ${options.runsDir}`);
    }
    if (missingRuns.length > 0) {
      log(`--stored-only: ${missingRuns.length} runs have no result yet: ${missingRuns.join(", ")}`);
    }
  }
  const cores = navigator.hardwareConcurrency ?? 1;
  const jobs = options.jobs === "auto" ? await pickJobs(options, work, cores, log) : options.jobs;
  const threads = jobs > 1 ? Math.max(1, Math.floor(cores / jobs)) : undefined;
  let done = 0;
  let reused = 0;
  const results = await mapWithJobs(work, jobs, async ({ variant, seed }) => {
    const name = runName(variant, seed);
    const stored = await storedResult(options.runsDir, plan, variant, seed);
    if (stored) {
      reused++;
      log(`[${++done}/${work.length}] ${name}: reusing ${resultPath(options.runsDir, variant, seed)}`);
      return stored;
    }
    log(`training ${name}: ${plan.train.steps} steps, then evaluating`);
    const result = jobs > 1
      ? await runInChild(options, variant, seed, threads ?? 1, log)
      : await trainAndEvaluate(plan, variant, seed, {
        backend: options.backend,
        runsDir: options.runsDir,
        log,
      });
    log(`[${++done}/${work.length}] ${name}: done (${result.record.wallSeconds.toFixed(0)} s training)`);
    return result;
  }, costliestFirst(work));
  const report = { ...mergeReports(results.map((r) => r.report)), date: date.toISOString() };
  log(formatTable(report).trimEnd());
  // the checkpoints of named variants (transformer, transformer-plain) are summarised under that name
  const names = new Map<string, string>();
  results.forEach((r, i) => {
    const name = work[i].variant.name;
    if (name) { for (const c of r.report.checkpoints) names.set(c.path, name); }
  });
  const summaries = summariseVariants(report, names);
  const base = `addition-${plan.name}`;
  await Deno.mkdir(options.outDir, { recursive: true });
  const backends = [...new Set(results.map((r) => r.backend))].join(", ");
  const info: ExperimentInfo = {
    command,
    date: date.toISOString(),
    backend: jobs > 1 ? `${backends} (${jobs} processes, ${threads} thread(s) each)` : backends,
    plan,
    wallSeconds: (performance.now() - started) / 1000,
    reusedRuns: reused,
    missingRuns,
    runs: results.map((r) => r.record),
    plotFile: `${base}.svg`,
    jsonFile: `${base}.json`,
  };
  const paths = {
    markdownPath: `${options.outDir}/${base}.md`,
    jsonPath: `${options.outDir}/${base}.json`,
    plotPath: `${options.outDir}/${base}.svg`,
  };
  const json = { info: { ...info, plan: { ...plan } }, summaries, report };
  await Deno.writeTextFile(paths.jsonPath, jsonWithNulls(json, 2));
  await Deno.writeTextFile(paths.markdownPath, renderMarkdown(info, summaries));
  if (options.plot) await replot(paths.jsonPath);
  return paths;
}

if (import.meta.main && Deno.args[0] === "--replot") {
  if (Deno.args.length !== 2) {
    console.error("experiment:addition: --replot takes one results JSON (docs/results/addition-gpu.json)");
    Deno.exit(2);
  }
  console.log(`wrote ${await replot(Deno.args[1])}`);
} else if (import.meta.main) {
  let options: DriverOptions;
  try {
    options = parseDriverArgs(Deno.args);
  } catch (err) {
    console.error(`experiment:addition: ${err instanceof Error ? err.message : err}`);
    Deno.exit(2);
  }
  const command = ["deno task experiment:addition", ...Deno.args].join(" ");
  const paths = await runExperiment(options, command);
  console.log(`wrote ${paths.markdownPath}, ${paths.jsonPath}${options.plot ? `, ${paths.plotPath}` : ""}`);
}
