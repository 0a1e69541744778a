/**
 * Prepares a PyTorch training run (`interop/torch/train_ddp.py`) from the same task and config as
 * `falcon train`: the run plan (`planRun`, so presets, task options and their validation are
 * falcon's own), the batches of every step from the trainer's own data stream, and, for a fresh
 * run, the initial model as an hf export (initialised exactly as `falcon train` initialises it).
 *
 * ```
 * # fresh run: DIR/init.safetensors (native, step 0), DIR/init/ (hf), DIR/batches.bin
 * deno run -A interop/torch/prepare_run.ts --out DIR --preset addition --rule falcon1 [--steps N] [falcon train's task flags]
 * # continue a native checkpoint: DIR/batches.bin for the steps after it (DIR/init: `falcon convert CKPT DIR/init --to hf`)
 * deno run -A interop/torch/prepare_run.ts --out DIR --from CKPT --steps N
 * ```
 *
 * Why batches written here and not generated in Python: one implementation of every task, packing and
 * curriculum (no second copy to drift), the rows PyTorch trains on are bit for bit the rows `falcon
 * train` would use at those steps, and the stream state after them goes back into the checkpoint.
 *
 * Batch file: a first line of JSON `{ "B", "T", "firstStep", "batches", "rngStateAfter", "rngStates",
 * "model", "task", "train" }` (`train.steps` is the run's total; step `firstStep + i` is batch `i`;
 * `rngStates[i]` is the stream state after batch `i`, which a checkpoint after that step stores), then per batch
 * `ids` (int32 `[B*T]`), `targets` (int32 `[B*T]`), `weights` (float32 `[B*T]`), `starts` (uint8
 * `[B*T]`), little-endian, no padding (the layout of `bench/addition_batches.ts`).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { encodeCheckpoint, loadCheckpoint } from "../../src/checkpoint/checkpoint.ts";
import { convertCheckpoint } from "../../src/convert/convert.ts";
import { createModel } from "../../src/model/falcon_lm.ts";
import type { MixerName } from "../../src/model/types.ts";
import { createRefBackend } from "../../src/rules/reference/backend.ts";
import type { Alignment, QkNorm } from "../../src/rules/config.ts";
import { createTask, packBatch, type TaskConfig } from "../../src/tasks/mod.ts";
import { DataRng, deriveSeed } from "../../src/tasks/rng.ts";
import type { TaskName } from "../../src/tasks/types.ts";
import type { TrainConfig } from "../../src/train/config.ts";
import { defaultCorpus, planRun } from "../../src/train/plan.ts";
import { InputError } from "../../src/errors.ts";

/** Bytes per token of a batch: ids, targets (int32), weights (float32), starts (uint8). */
export const BATCH_BYTES_PER_TOKEN = 13;

function fail(message: string): never {
  throw new InputError(message);
}

function integer(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) {
    fail(`${flag} must be an integer >= ${min}, got "${value}"`);
  }
  return n;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** The batches of steps `first..last` of a run whose stream is at `rng` before step `first`. */
function writeBatches(
  path: string,
  task: TaskConfig,
  corpus: Uint8Array | undefined,
  train: TrainConfig,
  model: unknown,
  rngState: number,
  first: number,
): Promise<void> {
  const taskInstance = createTask(task, corpus);
  const rng = new DataRng(rngState);
  const count = train.steps - first + 1;
  const n = train.batchSize * train.seqLen;
  const body = new Uint8Array(count * n * BATCH_BYTES_PER_TOKEN);
  const rngStates: number[] = [];
  for (let i = 0; i < count; i++) {
    const step = first + i;
    const batch = packBatch(
      () => taskInstance.sample(rng, "train", { step, steps: train.steps }),
      train.batchSize,
      train.seqLen,
      taskInstance.padId,
    );
    const base = i * n * BATCH_BYTES_PER_TOKEN;
    body.set(new Uint8Array(batch.ids.buffer, batch.ids.byteOffset, 4 * n), base);
    body.set(new Uint8Array(batch.targets.buffer, batch.targets.byteOffset, 4 * n), base + 4 * n);
    body.set(new Uint8Array(batch.weights.buffer, batch.weights.byteOffset, 4 * n), base + 8 * n);
    body.set(batch.starts, base + 12 * n);
    rngStates.push(rng.state);
  }
  const header = {
    B: train.batchSize,
    T: train.seqLen,
    firstStep: first,
    batches: count,
    rngStateAfter: rng.state,
    rngStates,
    model,
    task,
    train,
  };
  const headerBytes = new TextEncoder().encode(JSON.stringify(header) + "\n");
  const file = new Uint8Array(headerBytes.length + body.length);
  file.set(headerBytes);
  file.set(body, headerBytes.length);
  return Deno.writeFile(path, file);
}

/**
 * Prepare a run from command-line style `args` (module doc); returns a one-line summary of what
 * was written. Bad input throws an {@linkcode InputError} naming the flag and the value.
 */
