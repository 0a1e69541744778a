/**
 * One run of the addition experiment: train one variant with one seed, then evaluate its checkpoint
 * on the plan's seeded test sets. The driver (`run.ts`) calls it in process (`--jobs 1`) or in child
 * processes (`run_one.ts`, `--jobs N`); both write the same `result.json` into the run directory,
 * which a later driver call reuses instead of training again (so an interrupted experiment resumes).
 *
 * @module
 */

import { type BackendChoice, releaseBackend, selectBackend } from "../../backend_select.ts";
import { loadEvalCheckpoint } from "../../src/eval/load.ts";
import { type EvalReport, jsonWithNulls } from "../../src/eval/report.ts";
import { atomicWriteFile } from "../../src/checkpoint/atomic_write.ts";
import { evaluateCheckpoints } from "../../src/eval/run.ts";
import { modelConfig } from "../../src/model/config.ts";
import { additionConfig, additionVocabulary } from "../../src/tasks/mod.ts";
import { trainConfig } from "../../src/train/config.ts";
import { train } from "../../src/train/trainer.ts";
import type { RunRecord } from "./markdown.ts";
import { type Plan, runName, type Variant } from "./plan.ts";

/** What one run produced: its training record and its one-column evaluation report. */
export interface RunResult {
  /** What identifies the run's setup; a stored result is reused only when it matches exactly. */
  readonly fingerprint: string;
  /** Backend the run trained and evaluated on. */
  readonly backend: string;
  /** The training record. */
  readonly record: RunRecord;
  /** The evaluation of the run's checkpoint. */
  readonly report: EvalReport;
}

/** Where a run's result is stored. */
export function resultPath(runsDir: string, variant: Variant, seed: number): string {
  return `${runsDir}/${runName(variant, seed)}/result.json`;
}

/**
 * The setup of one run as a string: plan fields that change its result, the variant and the seed.
 * The addition format options appear only when the plan sets any, so results stored before they
 * existed (default format) keep their fingerprints.
 */
export function runFingerprint(plan: Plan, variant: Variant, seed: number): string {
  const { model, train, maxDigits, lengths, samples, evalSeed } = plan;
  const task = Object.values(plan.task).some((v) => v !== undefined) ? { task: plan.task } : {};
  return JSON.stringify({ model, train, maxDigits, ...task, lengths, samples, evalSeed, variant, seed });
}

/** The stored result of a run when it exists and matches the setup; null otherwise. */
export async function storedResult(
  runsDir: string,
  plan: Plan,
  variant: Variant,
  seed: number,
): Promise<RunResult | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(resultPath(runsDir, variant, seed));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  const result = JSON.parse(text) as RunResult;
  return result.fingerprint === runFingerprint(plan, variant, seed) ? result : null;
}

/** Options of {@linkcode trainAndEvaluate}. */
export interface OneRunOptions {
  /** Backend choice. */
  readonly backend: BackendChoice;
  /** WASM worker threads (default: all cores). */
  readonly threads?: number;
  /** Where the run directory goes. */
  readonly runsDir: string;
  /** Progress lines. */
  readonly log: (line: string) => void;
}

/** Train one variant with one seed, evaluate it, store and return the result. */
export async function trainAndEvaluate(
  plan: Plan,
  variant: Variant,
  seed: number,
  options: OneRunOptions,
): Promise<RunResult> {
  const { log } = options;
  const name = runName(variant, seed);
  const task = additionConfig({ ...plan.task, maxDigits: plan.maxDigits });
  const model = modelConfig({
    ...plan.model,
    ...variant.model,
    vocabSize: additionVocabulary(task).size,
    mixer: variant.mixer,
    alignment: variant.alignment,
  });
  const tc = trainConfig({ ...plan.train, seed });
  const backend = await selectBackend(options.backend, { threads: options.threads, onNote: log });
  let trained;
  try {
    trained = await train({
      backend,
      model,
      task,
      train: tc,
      runDir: `${options.runsDir}/${name}`,
      onProgress: (p) => {
        if (p.event === "step" && p.step % Math.max(1, Math.floor(p.totalSteps / 10)) === 0) {
          log(
            `${name}: step ${p.step}/${p.totalSteps} loss ${p.loss.toFixed(4)} (${
              p.elapsedSeconds.toFixed(0)
            } s)`,
          );
        }
      },
    });
  } finally {
    releaseBackend(backend);
  }
  log(
    `${name}: trained in ${trained.elapsedSeconds.toFixed(0)} s; evaluating lengths ${plan.lengths[0]}..${
      plan.lengths.at(-1)
    }`,
  );
  // a fresh backend for evaluation: the trained model's buffers went with the training one
  const evalBackend = await selectBackend(options.backend, { threads: options.threads });
  let report: EvalReport;
  try {
    const checkpoint = await loadEvalCheckpoint(trained.checkpointPath, evalBackend);
    report = await evaluateCheckpoints([checkpoint], {
      task: "addition",
      keys: plan.lengths,
      samples: plan.samples,
      seed: plan.evalSeed,
      batchSize: 32,
    });
  } finally {
    releaseBackend(evalBackend);
  }
  const result: RunResult = {
    fingerprint: runFingerprint(plan, variant, seed),
    backend: backend.name,
    record: {
      name,
      mixer: variant.mixer,
      alignment: variant.alignment,
      seed,
      steps: trained.step,
      finalLoss: trained.losses[trained.losses.length - 1] ?? NaN,
      wallSeconds: trained.elapsedSeconds,
      parameterCount: trained.parameterCount,
    },
    report,
  };
  await atomicWriteFile(
    resultPath(options.runsDir, variant, seed),
    new TextEncoder().encode(jsonWithNulls(result)),
  );
  return result;
}
