/**
 * Dense ops of the reference backend (float64, plain loops). Placeholder until implemented.
 *
 * @module
 */

import type { DenseOps } from "../backend.ts";

function missing(name: string): never {
  throw new Error(`reference dense op ${name}: not implemented yet`);
}

/** Dense ops on {@linkcode RefTensor}s. */
export const refDenseOps: DenseOps = {
  matmul: () => missing("matmul"),
  embeddingForward: () => missing("embeddingForward"),
  embeddingBackward: () => missing("embeddingBackward"),
  rmsNormForward: () => missing("rmsNormForward"),
  rmsNormBackward: () => missing("rmsNormBackward"),
  swigluForward: () => missing("swigluForward"),
  swigluBackward: () => missing("swigluBackward"),
  activationForward: () => missing("activationForward"),
  activationBackward: () => missing("activationBackward"),
  add: () => missing("add"),
  mul: () => missing("mul"),
  axpy: () => missing("axpy"),
  fill: () => missing("fill"),
  shortConvForward: () => missing("shortConvForward"),
  shortConvBackward: () => missing("shortConvBackward"),
  crossEntropyForward: () => missing("crossEntropyForward"),
  crossEntropyBackward: () => missing("crossEntropyBackward"),
  attentionForward: () => missing("attentionForward"),
  attentionBackward: () => missing("attentionBackward"),
  adamw: () => missing("adamw"),
  sumSquares: () => missing("sumSquares"),
};
