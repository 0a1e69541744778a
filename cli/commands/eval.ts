/**
 * `falcon eval`: score checkpoints side by side on the same seeded test sets (addition length
 * extrapolation, mqar recall by number of pairs, text bits per byte) and write a table, JSON, CSV
 * and a plot. Addition also reports accuracy per place value (places at or beyond each
 * checkpoint's training length are the extrapolation) and the no-extrapolation reference. The work is done by `evaluateCheckpoints` in `src/eval/run.ts`.
 *
 * @module
 */

import { Command, Option } from "@commander-js/extra-typings";
import { BACKEND_CHOICES, selectBackend } from "../../backend_select.ts";
import type { EvalProgress } from "../../src/eval/evaluate.ts";
import { parseLengths } from "../../src/eval/lengths.ts";
import { type EvalCheckpoint, loadEvalCheckpoint } from "../../src/eval/load.ts";
import { EVAL_TASKS, type EvalReport, type EvalTask, reportJson } from "../../src/eval/report.ts";
import { reportCsv } from "../../src/eval/csv.ts";
import { evaluateCheckpoints, heldOutRange } from "../../src/eval/run.ts";
import { formatTable } from "../../src/eval/table.ts";
import { EVAL_DEFAULTS } from "../../src/eval/in_distribution.ts";
import type { MqarConfig, TextConfig } from "../../src/tasks/mod.ts";
import { UsageError } from "../errors.ts";
import { checkOutputFile, refuseSharedPaths } from "../../src/output_path.ts";
import { parseThreads, threadsOption } from "../threads_option.ts";
import { gpuMatmulOption } from "../gpu_matmul_option.ts";

/** Default operand lengths of the addition evaluation (SPEC section 8: train on 32, evaluate 1..48). */
export const DEFAULT_ADDITION_LENGTHS = "1-48";

