/**
 * The training loop: packed batches from a seeded stream, AdamW with warmup + cosine schedule and
 * gradient-norm clipping, checkpoints every N steps, at the end and on abort, a JSONL metrics log,
 * and a hard stop on a non-finite loss or gradient. It prints nothing: progress goes to a callback.
 *
 * Determinism: the model is initialised from `deriveSeed(seed, "init")` and the data stream from
 * `deriveSeed(seed, "train")`; a checkpoint stores parameters and moments in the backend's dtype
 * plus the stream state, so resuming from step k reproduces, bit for bit, the losses of an
 * uninterrupted run on the same backend.
 *
 * Run directory layout: `checkpoint.safetensors` (latest checkpoint, replaced atomically) and
 * `metrics.jsonl` (one line per step, appended across resumes; a resume first drops the lines of
 * steps after its checkpoint, which it redoes). With `evaluate`, every N-th step also gets a line
 * `{ "step": s, "eval": {...} }` right after its step line (dropped on resume like the others).
 * A step line's `elapsed` counts the run's training time from its first step, over every resume
 * (the checkpoint stores it as `elapsedSeconds`).
 *
 * A checkpoint or metrics line that cannot be written (a full disk, a file system gone read-only)
 * stops the run with a {@linkcode RunWriteError} naming the file, the step and the last good
 * checkpoint, which is kept (checkpoints are replaced atomically).
 *
 * @module
 */

import { type CheckpointState, saveCheckpoint } from "../checkpoint/checkpoint.ts";
import { createModel as createFalconModel } from "../model/falcon_lm.ts";
import { describeFsError } from "../output_path.ts";
import { batchWeight, type LanguageModel, type ModelConfig } from "../model/types.ts";
import type { Backend, Tensor } from "../rules/backend.ts";
import { createTask, normalizeTaskConfig, type TaskConfig } from "../tasks/mod.ts";
import { packBatch } from "../tasks/packing.ts";
import { DataRng, deriveSeed } from "../tasks/rng.ts";
import type { Task } from "../tasks/types.ts";
import { type TrainConfig, validateTrainConfig } from "./config.ts";
import { MetricsLog } from "./metrics_log.ts";
import { readTensors, writeTensors } from "./model_state.ts";
import { learningRate } from "./schedule.ts";
import { createTrainStep, type PendingStep } from "./train_step.ts";

/** File name of the latest checkpoint inside a run directory. */
export const CHECKPOINT_FILE = "checkpoint.safetensors";
/** File name of the metrics log inside a run directory. */
export const METRICS_FILE = "metrics.jsonl";

/** Builds a model (the default is `createModel` of `src/model/falcon_lm.ts`). */
export type ModelFactory = (backend: Backend, config: ModelConfig, seed: number) => LanguageModel;

/** Progress of a run, reported after every step, every checkpoint and every periodic evaluation. */
export interface TrainProgress {
  /** `step` after an optimizer step, `checkpoint` after a save, `eval` after a periodic evaluation. */
  readonly event: "step" | "checkpoint" | "eval";
  /** Steps done so far (1-based step just finished). */
  readonly step: number;
  /** Total steps of the run. */
  readonly totalSteps: number;
  /** Mean loss of the last step (nats per supervised token). */
  readonly loss: number;
  /** Learning rate of the last step. */
  readonly lr: number;
  /** Gradient norm of the last step, before clipping. */
  readonly gradNorm: number;
  /** Input tokens (B*T) per second in this process. */
  readonly tokensPerSecond: number;
  /** Seconds since training started in this process. */
  readonly elapsedSeconds: number;
  /** Estimated seconds left. */
  readonly etaSeconds: number;
  /** Checkpoint path (`checkpoint` events). */
  readonly checkpointPath?: string;
  /** What the evaluation measured (`eval` events; the record logged to metrics.jsonl). */
  readonly evaluation?: Readonly<Record<string, number>>;
}

