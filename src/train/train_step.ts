/**
 * One optimizer step of the trainer, in two strategies behind one interface:
 *
 * - **host step** (CPU backends, where every op has finished when it returns): forward and backward,
 *   the loss and the gradient norm read back, the clipping factor computed on the host in float64,
 *   then AdamW. The arithmetic of every earlier version of the trainer, bit for bit.
 * - **device step** (queued backends, WebGPU): forward, backward, the loss sum and the sum of squared
 *   gradients (`accumulateSum`), and AdamW with the clipping factor taken from those sums on the device
 *   (`StepGuard`) are recorded without waiting for anything; the loss and the statistics are read
 *   asynchronously and the trainer settles a step up to {@linkcode TrainStep.lag} steps later. The host
 *   never waits for the device between steps, so it assembles the next batches and records the next
 *   steps while the device runs.
 *
 * Divergence guarantee of the device step: a step whose loss sum or gradient norm is not finite
 * changes no parameter and no moment, and sets a sticky flag on the device that makes every later
 * guarded update a no-op as well, so the steps already queued behind it change nothing either. The
 * host then reports the FIRST such step (`TrainingDivergedError`) when it settles it; the parameters
 * in memory are those after the last finite step, and no checkpoint is written after it (the trainer
 * settles every queued step before it saves).
 *
 * Numerics of the device step: the loss is the same float64 sum of the per-position losses as the host
 * step's; the gradient norm is a float32 sum on the device, so the clipping factor (and so the update)
 * can differ from the host step's in the last bits. Runs are deterministic: the same seed on the same
 * backend and device gives the same losses and checkpoints, and a resume continues bit for bit.
 *
 * @module
 */

import { type Batch, batchWeight, type LanguageModel } from "../model/types.ts";
import type { Backend, StepGuard, Tensor } from "../rules/backend.ts";
import type { TrainConfig } from "./config.ts";
import { AdamW, clipFactor } from "./optimizer.ts";

/** What a step reports once it is settled. */
export interface StepOutcome {
  /** Mean loss (nats per supervised token). */
  readonly loss: number;
  /** Gradient norm of the mean loss, before clipping. */
  readonly gradNorm: number;
  /** The device refused the update (the step or an earlier one diverged). */
  readonly halted: boolean;
}

/** One recorded step: its outcome arrives when the device has run it. */
export interface PendingStep {
  /** 1-based step number. */
  readonly step: number;
  /**
   * The step's loss and gradient norm. The device step transfers them when this is first called
   * (together with those of every step recorded since), so call it when the value is needed.
   */
  outcome(): Promise<StepOutcome>;
}

/** A training-step strategy over a model and its optimizer. */
export interface TrainStep {
  /** How many recorded steps may wait unsettled before the caller must await the oldest. */
  readonly lag: number;
  /** The optimizer (its moments go into checkpoints). */
  readonly optimizer: AdamW;
  /**
   * Record step `step` on `batch` with learning rate `lr`. The host step has applied its update when
   * the outcome resolves; the device step has recorded it (and it runs in order on the device).
   */
  run(batch: Batch, step: number, lr: number): PendingStep;
}

type StepConfig = Pick<TrainConfig, "beta1" | "beta2" | "eps" | "weightDecay" | "clipNorm">;

/**
 * Recorded steps a device step may keep in flight. Settling the oldest transfers the reads of every step
 * recorded since in one map, and in Deno 2.9 a map blocks until the device has run everything submitted
 * (~11 ms of idle device and host on the H200 each time), so the trainer pays that once per `lag + 1`
 * steps: 8 makes it one round trip per 9 steps (it was 2, one per 3 steps: measured as a third of a `lab`
 * preset step on the H200, docs/performance.md).
 */
export const DEVICE_STEP_LAG = 8;

/** The strategy for `backend`: the device step where ops are queued and the model can record, else the host step. */
export function createTrainStep(
  backend: Backend,
  model: LanguageModel,
  config: StepConfig,
  options: { readonly strategy?: "host" | "device" } = {},
): TrainStep {
  const wantDevice = options.strategy ? options.strategy === "device" : backend.queued;
  if (wantDevice && model.recordForwardBackward) return deviceStep(backend, model, config);
  if (options.strategy === "device") {
    throw new RangeError("the device training step needs a model with recordForwardBackward()");
  }
  return hostStep(model, new AdamW(backend, model.parameters()), config);
}

function hostStep(model: LanguageModel, optimizer: AdamW, config: StepConfig): TrainStep {
  return {
    lag: 0,
    optimizer,
    run(batch, step, lr) {
      const weight = batchWeight(batch);
      const outcome = (async () => {
        // forward + backward and the gradient reductions are all recorded before waiting on either read
        const lossRead = model.forwardBackward(batch);
        const normRead = optimizer.gradNorm(1 / weight);
        const [{ loss }, gradNorm] = await Promise.all([lossRead, normRead]);
        const meanLoss = loss / weight;
        if (Number.isFinite(meanLoss) && Number.isFinite(gradNorm)) {
          optimizer.step(config, lr, step, clipFactor(gradNorm, config.clipNorm) / weight);
        }
        return { loss: meanLoss, gradNorm, halted: false };
      })();
      return { step, outcome: () => outcome };
    },
  };
}

function deviceStep(backend: Backend, model: LanguageModel, config: StepConfig): TrainStep {
  const params = model.parameters();
  const grads = params.map((p) => p.grad);
  const optimizer = new AdamW(backend, params);
  const stats = backend.zeros([2]); // [loss sum, sum of squared gradients] of the step being recorded
  const halted = backend.zeros([1]);
  return {
    lag: DEVICE_STEP_LAG,
    optimizer,
    run(batch, step, lr) {
      const weight = batchWeight(batch);
      backend.fill(stats, 0);
      const losses: Tensor = model.recordForwardBackward!(batch);
      backend.accumulateSum(stats, 0, [losses], false);
      backend.accumulateSum(stats, 1, grads, true);
      const guard: StepGuard = { stats, halted, normScale: 1 / weight, clipNorm: config.clipNorm };
      optimizer.step(config, lr, step, 1 / weight, guard);
      // snapshots taken now, transferred when the trainer settles this step (with the later steps')
      const reads = [backend.readLater(losses), backend.readLater(stats), backend.readLater(halted)];
      let outcome: Promise<StepOutcome> | null = null;
      const settle = async () => {
        const [perPosition, sums, flag] = await Promise.all(reads.map((read) => read()));
        let loss = 0;
        for (const x of perPosition) loss += x;
        return { loss: loss / weight, gradNorm: Math.sqrt(sums[1]) / weight, halted: flag[0] !== 0 };
      };
      return { step, outcome: () => (outcome ??= settle()) };
    },
  };
}
