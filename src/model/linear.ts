/**
 * Small building blocks shared by the mixers and the MLP: linear maps with weights stored
 * `[in, out]`, broadcasting of per-feature vectors over rows, and reshaping copies.
 *
 * @module
 */

import type { Backend, Tensor } from "../rules/backend.ts";
import type { NamedParam } from "./types.ts";

/** `y[N, out] = x[N, in] W[in, out]`, plus `bias[out]` broadcast over rows when given (`ones` `[N, 1]`). */
export function linearForward(
  be: Backend,
  y: Tensor,
  x: Tensor,
  w: NamedParam,
  bias?: { param: NamedParam; ones: Tensor },
): void {
  be.matmul(y, x, w.value);
  if (bias) be.matmul(y, bias.ones, bias.param.value, { accumulate: true });
}

/** Accumulate `dW += x^T dy`, `dBias += sum_rows dy` and, when `dx` is given, `dx += dy W^T`. */
export function linearBackward(
  be: Backend,
  dx: Tensor | null,
  dy: Tensor,
  x: Tensor,
  w: NamedParam,
  bias?: { param: NamedParam; ones: Tensor },
): void {
  be.matmul(w.grad, x, dy, { transA: true, accumulate: true });
  if (bias) be.matmul(bias.param.grad, bias.ones, dy, { transA: true, accumulate: true });
  if (dx) be.matmul(dx, dy, w.value, { transB: true, accumulate: true });
}

/** `out[N, S] = ones[N, 1] value[S]`: a learned vector repeated on every row. */
export function broadcastForward(be: Backend, out: Tensor, ones: Tensor, value: NamedParam): void {
  be.matmul(out, ones, value.value);
}

/** `dValue += sum_rows dOut`. */
export function broadcastBackward(be: Backend, dOut: Tensor, ones: Tensor, value: NamedParam): void {
  be.matmul(value.grad, ones, dOut, { transA: true, accumulate: true });
}

/**
 * `src` viewed with the shape of `into` (same size): `src` itself when the shapes already agree,
 * else a copy of it in `into` (backends have no views, so reshaping is a copy).
 */
export function reshaped(be: Backend, src: Tensor, into: Tensor): Tensor {
  if (src.shape.length === into.shape.length && src.shape.every((d, i) => d === into.shape[i])) return src;
  be.copy(into, src);
  return into;
}