/** Everything a run needs. */
export interface TrainSetup {
  /** Backend every op runs on. */
  readonly backend: Backend;
  /** Architecture (`vocabSize` must equal the task's). */
  readonly model: ModelConfig;
  /** Task. */
  readonly task: TaskConfig;
  /** Hyperparameters. */
  readonly train: TrainConfig;
  /** Run directory (created when missing). */
  readonly runDir: string;
  /** Corpus bytes of the text task. */
  readonly corpus?: Uint8Array;
  /** Continue from this checkpoint (its model and task configs must equal the ones above). */
  readonly resumeFrom?: CheckpointState;
  /** Abort: finish the current step, save a checkpoint, return `interrupted`. */
  readonly signal?: AbortSignal;
  /** Called after every step and checkpoint. */
  readonly onProgress?: (progress: TrainProgress) => void;
  /** How the run was configured (preset and overrides), stored in the checkpoint as `run_config`. */
  readonly runConfig?: Record<string, unknown>;
  /** Model constructor (tests inject small models). */
  readonly createModel?: ModelFactory;
  /**
   * Step strategy (`train_step.ts`): `device` keeps clipping and the divergence guard on the device and
   * settles steps asynchronously, `host` reads the loss and norm back every step; default `device` on a
   * queued backend (WebGPU) when the model can record a step, else `host`.
   */
  readonly stepStrategy?: "host" | "device";
  /**
   * Periodic evaluation: after every `every`-th step's metrics line, `run(model, step)` is awaited
   * and its result logged as `{ "step": s, "eval": {...} }`. It may read the model (logits) but must
   * not train it or draw from the training stream, so the losses do not depend on it.
   */
  readonly evaluate?: {
    readonly every: number;
    readonly run: (model: LanguageModel, step: number) => Promise<Record<string, number>>;
  };
}

/** Outcome of {@linkcode train}. */
export interface TrainResult {
  /** `completed` (all steps done) or `interrupted` (aborted; a checkpoint was saved). */
  readonly status: "completed" | "interrupted";
  /** Steps done in total (including those before a resume). */
  readonly step: number;
  /** Mean loss of every step run in this call, in order. */
  readonly losses: number[];
  /** 1-based step number of `losses[0]`. */
  readonly firstStep: number;
  /** Number of trainable scalars. */
  readonly parameterCount: number;
  /** Peak resident set size seen during the run (`Deno.memoryUsage().rss`), bytes. */
  readonly peakRssBytes: number;
  /** Input tokens per second in this call. */
  readonly tokensPerSecond: number;
  /** Seconds spent in this call. */
  readonly elapsedSeconds: number;
  /** Seconds of training of the whole run (before a resume too). */
  readonly totalElapsedSeconds: number;
  /**
   * Mean loss of every step of the run from step 1 that is known (before a resume: from the
   * metrics log), in order; `runLosses[i]` is step `runFirstStep + i`.
   */
  readonly runLosses: number[];
  /** 1-based step number of `runLosses[0]`. */
  readonly runFirstStep: number;
  /** Path of the checkpoint written last. */
  readonly checkpointPath: string;
  /** The trained model (for evaluation). */
  readonly model: LanguageModel;
  /** The task. */
  readonly taskInstance: Task;
}

/** A non-finite loss or gradient: training stopped before updating the parameters of `step`. */
export class TrainingDivergedError extends Error {
  /** Always `TrainingDivergedError`. */
  override name = "TrainingDivergedError";
  /** The 1-based step whose loss or gradient was not finite. */
  readonly step: number;
  /** Create the error for `step`, describing what was not finite. */
  constructor(step: number, what: string) {
    super(`training diverged at step ${step}: ${what}; the last good checkpoint is kept`);
    this.step = step;
  }
}

/**
 * A checkpoint or metrics line could not be written: the message names the file, the step, why
 * (e.g. `no space left on device (ENOSPC)`) and the last good checkpoint, which is kept.
 */
export class RunWriteError extends Error {
  /** Always `RunWriteError`. */
  override name = "RunWriteError";
  /** The file that could not be written. */
  readonly path: string;
  /** Step of the last checkpoint written (or resumed from), or null when there is none. */
  readonly lastGoodStep: number | null;

