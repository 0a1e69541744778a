/**
 * `falcon train`: train a model on a task and write checkpoints and a metrics log to a run
 * directory. Parses options, installs the Ctrl-C / SIGTERM handler, shows progress and prints a
 * summary; the work is `openRunDirectory` (lock, stale files, fresh-run rules), `planRun` and
 * `train` in `src/train/`.
 *
 * @module
 */

import { Command, Option } from "@commander-js/extra-typings";
import { BACKEND_CHOICES, selectBackend } from "../../backend_select.ts";
import { MIXERS } from "../../src/model/config.ts";
import type { MixerName } from "../../src/model/types.ts";
import { ALIGNMENTS, QK_NORMS } from "../../src/rules/config.ts";
import type { AdditionCurriculum } from "../../src/tasks/addition.ts";
import { TASKS } from "../../src/tasks/types.ts";
import { TRAINING_EVAL_SAMPLES, trainingEvaluation } from "../../src/eval/periodic.ts";
import { additionInDistribution } from "../../src/eval/in_distribution.ts";
import { planRun } from "../../src/train/plan.ts";
import {
  OVERRIDE_NAMES,
  type OverrideName,
  parseConfigFile,
  parseOverride,
  type RunOverrides,
} from "../../src/train/overrides.ts";
import { openRunDirectory } from "../../src/train/run_dir.ts";
import type { TrainSetup } from "../../src/train/trainer.ts";
import { PRESETS } from "../../src/train/presets.ts";
import {
  CHECKPOINT_FILE,
  METRICS_FILE,
  RunWriteError,
  train,
  TrainingDivergedError,
  type TrainResult,
} from "../../src/train/trainer.ts";
import { parseThreads, threadsOption } from "../threads_option.ts";
import { UsageError } from "../errors.ts";
import { trainProgress } from "../progress.ts";

/** Exit code of a run stopped by Ctrl-C (after its checkpoint was saved). */
export const EXIT_INTERRUPTED = 130;

/** Exit code of a run stopped by SIGTERM (after its checkpoint was saved): 128 + 15, as a shell reports it. */
export const EXIT_TERMINATED = 143;

/** Exit code of a run stopped because a checkpoint or metrics line could not be written (disk full). */
export const EXIT_WRITE_FAILED = 2;

/** The help text and the value a placeholder of each override flag takes. */
const OVERRIDE_HELP: Record<OverrideName, [string, string]> = {
  "lr": ["<x>", "peak learning rate"],
  "batch-size": ["<n>", "rows per batch B"],
  "seq-len": ["<n>", "positions per row T"],
  "warmup": ["<steps>", "linear warmup steps"],
  "weight-decay": ["<x>", "AdamW weight decay"],
  "clip": ["<x>", "clip the gradient norm to x (0: off)"],
  "checkpoint-every": [
    "<n>",
    "checkpoint every n steps (0: only at the end and on interrupt; may change on --resume)",
  ],
  "d-model": ["<n>", "model width (the MLP width keeps the preset's ratio)"],
  "layers": ["<n>", "blocks"],
  "heads": ["<n>", "heads per mixer (must divide --d-model)"],
  "chunk-size": [
    "<n>",
    "chunk length of the chunked fast-weight form (speed only: on the H200 falcon2 is fastest at 32, falcon3 at 16)",
  ],
};

function camel(name: string): string {
  return name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The overrides of a run: the `--config` file's, then the flags' (a flag wins). */
async function runOverrides(
  options: Record<string, unknown>,
): Promise<{ overrides: RunOverrides; steps?: number }> {
  let overrides: RunOverrides = {};
  let steps: number | undefined;
  const file = options.config;
  if (typeof file === "string") {
    let text: string;
    try {
      text = await Deno.readTextFile(file);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) throw new UsageError(`--config ${file} does not exist`);
      if (err instanceof Deno.errors.IsADirectory) throw new UsageError(`--config ${file} is a directory`);
      throw err;
    }
    ({ overrides, steps } = parseConfigFile(text, file));
  }
  for (const name of OVERRIDE_NAMES) {
    const raw = options[camel(name)];
    if (raw !== undefined) overrides = { ...overrides, [name]: parseOverride(name, raw, `--${name}`) };
  }
  return { overrides, steps };
}

