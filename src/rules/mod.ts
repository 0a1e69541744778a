/**
 * The kernel interface of `falcon` and its float64 reference backend.
 *
 * @module
 */

export * from "./config.ts";
export * from "./backend.ts";
export { createRefBackend } from "./reference/backend.ts";
export { RefTensor } from "./reference/tensor.ts";
export type { HeadCarry, HeadForm, HeadForward, HeadGrads, HeadInputs } from "./reference/head.ts";