export async function prepareRun(args: string[]): Promise<string> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        out: { type: "string" },
        from: { type: "string" },
        task: { type: "string", default: "addition" },
        rule: { type: "string", default: "falcon1" },
        alignment: { type: "string", default: "prefix" },
        "no-short-conv": { type: "boolean" },
        "qk-norm": { type: "string" },
        preset: { type: "string", default: "tiny" },
        steps: { type: "string" },
        seed: { type: "string", default: "0" },
        corpus: { type: "string" },
        "operand-order": { type: "string" },
        "answer-order": { type: "string" },
        bos: { type: "boolean" },
        "index-hints": { type: "string" },
        "equal-length": { type: "boolean" },
        curriculum: { type: "string" },
        dtype: { type: "string", default: "f32" },
      },
    }));
  } catch (err) {
    fail((err as Error).message);
  }
  const out = values.out ?? fail("--out DIR is required");
  if (values.dtype !== "f32" && values.dtype !== "f64") {
    fail(`--dtype must be f32 or f64, got "${values.dtype}"`);
  }
  const steps = integer("--steps", values.steps, 1);
  await Deno.mkdir(out, { recursive: true });
  const corpusOf = async () => {
    if (values.corpus === undefined) return defaultCorpus();
    return { bytes: await Deno.readFile(values.corpus), name: values.corpus };
  };

  if (values.from !== undefined) {
    const state = await loadCheckpoint(values.from);
    const train = { ...(state.train as unknown as TrainConfig), ...(steps ? { steps } : {}) };
    if (train.steps <= state.step) {
      fail(`--steps ${train.steps}: ${values.from} is already at step ${state.step}; ask for more steps`);
    }
    const corpus = state.task.task === "text" ? (await corpusOf()).bytes : undefined;
    await writeBatches(
      `${out}/batches.bin`,
      state.task,
      corpus,
      train,
      state.model,
      state.rngState,
      state.step + 1,
    );
    return `${out}/batches.bin holds steps ${state.step + 1}..${train.steps} of ${values.from}`;
  }

  const curriculum = values.curriculum === undefined ? undefined : (() => {
    const m = /^(\d+):([^:]+)$/.exec(values.curriculum!);
    if (!m) fail(`--curriculum must be start:fraction (e.g. 8:0.1), got "${values.curriculum}"`);
    return { startDigits: Number(m[1]), fraction: Number(m[2]) };
  })();
  const explicit = new Set<string>();
  const setup = await planRun({
    task: values.task as TaskName,
    mixer: values.rule as MixerName,
    alignment: values.alignment as Alignment,
    shortConv: values["no-short-conv"] ? false : undefined,
    qkNorm: values["qk-norm"] as QkNorm | undefined,
    preset: values.preset,
    steps,
    seed: integer("--seed", values.seed, 0)!,
    outDir: `${out}/.plan`,
    resume: false,
    corpus: values.task === "text" ? await corpusOf() : undefined,
    explicit,
    // given for every task: planRun refuses addition options for another task, naming the flag
    addition: {
      operandOrder: values["operand-order"] as "msd" | "lsd" | undefined,
      format: values["answer-order"] as "lsd" | "msd" | undefined,
      bos: values.bos,
      indexHints: integer("--index-hints", values["index-hints"], 0),
      equalLength: values["equal-length"],
      curriculum,
    },
    backend: createRefBackend(),
  });
  const backend = createRefBackend();
  const model = createModel(backend, setup.model, deriveSeed(setup.train.seed, "init"));
  const params: Record<string, { shape: number[]; data: Float64Array }> = {};
  for (const p of model.parameters()) {
    params[p.name] = { shape: [...p.value.shape], data: Float64Array.from(await backend.read(p.value)) };
  }
  const rngState = new DataRng(deriveSeed(setup.train.seed, "train")).state;
  await Deno.writeFile(
    `${out}/init.safetensors`,
    encodeCheckpoint({
      step: 0,
      rngState,
      model: setup.model,
      task: setup.task,
      train: { ...setup.train },
      params,
      adamM: {},
      adamV: {},
    }),
  );
  if (await exists(`${out}/init`)) fail(`--out ${out}: ${out}/init exists; choose another --out`);
  // the initial weights are float64 (the reference backend): f64 keeps them, f32 rounds them
  const dtype = values.dtype === "f32" ? "f32" : undefined;
  await convertCheckpoint(`${out}/init.safetensors`, `${out}/init`, { to: "hf", dtype });
  await writeBatches(`${out}/batches.bin`, setup.task, setup.corpus, setup.train, setup.model, rngState, 1);
  return `${out}/init (hf, ${values.dtype}) and ${out}/batches.bin (${setup.train.steps} steps of ` +
    `${setup.train.batchSize} x ${setup.train.seqLen}) for ${setup.task.task} with ${setup.model.mixer}`;
}

if (import.meta.main) {
  try {
    console.error(`prepare_run: ${await prepareRun(Deno.args)}`);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    console.error(`prepare_run: ${err.message}`);
    Deno.exit(2);
  }
}
