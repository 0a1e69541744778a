/**
 * Training hyperparameters: defaults and validation.
 *
 * @module
 */

/** Hyperparameters of a training run. Serialised as JSON into checkpoints. */
export interface TrainConfig {
  /** Total optimizer steps. */
  readonly steps: number;
  /** Rows per batch `B`. */
  readonly batchSize: number;
  /** Positions per row `T` (examples are packed into rows). */
  readonly seqLen: number;
  /** Peak learning rate. */
  readonly lr: number;
  /** Final learning rate as a fraction of `lr` (cosine floor). */
  readonly minLrRatio: number;
  /** Linear warmup steps from 0 to `lr`. */
  readonly warmupSteps: number;
  /** Decoupled weight decay (not applied to norms and biases). */
  readonly weightDecay: number;
  /** AdamW beta1. */
  readonly beta1: number;
  /** AdamW beta2. */
  readonly beta2: number;
  /** AdamW epsilon. */
  readonly eps: number;
  /** Clip the global gradient norm (of the mean loss) to this value; 0 turns clipping off. */
  readonly clipNorm: number;
  /** Save a checkpoint every this many steps (0: only at the end and on interrupt). */
  readonly checkpointEvery: number;
  /** Run seed: model initialisation and the training stream derive their seeds from it. */
  readonly seed: number;
}

/** Defaults of {@linkcode trainConfig}. */
export const DEFAULT_TRAIN_CONFIG: TrainConfig = {
  steps: 1000,
  batchSize: 16,
  seqLen: 128,
  lr: 1e-3,
  minLrRatio: 0.1,
  warmupSteps: 100,
  weightDecay: 0.1,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  clipNorm: 1,
  checkpointEvery: 500,
  seed: 0,
};

/** A complete, validated {@linkcode TrainConfig}; throws a RangeError naming the first bad field. */
export function trainConfig(overrides: Partial<TrainConfig> = {}): TrainConfig {
  const config: TrainConfig = { ...DEFAULT_TRAIN_CONFIG, ...overrides };
  validateTrainConfig(config);
  return config;
}

/** Throw a RangeError naming the first invalid field (e.g. of a config read from a checkpoint). */
export function validateTrainConfig(config: TrainConfig): void {
  for (const key of ["steps", "batchSize", "seqLen"] as const) {
    if (!Number.isInteger(config[key]) || config[key] < 1) {
      throw new RangeError(`${key} must be an integer >= 1, got ${config[key]}`);
    }
  }
  for (const key of ["warmupSteps", "checkpointEvery"] as const) {
    if (!Number.isInteger(config[key]) || config[key] < 0) {
      throw new RangeError(`${key} must be an integer >= 0, got ${config[key]}`);
    }
  }
  if (!Number.isSafeInteger(config.seed) || config.seed < 0) {
    throw new RangeError(`seed must be a non-negative integer, got ${config.seed}`);
  }
  const inRange = (key: keyof TrainConfig, lo: number, hi: number, loOpen: boolean) => {
    const v = config[key];
    if (!(typeof v === "number" && (loOpen ? v > lo : v >= lo) && v < hi)) {
      throw new RangeError(`${key} must be in ${loOpen ? "(" : "["}${lo}, ${hi}), got ${v}`);
    }
  };
  inRange("lr", 0, Infinity, true);
  inRange("minLrRatio", 0, 1.0000001, false);
  inRange("weightDecay", 0, Infinity, false);
  inRange("beta1", 0, 1, false);
  inRange("beta2", 0, 1, false);
  inRange("eps", 0, Infinity, true);
  inRange("clipNorm", 0, Infinity, false);
}