/** The effective configuration of a run, one line: what it trains with, where each override came from. */
export function formatEffectiveConfig(setup: TrainSetup): string {
  const m = setup.model;
  const t = setup.train;
  const run = setup.runConfig;
  const overrides = Object.entries((run?.overrides ?? {}) as Record<string, number>)
    .map(([k, v]) => `--${k} ${v}`);
  const preset = run ? `preset ${run.preset}` : "preset unknown (a checkpoint from before run_config)";
  return `config: ${preset}${overrides.length ? ` with ${overrides.join(" ")}` : ""}; ` +
    `model dModel ${m.dModel}, layers ${m.layers}, heads ${m.heads}, ffnHidden ${m.ffnHidden}, chunkSize ${m.chunkSize}; ` +
    `training steps ${t.steps}, batchSize ${t.batchSize}, seqLen ${t.seqLen}, lr ${t.lr}, warmup ${t.warmupSteps}, ` +
    `weightDecay ${t.weightDecay}, clip ${t.clipNorm}, checkpointEvery ${t.checkpointEvery}, seed ${t.seed}`;
}

function integer(flag: string, value: string, min: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) {
    throw new UsageError(`${flag} must be an integer >= ${min}, got "${value}"`);
  }
  return n;
}

async function readCorpus(path: string): Promise<{ bytes: Uint8Array; name: string }> {
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw new UsageError(`--corpus ${path} does not exist`);
    if (err instanceof Deno.errors.IsADirectory) throw new UsageError(`--corpus ${path} is a directory`);
    throw err;
  }
  if (bytes.length === 0) throw new UsageError(`--corpus ${path} is empty`);
  return { bytes, name: path };
}

/** `--curriculum start:fraction`, e.g. `8:0.1`. */
function curriculum(value: string): AdditionCurriculum {
  const m = /^(\d+):([^:]+)$/.exec(value);
  const startDigits = m ? Number(m[1]) : NaN;
  const fraction = m ? Number(m[2]) : NaN;
  if (!Number.isSafeInteger(startDigits) || startDigits < 1 || !(fraction > 0 && fraction <= 1)) {
    throw new UsageError(
      `--curriculum must be start:fraction, start an integer >= 1 and fraction in (0, 1] (e.g. 8:0.1), got "${value}"`,
    );
  }
  return { startDigits, fraction };
}

function mean(xs: number[]): number {
  return xs.reduce((s, x) => s + x, 0) / Math.max(xs.length, 1);
}

