/**
 * `falcon convert IN OUT --to native|hf [--dtype f32|f16|bf16] [--drop-optimizer] [--allow-nonfinite]`
 * as a plain function: load (format detected, everything validated), check the weights against
 * the config, convert dtypes (round to nearest even, largest relative change reported), write
 * through a temporary name renamed at the end. A refusal leaves nothing at the output path.
 *
 * @module
 */

import type { ConvertDtype, WeightDtype } from "./dtype.ts";
import { checkOutputDirectory, refuseSamePath, writeDirAtomic, writeFileAtomic } from "./atomic.ts";
import { checkOutputFile, checkWritableDirectory, parentOf } from "../output_path.ts";
import { CheckpointError } from "./errors.ts";
import { encodeHf, HF_FILES } from "./hf_export.ts";
import { type CheckpointFormat, loadAnyCheckpoint } from "./load.ts";
import { encodeNative, OPTIMIZER_PREFIXES, validateOptimizer } from "./native_format.ts";
import { convertTensor, type RawTensor, weightDtypeOf } from "./tensor_set.ts";
import { refuseNonFinite, validateWeights } from "./validate.ts";

/** What to convert to. */
export interface ConvertOptions {
  /** Output format. */
  readonly to: CheckpointFormat;
  /** Weight dtype of the output (default: keep; f16/bf16 widen to f32 for a native output). */
  readonly dtype?: ConvertDtype;
  /** Leave the optimizer state out of a native output (an hf output never has it). */
  readonly dropOptimizer?: boolean;
  /** Convert weights holding NaN or infinity instead of refusing them. */
  readonly allowNonfinite?: boolean;
  /** Replace an existing output file, or an existing hf export directory (default: refuse them). */
  readonly force?: boolean;
}

/** What a conversion did. */
export interface ConvertReport {
  /** Input format (detected). */
  readonly from: CheckpointFormat;
  /** Output format. */
  readonly to: CheckpointFormat;
  /** Number of weight tensors written. */
  readonly tensors: number;
  /** Dtypes of the weights written (sorted). */
  readonly dtypes: WeightDtype[];
  /** Largest `|new - old| / |old|` over every weight element (0: bit-identical values). */
  readonly maxRelativeChange: number;
  /** Number of optimizer tensors written. */
  readonly optimizerTensors: number;
  /** Notes (format upgrades, widening, dropped optimizer state). */
  readonly notes: string[];
  /** Bytes written. */
  readonly bytes: number;
}

/** The dtype a weight of dtype `from` gets. */
function targetDtype(from: WeightDtype, options: ConvertOptions): WeightDtype {
  if (options.dtype) return options.dtype;
  if (options.to === "native" && (from === "f16" || from === "bf16")) return "f32";
  return from;
}

function convertAll(
  tensors: ReadonlyMap<string, RawTensor>,
  target: (name: string, t: RawTensor) => WeightDtype,
): { out: Map<string, RawTensor>; maxRelativeChange: number } {
  const out = new Map<string, RawTensor>();
  let maxRelativeChange = 0;
  for (const [name, t] of tensors) {
    const c = convertTensor(name, t, target(name, t));
    out.set(name, c.tensor);
    maxRelativeChange = Math.max(maxRelativeChange, c.maxRelativeChange);
  }
  return { out, maxRelativeChange };
}

/** Convert the checkpoint at `input` (format detected) into `output`; see the module doc. */
export async function convertCheckpoint(
  input: string,
  output: string,
  options: ConvertOptions,
): Promise<ConvertReport> {
  await refuseSamePath(input, output);
  if (options.to === "native" && (options.dtype === "f16" || options.dtype === "bf16")) {
    throw new CheckpointError(
      output,
      `--dtype ${options.dtype}: native checkpoints hold F32 or F64 weights (the trainer's dtypes); use --to hf`,
    );
  }
  // the output before the input is read: a bad path fails at once
  const replaceable = [HF_FILES.config, HF_FILES.weights];
  if (options.to === "native") {
    await checkOutputFile("output", output, { overwrite: options.force, overwriteFlag: "--force" });
  } else {
    await checkWritableDirectory("output", parentOf(output), output);
    await checkOutputDirectory(output, { replace: options.force, replaceable });
  }
  const ckpt = await loadAnyCheckpoint(input);
  const notes = [...ckpt.notes];
  validateWeights(ckpt.weightsPath, ckpt.config, ckpt.weights, ckpt.describe);
  validateOptimizer(ckpt.weightsPath, ckpt.weights, ckpt.optimizer);
  if (!options.allowNonfinite) {
    refuseNonFinite(ckpt.weightsPath, ckpt.weights, ckpt.describe);
    refuseNonFinite(ckpt.weightsPath, ckpt.optimizer);
  }
  const dtypeOf = (t: RawTensor) => weightDtypeOf(t.dtype)!;
  const weights = convertAll(ckpt.weights, (_, t) => targetDtype(dtypeOf(t), options));
  for (const [name, t] of ckpt.weights) {
    const from = dtypeOf(t);
    if (!options.dtype && targetDtype(from, options) !== from) {
      notes.push(`widened ${name} from ${from} to f32 (native checkpoints hold F32 or F64)`);
    }
  }
  if (!options.allowNonfinite) {
    refuseNonFinite(output, weights.out, (n) => `${ckpt.describe(n)} (after conversion to ${options.dtype})`);
  }
  // optimizer moments keep the dtype of their parameter
  const keepOptimizer = options.to === "native" && !options.dropOptimizer;
  if (ckpt.optimizer.size > 0 && !keepOptimizer) {
    notes.push(
      options.to === "hf"
        ? `optimizer state (${ckpt.optimizer.size} tensors) is not part of an hf export: dropped`
        : `optimizer state (${ckpt.optimizer.size} tensors) dropped`,
    );
  }
  const optimizer = keepOptimizer
    ? convertAll(ckpt.optimizer, (name) => {
      const prefix = OPTIMIZER_PREFIXES.find((p) => name.startsWith(p))!;
      return dtypeOf(weights.out.get(name.slice(prefix.length))!);
    }).out
    : new Map<string, RawTensor>();
  let bytes = 0;
  if (options.to === "native") {
    if (ckpt.metadata.task_config === undefined) {
      throw new CheckpointError(
        ckpt.files[0].path,
        "has no task_config (falcon_metadata.task_config of an hf export made from a native checkpoint): " +
          "a native checkpoint needs the task configuration",
      );
    }
    const data = encodeNative(ckpt.config, weights.out, optimizer, ckpt.metadata);
    bytes = data.length;
    await writeFileAtomic(output, (tmp) => Deno.writeFile(tmp, data));
  } else {
    const embed = weights.out.get("embed")!;
    const files = encodeHf({
      config: ckpt.config,
      weights: weights.out,
      dtype: dtypeOf(embed),
      nativeMetadata: ckpt.metadata,
    });
    bytes = files.weights.length + files.config.length;
    await writeDirAtomic(output, async (tmp) => {
      await Deno.writeTextFile(`${tmp}/${HF_FILES.config}`, files.config);
      await Deno.writeFile(`${tmp}/${HF_FILES.weights}`, files.weights);
    }, { replace: options.force, replaceable });
  }
  return {
    from: ckpt.format,
    to: options.to,
    tensors: weights.out.size,
    dtypes: [...new Set([...weights.out.values()].map(dtypeOf))].sort(),
    maxRelativeChange: weights.maxRelativeChange,
    optimizerTensors: optimizer.size,
    notes,
    bytes,
  };
}