function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${flag} must be an integer >= 1, got "${value}"`);
  }
  return n;
}

function nonNegativeInt(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) {
    throw new UsageError(`${flag} must be an integer >= 0, got "${value}"`);
  }
  return n;
}

/** A one-line progress bar on stderr, drawn only when stderr is a terminal. */
export function progressBar(
  label: string,
  write: (text: string) => void = (t) => Deno.stderr.writeSync(new TextEncoder().encode(t)),
): { update(p: EvalProgress): void; done(): void } {
  let last = "";
  return {
    update(p) {
      const width = 30;
      const filled = Math.round((width * p.done) / Math.max(1, p.total));
      const line = `\r${label} [${"#".repeat(filled)}${
        ".".repeat(width - filled)
      }] ${p.done}/${p.total} (${p.key})`;
      if (line !== last) write(line);
      last = line;
    },
    done() {
      if (last) write(`\r${" ".repeat(last.length)}\r`);
    },
  };
}

async function writeOutput(path: string, data: string | Uint8Array): Promise<void> {
  try {
    if (typeof data === "string") await Deno.writeTextFile(path, data);
    else await Deno.writeFile(path, data);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new UsageError(`cannot write ${path}: its directory does not exist`);
    }
    throw err;
  }
}

/** Render the report's plot to `path` (`.svg`, or `.png` through resvg). */
export async function writePlot(report: EvalReport, path: string, metric: "digit" | "exact"): Promise<void> {
  // vega, vega-lite and resvg load only when a plot is asked for
  const { plotSvg } = await import("../../src/eval/plot.ts");
  const svg = await plotSvg(report, metric === "digit" ? "digitAccuracy" : "exactMatch");
  if (path.toLowerCase().endsWith(".svg")) return await writeOutput(path, svg);
  const { svgToPng } = await import("../../src/eval/png.ts");
  await writeOutput(path, await svgToPng(svg));
}

function defaultLengths(task: EvalTask, first: EvalCheckpoint): string {
  if (task === "mqar") {
    const c = first.task as MqarConfig;
    return `1-${Math.min(c.keys, 2 * c.pairs)}`;
  }
  return DEFAULT_ADDITION_LENGTHS;
}

/** Build the `eval` subcommand. */
export function evalCommand() {
  return new Command("eval")
    .description(
      "score checkpoints side by side on the same seeded test sets: teacher-forced accuracy per operand length " +
        "(addition) or number of pairs (mqar), or bits per byte (text)",
    )
    .argument(
      "<checkpoints...>",
      "falcon checkpoints to compare (.safetensors files or hf export directories)",
    )
    .addOption(
      new Option("--task <task>", "task to evaluate (default: the first checkpoint's)").choices(EVAL_TASKS),
    )
    .option(
      "--lengths <list>",
      `operand lengths or pair counts: N, A-B, comma lists (addition default ${DEFAULT_ADDITION_LENGTHS})`,
    )
    .option(
      "--samples <n>",
      "test sequences per length (text: at most this many windows)",
      String(EVAL_DEFAULTS.samples),
    )
    .option("--seed <n>", "seed of the test sets", String(EVAL_DEFAULTS.seed))
    .option("--batch-size <n>", "rows per batch", String(EVAL_DEFAULTS.batchSize))
    .option(
      "--hint-offset <n>",
      "addition with index hints: the hint id of answer place 0 (the operands stay the same; only the hints move)",
      "0",
    )
    .option("--text <file>", "held-out text file (text task)")
    .option(
      "--label <name>",
      "a name for each checkpoint's column, once per checkpoint in their order (default: rule, alignment, seed)",
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option("--json <file>", "write the report as JSON")
    .option("--csv <file>", "write the report as CSV")
    .option(
      "--plot <file>",
      "write accuracy against length as .svg or .png (addition: a second panel, accuracy per place value)",
    )
    .addOption(
      new Option("--plot-metric <metric>", "rate to plot").choices(["digit", "exact"] as const).default(
        "digit",
      ),
    )
    .addOption(new Option("--backend <name>", "compute backend").choices(BACKEND_CHOICES).default("auto"))
    .addOption(threadsOption())
    .addOption(gpuMatmulOption())
    .action(async (paths, o) => {
      const samples = positiveInt("--samples", o.samples);
      const seed = nonNegativeInt("--seed", o.seed);
      const batchSize = positiveInt("--batch-size", o.batchSize);
      const hintOffset = nonNegativeInt("--hint-offset", o.hintOffset);
      if (o.plot && !/\.(svg|png)$/i.test(o.plot)) {
        throw new UsageError(`--plot ${o.plot}: the file name must end in .svg or .png`);
      }
      if (o.label.length > 0 && o.label.length !== paths.length) {
        throw new UsageError(
          `--label: give one per checkpoint, in their order: ${paths.length} checkpoint(s), ${o.label.length} label(s)`,
        );
      }
      // every output path before any work: a bad one fails now, not after the evaluation
      const outputs = [
        { what: "--json", path: o.json },
        { what: "--csv", path: o.csv },
        { what: "--plot", path: o.plot },
      ].filter((x): x is { what: string; path: string } => typeof x.path === "string");
      await refuseSharedPaths(outputs, [
        ...paths.map((path) => ({ what: "checkpoint", path })),
        ...(o.text ? [{ what: "--text", path: o.text }] : []),
      ]);
      for (const { what, path } of outputs) await checkOutputFile(what, path);
      const threads = parseThreads(o.threads);
      const backend = await selectBackend(o.backend, {
        threads,
        gpuMatmul: o.gpuMatmul,
        onNote: (note) => console.error(note),
      });
      // loading and evaluation throw InputError (a UsageError's base: exit 2) for bad files and mismatches
      const checkpoints: EvalCheckpoint[] = [];
      for (const [i, path] of paths.entries()) {
        const loaded = await loadEvalCheckpoint(path, backend);
        checkpoints.push(
          o.label[i] === undefined ? loaded : { ...loaded, meta: { ...loaded.meta, label: o.label[i] } },
        );
      }
      const task = o.task ?? (checkpoints[0].task.task as EvalTask);
      const other = checkpoints.find((c) => c.task.task !== task);
      if (other) {
        throw new UsageError(`${other.meta.path} was trained on the ${other.task.task} task, not ${task}`);
      }
      if (task === "text" && o.lengths) throw new UsageError("--lengths does not apply to the text task");
      if (task === "text" && o.plot) {
        throw new UsageError("--plot: the text task has one number per checkpoint");
      }
      if (task !== "text" && o.text) {
        throw new UsageError(`--text applies to the text task only, not ${task}`);
      }
      let keys: number[] = [];
      let text: { bytes: Uint8Array; name: string } | undefined;
      try {
        if (task !== "text") keys = parseLengths(o.lengths ?? defaultLengths(task, checkpoints[0]));
      } catch (err) {
        if (err instanceof RangeError) throw new UsageError(`--lengths ${o.lengths}: ${err.message}`);
        throw err;
      }
      if (task === "text") {
        if (!o.text) throw new UsageError("the text task needs a held-out file: --text FILE");
        try {
          text = { bytes: await Deno.readFile(o.text), name: o.text };
        } catch (err) {
          if (err instanceof Deno.errors.NotFound) throw new UsageError(`--text ${o.text} does not exist`);
          throw err;
        }
        if (checkpoints[0].task.task === "text") {
          console.error(`text: scoring ${heldOutRange(checkpoints[0].task as TextConfig, text.bytes).what}`);
        }
      }
      const bar = Deno.stderr.isTerminal() ? progressBar(`eval ${task}`) : null;
      let report: EvalReport;
      try {
        report = await evaluateCheckpoints(
          checkpoints,
          { task, keys, samples, seed, batchSize, hintOffset, text },
          bar?.update,
        );
      } finally {
        bar?.done();
      }
      console.log(formatTable(report).trimEnd());
      if (o.json) await writeOutput(o.json, reportJson(report));
      if (o.csv) await writeOutput(o.csv, reportCsv(report));
      if (o.plot) await writePlot(report, o.plot, o.plotMetric);
    });
}
