/**
 * `falcon train`: train a model on a task and write checkpoints and a metrics log to a run
 * directory. Parses options, installs the Ctrl-C handler, shows progress and prints a summary; the
 * work is `planRun` and `train` in `src/train/`.
 *
 * @module
 */

import { Command, Option } from "@commander-js/extra-typings";
import { BACKEND_CHOICES, selectBackend } from "../../backend_select.ts";
import { MIXERS } from "../../src/model/config.ts";
import type { MixerName } from "../../src/model/types.ts";
import { ALIGNMENTS, QK_NORMS } from "../../src/rules/config.ts";
import {
  ADDITION_EOS_ID,
  ADDITION_PAD_ID,
  type AdditionConfig,
  type AdditionCurriculum,
  additionTestSet,
} from "../../src/tasks/addition.ts";
import { TASKS } from "../../src/tasks/types.ts";
import { TRAINING_EVAL_SAMPLES, trainingEvaluation } from "../../src/eval/periodic.ts";
import { teacherForcedAccuracy } from "../../src/train/accuracy.ts";
import { planRun } from "../../src/train/plan.ts";
import { PRESETS } from "../../src/train/presets.ts";
import {
  CHECKPOINT_FILE,
  METRICS_FILE,
  train,
  TrainingDivergedError,
  type TrainResult,
} from "../../src/train/trainer.ts";
import { parseThreads, threadsOption } from "../threads_option.ts";
import { UsageError } from "../errors.ts";
import { trainProgress } from "../progress.ts";

/** Exit code of a run stopped by Ctrl-C (after its checkpoint was saved). */
export const EXIT_INTERRUPTED = 130;

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

/** In-distribution teacher-forced digit accuracy of an addition run (lengths 1..L, ~200 examples). */
async function additionAccuracy(result: TrainResult, config: AdditionConfig, seed: number) {
  const maxDigits = config.maxDigits;
  const perLength = Math.max(4, Math.ceil(200 / maxDigits));
  const examples = Array.from(
    { length: maxDigits },
    (_, i) => additionTestSet(i + 1, perLength, seed, config),
  ).flat();
  return await teacherForcedAccuracy(result.model, examples, {
    eosId: ADDITION_EOS_ID,
    padId: ADDITION_PAD_ID,
  });
}

function mean(xs: number[]): number {
  return xs.reduce((s, x) => s + x, 0) / Math.max(xs.length, 1);
}

/** Build the `train` subcommand. */
export function trainCommand() {
  return new Command("train")
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
    .option("--steps <n>", "optimizer steps (default: the preset's: tiny 600, lab 1000, addition 20000)")
    .option("--out <dir>", "run directory (default: runs/<task>-<rule>-<alignment>-s<seed>)")
    .option(
      "--resume",
      "continue from the checkpoint in --out (same configs; --steps may extend the run)",
      false,
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
    .option("--bos", "addition: a beginning-of-sequence token before every example")
    .option(
      "--index-hints <n>",
      "addition: n hint ids; before every digit a hint naming its place, at a random offset in training " +
        "and 0 in evaluation (n >= the preset's max digits + 1; default 0 = off)",
    )
    .option("--equal-length", "addition: both training operands of the same length")
    .option(
      "--curriculum <start:fraction>",
      "addition: the largest training operand length rises from start digits to the preset's over " +
        "the first fraction of the steps (e.g. 8:0.1; default off)",
    )
    .option(
      "--eval-every <n>",
      `every N steps, score ${TRAINING_EVAL_SAMPLES} fixed test sums at the training length (teacher-forced digit ` +
        "accuracy, exact match, accuracy per place; mqar: recall; text: bits per byte) and log them to metrics.jsonl",
    )
    .action(async (o, command) => {
      const seed = integer("--seed", o.seed, 0);
      const addition = {
        operandOrder: o.operandOrder,
        format: o.answerOrder,
        bos: o.bos,
        indexHints: o.indexHints === undefined ? undefined : integer("--index-hints", o.indexHints, 0),
        equalLength: o.equalLength,
        curriculum: o.curriculum === undefined ? undefined : curriculum(o.curriculum),
      };
      const steps = o.steps === undefined ? undefined : integer("--steps", o.steps, 1);
      const evalEvery = o.evalEvery === undefined ? undefined : integer("--eval-every", o.evalEvery, 1);
      // options the user typed (not defaults): with --resume they must match the checkpoint
      const keyOf = {
        task: "task",
        rule: "mixer",
        alignment: "alignment",
        shortConv: "shortConv",
        qkNorm: "qkNorm",
        seed: "seed",
      } as const;
      const explicit = new Set<string>();
      for (const [flag, key] of Object.entries(keyOf)) {
        if (command.getOptionValueSource(flag) === "cli") explicit.add(key);
      }
      const corpus = o.corpus === undefined ? undefined : await readCorpus(o.corpus);
      const outDir = o.out ?? `runs/${o.task}-${o.rule}-${o.alignment}-s${seed}`;
      const threads = parseThreads(o.threads);
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
      });
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
      const controller = new AbortController();
      const onSigint = () => {
        if (controller.signal.aborted) Deno.exit(EXIT_INTERRUPTED); // a second Ctrl-C: stop now
        console.error(
          "\ninterrupt: finishing the step and saving a checkpoint (Ctrl-C again to quit at once)",
        );
        controller.abort();
      };
      Deno.addSignalListener("SIGINT", onSigint);
      const bar = trainProgress({ terminal: Deno.stderr.isTerminal() });
      let result: TrainResult;
      try {
        result = await train({ ...setup, signal: controller.signal, onProgress: bar.update, evaluate });
      } catch (err) {
        if (!(err instanceof TrainingDivergedError)) throw err;
        bar.done();
        console.error(`falcon: ${err.message} (${outDir}/${CHECKPOINT_FILE})`);
        Deno.exitCode = 1;
        return;
      } finally {
        bar.done();
        Deno.removeSignalListener("SIGINT", onSigint);
      }
      const k = Math.min(10, Math.max(1, Math.floor(result.losses.length / 4)));
      const first = mean(result.losses.slice(0, k));
      const last = mean(result.losses.slice(-k));
      console.log(`${result.status} at step ${result.step}/${setup.train.steps}`);
      if (result.losses.length > 0) {
        console.log(
          `loss ${first.toFixed(4)} -> ${last.toFixed(4)} (mean of first/last ${k} steps, fell by x${
            (first / last).toFixed(2)
          })`,
        );
      }
      console.log(
        `parameters ${result.parameterCount}, peak memory ${(result.peakRssBytes / 2 ** 20).toFixed(0)} MiB`,
      );
      console.log(`${Math.round(result.tokensPerSecond)} tokens/s, ${result.elapsedSeconds.toFixed(1)} s`);
      if (result.status === "completed" && setup.task.task === "addition") {
        const acc = await additionAccuracy(result, setup.task, seed);
        console.log(
          `in-distribution (1-${setup.task.maxDigits} digits, ${acc.examples} examples): digit accuracy ` +
            `${(100 * acc.tokenAccuracy).toFixed(1)}%, exact match ${(100 * acc.exactMatch).toFixed(1)}%`,
        );
      }
      console.log(`checkpoint ${result.checkpointPath}`);
      console.log(`metrics ${outDir}/${METRICS_FILE}`);
      if (result.status === "interrupted") {
        console.log(`resume with: falcon train --out ${outDir} --resume`);
        Deno.exitCode = EXIT_INTERRUPTED;
      }
    });
}
