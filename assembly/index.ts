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
export {
  act_backward_f32,
  act_forward_f32,
  adamw_f32,
  add_f32,
  axpy_f32,
  fill_f32,
  mul_f32,
  sumsq_f32,
  swiglu_backward_f32,
  swiglu_forward_f32,
} from "./elementwise";
export { rmsnorm_backward_f32, rmsnorm_forward_f32 } from "./norm";
export { shortconv_backward_f32, shortconv_forward_f32 } from "./conv";
export { ce_backward_f32, ce_forward_f32 } from "./loss";
export { attention_backward_f32, attention_forward_f32 } from "./attention";