/** Build the `train` subcommand. */
export function trainCommand() {
  const command = new Command("train")
    .description("train a model on a task; checkpoints and metrics.jsonl go to the run directory (--out)")
    .addOption(new Option("--task <task>", "task").choices(TASKS).default("addition" as const))
    .addOption(
      new Option("--rule <mixer>", "sequence mixer: a fast-weight rule or transformer").choices(
        MIXERS as MixerName[],
      )
        .default("falcon1" as MixerName),
    )
    .addOption(
      new Option("--alignment <alignment>", "pair alignment").choices(ALIGNMENTS).default("prefix" as const),
    )
    .option(
      "--no-short-conv",
      "no causal short convolution on q, k, v (with --qk-norm none and --rule transformer: the plain Transformer)",
    )
    .addOption(
      new Option(
        "--qk-norm <norm>",
        "q/k normalisation per head (default: rms; l2 for deltanet and gated_deltanet; transformer: rms or none)",
      ).choices(QK_NORMS),
    )
    .addOption(
      new Option("--backend <name>", "compute backend").choices(BACKEND_CHOICES).default("auto" as const),
    )
    .addOption(threadsOption())
    .addOption(
      new Option("--preset <name>", "model size and hyperparameters").choices(PRESETS).default(
        "tiny" as const,
      ),
    )
    .option(
      "--steps <n>",
      "optimizer steps in total (default: the preset's: tiny 600, lab 1000, addition 20000; on --resume at least the checkpoint's step)",
    )
    .option(
      "--out <dir>",
      "run directory (default: runs/<task>-<rule>-<alignment>-s<seed>); a fresh run needs it empty or missing",
    )
    .option(
      "--resume",
      "continue from the checkpoint in --out (same configs; --steps may extend the run)",
      false,
    )
    .option(
      "--force",
      "start clean in a non-empty --out: remove its checkpoint.safetensors and metrics.jsonl first",
      false,
    )
    .option(
      "--config <file>",
      'preset overrides as JSON, keys named like the flags: {"lr": 0.003, "d-model": 64, "steps": 2000}; flags win',
    )
    .option("--seed <n>", "run seed (initialisation and data)", "0")
    .option("--corpus <file>", "text task: the training text (default: the built-in corpus)")
    .addOption(
      new Option("--operand-order <order>", "addition: operand digit order (default msd, as usually written)")
        .choices(["msd", "lsd"] as const),
    )
    .addOption(
      new Option("--answer-order <order>", "addition: answer digit order (default lsd)").choices(
        ["lsd", "msd"] as const,
      ),
    )
    .option(
      "--max-digits <n>",
      "addition: the largest training operand length L in digits (default: the preset's)",
    )
    .option("--bos", "addition: a beginning-of-sequence token before every example")
    .option(
      "--index-hints <n>",
      "addition: n hint ids; before every digit a hint naming its place, at a random offset in training " +
        "and 0 in evaluation (n >= --max-digits + 1; default 0 = off)",
    )
    .option("--equal-length", "addition: both training operands of the same length")
    .option(
      "--curriculum <start:fraction>",
      "addition: the largest training operand length rises from start digits to --max-digits over " +
        "the first fraction of the steps (e.g. 8:0.1; default off)",
    )
    .option(
      "--eval-every <n>",
      `every N steps, score ${TRAINING_EVAL_SAMPLES} fixed test sums at the training length (teacher-forced digit ` +
        "accuracy, exact match, accuracy per place; mqar: recall; text: bits per byte) and log them to metrics.jsonl",
    );
  for (const name of OVERRIDE_NAMES) {
    const [placeholder, help] = OVERRIDE_HELP[name];
    command.option(`--${name} ${placeholder}`, `${help} (overrides the preset)`);
  }
  return command
    .action(async (o, command) => {
      const seed = integer("--seed", o.seed, 0);
      const addition = {
        maxDigits: o.maxDigits === undefined ? undefined : integer("--max-digits", o.maxDigits, 1),
        operandOrder: o.operandOrder,
        format: o.answerOrder,
        bos: o.bos,
        indexHints: o.indexHints === undefined ? undefined : integer("--index-hints", o.indexHints, 0),
        equalLength: o.equalLength,
        curriculum: o.curriculum === undefined ? undefined : curriculum(o.curriculum),
      };
      const evalEvery = o.evalEvery === undefined ? undefined : integer("--eval-every", o.evalEvery, 1);
      const fromFile = await runOverrides(command.opts() as Record<string, unknown>);
      const steps = o.steps === undefined ? fromFile.steps : integer("--steps", o.steps, 1);
      // options the user typed (not defaults): with --resume they must match the checkpoint
      const keyOf = {
        task: "task",
        rule: "mixer",
        alignment: "alignment",
        shortConv: "shortConv",
        qkNorm: "qkNorm",
        seed: "seed",
        preset: "preset",
      } as const;
      const explicit = new Set<string>();
      for (const [flag, key] of Object.entries(keyOf)) {
        if (command.getOptionValueSource(flag) === "cli") explicit.add(key);
      }
      const corpus = o.corpus === undefined ? undefined : await readCorpus(o.corpus);
      const outDir = o.out ?? `runs/${o.task}-${o.rule}-${o.alignment}-s${seed}`;
      const threads = parseThreads(o.threads);
      // the run directory before any work: a bad --out, a second run or a stale leftover shows at once
      const runDir = await openRunDirectory(outDir, { resume: o.resume, force: o.force });
      try {
        await trainInDirectory();
      } finally {
        await runDir.release();
      }

      async function trainInDirectory(): Promise<void> {
        const backend = await selectBackend(o.backend, { threads, onNote: (note) => console.error(note) })
          .catch(
            (err) => {
              throw new UsageError(`--backend ${o.backend}: ${err.message}`);
            },
          );
        const setup = await planRun({
          task: o.task,
          mixer: o.rule,
          alignment: o.alignment,
          shortConv: explicit.has("shortConv") ? o.shortConv : undefined,
          qkNorm: o.qkNorm,
          preset: o.preset,
          steps,
          seed,
          outDir,
          resume: o.resume,
          corpus,
          explicit,
          addition,
          backend,
          overrides: fromFile.overrides,
        });
        if (runDir.staleLock) {
          const s = runDir.staleLock;
          console.error(
            `note: replaced a stale lock of a run that is gone (pid ${s.pid} on host ${s.host}, started ${s.started})`,
          );
        }
        for (const name of runDir.removedTemporaryFiles) {
          console.error(`note: removed ${outDir}/${name}, left by a run killed while writing a checkpoint`);
        }
        if (runDir.removedRunFiles.length > 0) {
          console.error(`--force: removed ${runDir.removedRunFiles.map((n) => `${outDir}/${n}`).join(", ")}`);
        }
        const resumed = setup.resumeFrom ? ` (resuming at step ${setup.resumeFrom.step})` : "";
        const evaluate = evalEvery === undefined ? undefined : {
          every: evalEvery,
          run: trainingEvaluation(setup.task, { seed: setup.train.seed, corpus: setup.corpus }),
        };
        console.error(
          `train ${setup.task.task} with ${setup.model.mixer} (${setup.model.alignment}, short conv ${
            setup.model.shortConv ? "on" : "off"
          }, qkNorm ${setup.model.qkNorm}) on ${backend.name}, ` +
            `${setup.train.steps} steps, B=${setup.train.batchSize} T=${setup.train.seqLen}, out ${outDir}${resumed}` +
            (evalEvery === undefined ? "" : `, eval every ${evalEvery} steps`),
        );
        console.error(formatEffectiveConfig(setup));
        const controller = new AbortController();
        let stopSignal: "SIGINT" | "SIGTERM" | undefined;
        const onSignal = (signal: "SIGINT" | "SIGTERM") => () => {
          if (controller.signal.aborted) Deno.exit(signal === "SIGTERM" ? EXIT_TERMINATED : EXIT_INTERRUPTED);
          stopSignal = signal;
          console.error(
            `\n${
              signal === "SIGINT" ? "interrupt" : "SIGTERM"
            }: finishing the step and saving a checkpoint (${signal} again to quit at once)`,
          );
          controller.abort();
        };
        const listeners = (["SIGINT", "SIGTERM"] as const).map((signal) => ({
          signal,
          handler: onSignal(signal),
        }));
        for (const { signal, handler } of listeners) {
          try {
            Deno.addSignalListener(signal, handler);
          } catch {
            // a platform without this signal (SIGTERM on Windows)
          }
        }
        const bar = trainProgress({ terminal: Deno.stderr.isTerminal() });
        let result: TrainResult;
        try {
          result = await train({ ...setup, signal: controller.signal, onProgress: bar.update, evaluate });
        } catch (err) {
          if (!(err instanceof TrainingDivergedError || err instanceof RunWriteError)) throw err;
          bar.done();
          if (err instanceof RunWriteError) {
            console.error(`falcon: ${err.message}`);
            Deno.exitCode = EXIT_WRITE_FAILED;
          } else {
            console.error(`falcon: ${err.message} (${outDir}/${CHECKPOINT_FILE})`);
            Deno.exitCode = 1;
          }
          return;
        } finally {
          bar.done();
          for (const { signal, handler } of listeners) {
            try {
              Deno.removeSignalListener(signal, handler);
            } catch {
              // never added
            }
          }
        }
        // the summary covers the whole run, before a resume too (from the metrics log)
        const losses = result.runLosses;
        const k = Math.min(10, Math.max(1, Math.floor(losses.length / 4)));
        const first = mean(losses.slice(0, k));
        const last = mean(losses.slice(-k));
        console.log(`${result.status} at step ${result.step}/${setup.train.steps}`);
        if (losses.length > 0) {
          const span = result.runFirstStep === 1 ? "" : `, steps ${result.runFirstStep}-${result.step}`;
          console.log(
            `loss ${first.toFixed(4)} -> ${last.toFixed(4)} (mean of first/last ${k} steps${span}, fell by x${
              (first / last).toFixed(2)
            })`,
          );
        }
        console.log(
          `parameters ${result.parameterCount}, peak memory ${
            (result.peakRssBytes / 2 ** 20).toFixed(0)
          } MiB`,
        );
        const total = setup.resumeFrom ? ` (${result.totalElapsedSeconds.toFixed(1)} s in total)` : "";
        console.log(
          `${Math.round(result.tokensPerSecond)} tokens/s, ${result.elapsedSeconds.toFixed(1)} s${total}`,
        );
        if (result.status === "completed" && setup.task.task === "addition") {
          // the avg 1-L row of `falcon eval` on its default test sets: the two commands agree
          const acc = await additionInDistribution(result.model, setup.task);
          console.log(
            `in-distribution (1-${setup.task.maxDigits} digits, ${acc.sums} examples): digit accuracy ` +
              `${(100 * acc.average.digitAccuracy).toFixed(1)}%, exact match ${
                (100 * acc.average.exactMatch).toFixed(1)
              }% (the avg 1-${setup.task.maxDigits} row of falcon eval: ${acc.samples} sums per length, seed ${acc.seed})`,
          );
        }
        console.log(`checkpoint ${result.checkpointPath}`);
        console.log(`metrics ${outDir}/${METRICS_FILE}`);
        if (result.status === "interrupted") {
          console.log(`resume with: falcon train --out ${outDir} --resume`);
          Deno.exitCode = stopSignal === "SIGTERM" ? EXIT_TERMINATED : EXIT_INTERRUPTED;
        }
      }
    });
}
