/**
 * `--gpu-matmul f32|f16`: the arithmetic of the webgpu backend's matrix products, for the
 * subcommands that run a trained model (`eval`, `predict`). `f16` needs an adapter with
 * `shader-f16` and gives about 1e-3 relative error per product; it is not offered for training
 * (gradients underflow in f16 without loss scaling).
 *
 * @module
 */

import { Option } from "@commander-js/extra-typings";
import { GPU_MATMUL_CHOICES } from "../backend_select.ts";

/** The `--gpu-matmul <precision>` option (default `f32`). */
export function gpuMatmulOption() {
  return new Option(
    "--gpu-matmul <precision>",
    "webgpu matrix products: f32, or f16 (needs shader-f16; ~1e-3 relative error)",
  ).choices(GPU_MATMUL_CHOICES).default("f32" as const);
}