  /** `path` could not be written at `step`; `lastGoodStep` is the step of the checkpoint kept. */
  constructor(
    path: string,
    step: number,
    lastGoodStep: number | null,
    checkpointPath: string,
    cause: unknown,
  ) {
    super(
      `cannot write ${path} at step ${step}: ${describeFsError(cause)}; ` +
        (lastGoodStep === null
          ? "no checkpoint was written yet"
          : `the last good checkpoint (step ${lastGoodStep}) is kept: ${checkpointPath}`),
      { cause },
    );
    this.path = path;
    this.lastGoodStep = lastGoodStep;
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Check a setup before any work: sizes fit, the model matches the task, a resume checkpoint
 * matches the configs. Throws a RangeError naming the problem.
 */
export function validateSetup(setup: TrainSetup, task: Task): void {
  validateTrainConfig(setup.train);
  const every = setup.evaluate?.every;
  if (every !== undefined && !(Number.isInteger(every) && every >= 1)) {
    throw new RangeError(`evaluate.every must be an integer >= 1, got ${every}`);
  }
  if (setup.task.task === "text" && !setup.corpus) {
    throw new RangeError("the text task needs its corpus bytes");
  }
  if (setup.model.vocabSize !== task.vocabSize) {
    throw new RangeError(
      `model vocabSize ${setup.model.vocabSize} does not match task ${setup.task.task} (${task.vocabSize})`,
    );
  }
  if (setup.train.seqLen < task.maxExampleLength) {
    throw new RangeError(
      `seqLen ${setup.train.seqLen} is shorter than the longest ${setup.task.task} example (${task.maxExampleLength} tokens)`,
    );
  }
  const r = setup.resumeFrom;
  if (r) {
    if (r.task.task !== setup.task.task) {
      throw new RangeError(`the checkpoint is from task "${r.task.task}", not "${setup.task.task}"`);
    }
    // normalised: a configuration saved before a field existed equals one with its default
    if (!sameJson(normalizeTaskConfig(r.task), normalizeTaskConfig(setup.task))) {
      throw new RangeError(
        `the checkpoint's task config ${JSON.stringify(r.task)} differs from ${JSON.stringify(setup.task)}`,
      );
    }
    if (!sameJson(r.model, setup.model)) {
      throw new RangeError(
        `the checkpoint's model config ${JSON.stringify(r.model)} differs from ${
          JSON.stringify(setup.model)
        }`,
      );
    }
  }
}

function namedMap<T extends { name: string }>(
  items: readonly T[],
  pick: (t: T) => Tensor,
): Map<string, Tensor> {
  return new Map(items.map((p) => [p.name, pick(p)]));
}

/** Train (or resume) a model; see the module doc for determinism and the run directory. */
export async function train(setup: TrainSetup): Promise<TrainResult> {
  const { backend, train: tc } = setup;
  const task = createTask(setup.task, setup.corpus);
  validateSetup(setup, task);
  await Deno.mkdir(setup.runDir, { recursive: true });
  const checkpointPath = `${setup.runDir}/${CHECKPOINT_FILE}`;
  const metricsPath = `${setup.runDir}/${METRICS_FILE}`;
  const log = new MetricsLog(metricsPath);

  const model = (setup.createModel ?? createFalconModel)(backend, setup.model, deriveSeed(tc.seed, "init"));
  const params = model.parameters();
  const stepper = createTrainStep(backend, model, tc, { strategy: setup.stepStrategy });
  const optimizer = stepper.optimizer;
  const paramMap = namedMap(params, (p) => p.value);
  let step = 0;
  let rng = new DataRng(deriveSeed(tc.seed, "train"));
  const r = setup.resumeFrom;
  if (r) {
    writeTensors(backend, paramMap, r.params, "checkpoint");
    writeTensors(backend, optimizer.m, r.adamM, "checkpoint optimizer.m");
    writeTensors(backend, optimizer.v, r.adamV, "checkpoint optimizer.v");
    step = r.step;
    rng = new DataRng(r.rngState);
  }
  let savedStep: number | null = r ? r.step : null;
  const written = async (path: string, write: () => Promise<void>, at: number) => {
    try {
      await write();
    } catch (err) {
      if (err instanceof Deno.errors.NotCapable) throw err;
      if (err instanceof Error && typeof (err as { code?: unknown }).code === "string") {
        throw new RunWriteError(path, at, savedStep, checkpointPath, err);
      }
      throw err;
    }
  };
  // what the run did before this call: its losses and its training time
  let priorLosses: number[] = [];
  let priorElapsed = 0;
  if (r) {
    // steps logged after the checkpoint are about to be redone
    await written(metricsPath, () => log.truncateAfter(r.step), r.step);
    const lines = (await log.stepLines()).filter((l) => l.step <= r.step);
    // the losses of steps 1..r.step when the log holds each once, in order (else none)
    if (lines.length === r.step && lines.every((l, i) => l.step === i + 1)) {
      priorLosses = lines.map((l) => l.loss);
    }
    priorElapsed = r.elapsedSeconds ?? lines.at(-1)?.elapsed ?? 0;
  }

  const save = async () => {
    // all reads issued before any is awaited (one GPU round trip, not one per tensor)
    const [paramData, adamM, adamV] = await Promise.all([
      readTensors(backend, paramMap),
      readTensors(backend, optimizer.m),
      readTensors(backend, optimizer.v),
    ]);
    const state: CheckpointState = {
      step,
      rngState: rng.state,
      model: setup.model,
      task: setup.task,
      train: { ...tc },
      params: paramData,
      adamM,
      adamV,
      elapsedSeconds: priorElapsed + elapsed(),
      ...(setup.runConfig === undefined ? {} : { runConfig: setup.runConfig }),
    };
    await written(checkpointPath, () => saveCheckpoint(checkpointPath, state), step);
    savedStep = step;
  };

  const parameterCount = params.reduce((n, p) => n + p.value.size, 0);
  const firstStep = step + 1;
  const losses: number[] = [];
  const t0 = performance.now();
  let peakRssBytes = Deno.memoryUsage().rss;
  let tokensSeen = 0;
  const elapsed = () => (performance.now() - t0) / 1000;
  const result = (status: TrainResult["status"]): TrainResult => ({
    status,
    step,
    losses,
    firstStep,
    parameterCount,
    peakRssBytes,
    tokensPerSecond: tokensSeen / Math.max(elapsed(), 1e-9),
    elapsedSeconds: elapsed(),
    totalElapsedSeconds: priorElapsed + elapsed(),
    runLosses: priorLosses.length === firstStep - 1 ? [...priorLosses, ...losses] : [...losses],
    runFirstStep: priorLosses.length === firstStep - 1 ? 1 : firstStep,
    checkpointPath,
    model,
    taskInstance: task,
  });
  let last = { loss: NaN, lr: 0, gradNorm: NaN };
  const progress = (event: TrainProgress["event"], evaluation?: Record<string, number>) => {
    const secs = elapsed();
    const done = step - firstStep + 1;
    setup.onProgress?.({
      event,
      step,
      totalSteps: tc.steps,
      ...last,
      tokensPerSecond: tokensSeen / Math.max(secs, 1e-9),
      elapsedSeconds: secs,
      etaSeconds: done > 0 ? (secs / done) * (tc.steps - step) : NaN,
      checkpointPath: event === "checkpoint" ? checkpointPath : undefined,
      ...(evaluation === undefined ? {} : { evaluation }),
    });
  };

  // steps recorded but not yet settled (the device step runs up to `stepper.lag` steps ahead)
  const inFlight: { pending: PendingStep; lr: number; weight: number; tokens: number }[] = [];
  let recorded = step;
  const settleOldest = async () => {
    const { pending, lr, weight, tokens } = inFlight.shift()!;
    const { loss: meanLoss, gradNorm, halted } = await pending.outcome();
    if (!Number.isFinite(meanLoss)) throw new TrainingDivergedError(pending.step, `loss is ${meanLoss}`);
    if (!Number.isFinite(gradNorm)) {
      throw new TrainingDivergedError(pending.step, `gradient norm is ${gradNorm}`);
    }
    if (halted) {
      throw new TrainingDivergedError(pending.step, "the device found a non-finite loss or gradient sum");
    }
    step = pending.step;
    tokensSeen += tokens;
    losses.push(meanLoss);
    last = { loss: meanLoss, lr, gradNorm };
    peakRssBytes = Math.max(peakRssBytes, Deno.memoryUsage().rss);
    const line = { step, loss: meanLoss, lr, gradNorm, tokens: weight, elapsed: priorElapsed + elapsed() };
    await written(metricsPath, () => log.append(line), step);
    progress("step");
  };
  // every recorded step settled: the parameters on the backend are those after `step`
  const settleAll = async () => {
    while (inFlight.length > 0) await settleOldest();
  };

  while (recorded < tc.steps) {
    if (setup.signal?.aborted) {
      await settleAll();
      await save();
      progress("checkpoint");
      return result("interrupted");
    }
    const next = recorded + 1;
    // the host assembles this batch while the device still runs the steps in flight
    const batch = packBatch(
      () => task.sample(rng, "train", { step: next, steps: tc.steps }),
      tc.batchSize,
      tc.seqLen,
      task.padId,
    );
    const weight = batchWeight(batch);
    if (!(weight > 0)) throw new RangeError(`step ${next}: the batch has no supervised tokens`);
    const lr = learningRate(next, tc);
    inFlight.push({ pending: stepper.run(batch, next, lr), lr, weight, tokens: batch.B * batch.T });
    recorded = next;
    while (inFlight.length > stepper.lag) await settleOldest();
    if (setup.evaluate && next % setup.evaluate.every === 0) {
      await settleAll(); // the model evaluated is the one after step `next`, not a later one
      const record = { step: next, eval: await setup.evaluate.run(model, next) };
      await written(metricsPath, () => log.append(record), next);
      progress("eval", record.eval);
    }
    if (tc.checkpointEvery > 0 && next % tc.checkpointEvery === 0 && next < tc.steps) {
      await settleAll();
      await save();
      progress("checkpoint");
    }
  }
  await settleAll();
  await save();
  progress("checkpoint");
  return result("completed");
}
