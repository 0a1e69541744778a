/**
 * The WASM module of the CPU backend: every kernel exported from one place. Built twice by
 * scripts/build_wasm.ts (relaxed SIMD and plain SIMD) into src/wasm/_generated_wasm.ts.
 */

export { fw_backward_f32, fw_forward_f32, fwScratchBytes } from "./fast_weight";

/** First free byte after the module's static data: the TypeScript allocator starts here. */
export function heapBase(): usize {
  return __heap_base;
}

export { gemm_f32, gemmScratchBytes } from "./gemm";
export { sumsq_f32 } from "./elementwise";
export { dense_task_f32 } from "./dense_tasks";
export { shortconvScratchBytes } from "./conv";
export { exp_f64x2_mismatches } from "./exp_f64x2";
export { attention_backward_f32, attention_forward_f32 } from "./attention";
