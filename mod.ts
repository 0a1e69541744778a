/**
 * `falcon`: the Falcon family of fast-weight attention rules, and a small language model, its tasks,
 * trainer, evaluation and checkpoints built on them.
 *
 * - Rules: Falcon-1/2/3 (regression), Falcon-1A/2A/3A (inner product) and the baselines linear,
 *   RetNet, Mamba-2, DeltaNet and Gated DeltaNet, under `prefix` or `same-step` alignment, in
 *   recurrent, chunk-parallel and masked-parallel form ({@linkcode FORMS}), forward and backward.
 * - One kernel interface ({@linkcode Backend}) with a float64 reference ({@linkcode createRefBackend});
 *   {@linkcode selectBackend} picks one by name. The fast backends have their own entry points,
 *   `@falcon/falcon/wasm` and `@falcon/falcon/webgpu`, so that importing this module starts no worker
 *   and asks for no GPU.
 * - The `FalconLM` model of SPEC section 7 ({@linkcode createModel}), the tasks it learns (addition,
 *   MQAR, text: {@linkcode createTask}), the trainer ({@linkcode train}, {@linkcode planRun}),
 *   evaluation ({@linkcode evaluateCheckpoints}) and checkpoint I/O ({@linkcode saveCheckpoint},
 *   {@linkcode loadCheckpoint}, {@linkcode convertCheckpoint}, {@linkcode inspectCheckpoint}).
 *
 * Nothing here reads files of this package at run time: the WASM bytes, shaders, fonts and the
 * built-in corpus are modules. Only the functions that take a path touch the file system.
 *
 * @example Run Falcon-3A forward on one head and read the outputs
 * ```ts
 * import { createRefBackend, ruleConfig } from "./mod.ts";
 *
 * const backend = createRefBackend();
 * const [B, T, H, D] = [1, 5, 1, 4];
 * const rand = (n: number) => Array.from({ length: n }, (_, i) => Math.sin(i + 1));
 * const out = backend.fastWeightForward(ruleConfig("falcon3a"), {
 *   q: backend.fromArray(rand(B * T * H * D), [B, T, H, D]),
 *   k: backend.fromArray(rand(B * T * H * D).reverse(), [B, T, H, D]),
 *   v: backend.fromArray(rand(B * T * H * D), [B, T, H, D]),
 *   beta: backend.fromArray(new Array(B * T * H).fill(1), [B, T, H]),
 *   lambdabar: backend.fromArray(new Array(B * T * H).fill(0.1), [B, T, H]),
 * });
 * const o = await backend.read(out.o);
 * if (o.length !== B * T * H * D) throw new Error("unexpected output size");
 * ```
 *
 * @module
 */

// rules, forms, the kernel interface and the float64 reference backend
export * from "./src/rules/mod.ts";
export {
  BACKEND_CHOICES,
  type BackendChoice,
  GPU_MATMUL_CHOICES,
  type GpuMatmulChoice,
  selectBackend,
  type SelectBackendOptions,
} from "./backend_select.ts";
export { InputError } from "./src/errors.ts";

// the model
export * from "./src/model/mod.ts";

// tasks
export * from "./src/tasks/mod.ts";

// checkpoints: the native format, and conversion to and from the hf layout
export * from "./src/checkpoint/mod.ts";
export {
  CheckpointError,
  type CheckpointFormat,
  CONVERT_DTYPES,
  convertCheckpoint,
  type ConvertDtype,
  type ConvertOptions,
  type ConvertReport,
  detectFormat,
  formatInspect,
  FORMATS,
  inspectCheckpoint,
  type InspectedTensor,
  type InspectReport,
  loadAnyCheckpoint,
  type LoadedCheckpoint,
  type RawTensor,
  type WeightDtype,
} from "./src/convert/mod.ts";

// training and prediction
export {
  CHECKPOINT_FILE,
  METRICS_FILE,
  type ModelFactory,
  RunWriteError,
  train,
  TrainingDivergedError,
  type TrainProgress,
  type TrainResult,
  type TrainSetup,
  validateSetup,
} from "./src/train/trainer.ts";
export {
  DEFAULT_TRAIN_CONFIG,
  type TrainConfig,
  trainConfig,
  validateTrainConfig,
} from "./src/train/config.ts";
export { type Preset, preset, type PresetName, PRESETS, presetTaskConfig } from "./src/train/presets.ts";
export { type AdditionRunOptions, defaultCorpus, planRun, type RunRequest } from "./src/train/plan.ts";
export {
  applyOverrides,
  type ConfigFile,
  OVERRIDE_NAMES,
  type OverrideName,
  OVERRIDES,
  type OverrideValue,
  parseConfigFile,
  parseOverride,
  type RunOverrides,
} from "./src/train/overrides.ts";
export {
  LOCK_FILE,
  type LockOwner,
  openRunDirectory,
  type OpenRunOptions,
  type RunDirectory,
  RunDirectoryError,
} from "./src/train/run_dir.ts";
export {
  type LoadedCheckpoint as PredictionCheckpoint,
  loadForPrediction,
  predict,
  type Prediction,
} from "./src/train/predict.ts";
export { type AccuracyResult, type LogitsModel, teacherForcedAccuracy } from "./src/train/accuracy.ts";

// evaluation (the plot, which loads Vega, is left to the CLI)
export * from "./src/eval/metrics.ts";
export * from "./src/eval/reference.ts";
export * from "./src/eval/evaluate.ts";
export * from "./src/eval/periodic.ts";
export * from "./src/eval/test_sets.ts";
export * from "./src/eval/lengths.ts";
export * from "./src/eval/load.ts";
export * from "./src/eval/run.ts";
export * from "./src/eval/report.ts";
export * from "./src/eval/table.ts";
export * from "./src/eval/csv.ts";
