/**
 * Checkpoint conversion and inspection: native checkpoints <-> hf exports (the PyTorch layout
 * `interop/torch/falcon_torch.py` loads), dtype conversion with round-to-nearest-even, format
 * detection, version upgrades and validation of files from strangers. See
 * `docs/checkpoint-format.md`.
 *
 * @module
 */

export { convertCheckpoint, type ConvertOptions, type ConvertReport } from "./convert.ts";
export { formatInspect, inspectCheckpoint, type InspectedTensor, type InspectReport } from "./inspect.ts";
export {
  type CheckpointFormat,
  detectFormat,
  FORMATS,
  loadAnyCheckpoint,
  type LoadedCheckpoint,
} from "./load.ts";
export { CONVERT_DTYPES, type ConvertDtype, type WeightDtype } from "./dtype.ts";
export { CheckpointError } from "./errors.ts";
export { decodeHf, encodeHf, HF_FILES, type ModelWeights } from "./hf_export.ts";
export { decodeNative, encodeNative, type NativeContents, upgradeNative } from "./native_format.ts";
export { roundParametersToF32, weightsFromModel } from "./from_model.ts";
export type { RawTensor } from "./tensor_set.ts";
