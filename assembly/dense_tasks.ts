/**
 * `dense_task_f32`: the dense ops of the CPU backend (element-wise ops, AdamW, RMSNorm, the short
 * convolution, the embedding and the cross-entropy) as thread-pool jobs. A job names one op and its arguments in a parameter block
 * (layout: assembly/dense_params.ts) and cuts the op's items (elements, rows or channels) into bands;
 * task `t` runs the op on band `t`. Every band computes its items exactly as the whole op would (no sum
 * crosses a band), so results do not depend on the number of bands, and a one-band job is the op itself.
 */

import {
  D_ALIGN,
  D_ARGS,
  D_COUNT,
  D_OP,
  D_TASKS,
  OP_ACTIVATION_BACKWARD,
  OP_ACTIVATION_FORWARD,
  OP_ADAMW,
  OP_ADD,
  OP_AXPY,
  OP_COPY,
  OP_CROSS_ENTROPY_BACKWARD,
  OP_CROSS_ENTROPY_FORWARD,
  OP_EMBEDDING_BACKWARD,
  OP_EMBEDDING_FORWARD,
  OP_FILL,
  OP_MUL,
  OP_RMSNORM_BACKWARD_INPUT,
  OP_RMSNORM_BACKWARD_WEIGHT,
  OP_RMSNORM_FORWARD,
  OP_SHORTCONV_BACKWARD,
  OP_SHORTCONV_FORWARD,
  OP_SWIGLU_BACKWARD,
  OP_SWIGLU_FORWARD,
} from "./dense_params";
import { shortconvBackwardChannels, shortconvForwardChannels } from "./conv";
import {
  act_backward_f32,
  act_forward_f32,
  adamw_f32,
  add_f32,
  axpy_f32,
  fill_f32,
  mul_f32,
  swiglu_backward_f32,
  swiglu_forward_f32,
} from "./elementwise";
import { ce_backward_f32, ce_forward_f32 } from "./loss";
import { rmsnormBackwardRows, rmsnormBackwardWeightColumns, rmsnormForwardRows } from "./norm";
import { copyF, ldd } from "./simd";

/** Argument `i` of the op (slot `D_ARGS + i`). */
function arg(params: usize, i: i32): f64 {
  return ldd(params, D_ARGS + i);
}

/** Argument `i` as a byte address, offset by `items` elements of 4 bytes. */
function ptr(params: usize, i: i32, items: i32): usize {
  return <usize> arg(params, i) + (<usize> items << 2);
}

/** Start of band `i` of `bands` over `count` items, a multiple of `align` (clipped to `count`). */
function bandStart(i: i32, bands: i32, count: i32, align: i32): i32 {
  const units = (count + align - 1) / align;
  const per = (units + bands - 1) / bands;
  return min(count, i * per * align);
}

/** One task of a dense job: the op on band `task` of its items, with the thread's `scratch`. */
export function dense_task_f32(params: usize, task: i32, scratch: usize): void {
  const op = <i32> ldd(params, D_OP);
  const bands = max(1, <i32> ldd(params, D_TASKS));
  const count = <i32> ldd(params, D_COUNT);
  const align = max(1, <i32> ldd(params, D_ALIGN));
  const lo = bandStart(task, bands, count, align);
  const hi = bandStart(task + 1, bands, count, align);
  if (lo >= hi) return;
  const n = hi - lo;
  if (op == OP_ADD) {
    add_f32(ptr(params, 0, lo), ptr(params, 1, lo), ptr(params, 2, lo), n);
  } else if (op == OP_MUL) {
    mul_f32(ptr(params, 0, lo), ptr(params, 1, lo), ptr(params, 2, lo), n);
  } else if (op == OP_AXPY) {
    axpy_f32(ptr(params, 0, lo), ptr(params, 1, lo), <f32> arg(params, 2), n);
  } else if (op == OP_FILL) {
    fill_f32(ptr(params, 0, lo), <f32> arg(params, 1), n);
  } else if (op == OP_COPY) {
    copyF(ptr(params, 0, lo), ptr(params, 1, lo), n);
  } else if (op == OP_ACTIVATION_FORWARD) {
    act_forward_f32(<i32> arg(params, 0), ptr(params, 1, lo), ptr(params, 2, lo), <f32> arg(params, 3), n);
  } else if (op == OP_ACTIVATION_BACKWARD) {
    const kind = <i32> arg(params, 0);
    act_backward_f32(
      kind,
      ptr(params, 1, lo),
      ptr(params, 2, lo),
      ptr(params, 3, lo),
      <f32> arg(params, 4),
      n,
    );
  } else if (op == OP_SWIGLU_FORWARD) {
    swiglu_forward_f32(ptr(params, 0, lo), ptr(params, 1, lo), ptr(params, 2, lo), n);
  } else if (op == OP_SWIGLU_BACKWARD) {
    swiglu_backward_f32(
      ptr(params, 0, lo),
      ptr(params, 1, lo),
      ptr(params, 2, lo),
      ptr(params, 3, lo),
      ptr(params, 4, lo),
      n,
    );
  } else if (op == OP_ADAMW) {
    adamw_f32(
      ptr(params, 0, lo),
      ptr(params, 1, lo),
      ptr(params, 2, lo),
      ptr(params, 3, lo),
      n,
      arg(params, 4),
      arg(params, 5),
      arg(params, 6),
      arg(params, 7),
      arg(params, 8),
      arg(params, 9),
      arg(params, 10),
    );
  } else if (op == OP_RMSNORM_FORWARD) {
    const D = <i32> arg(params, 4);
    const w = <usize> arg(params, 3);
    const rows = lo * D;
    rmsnormForwardRows(
      ptr(params, 0, rows),
      ptr(params, 1, lo),
      ptr(params, 2, rows),
      w,
      n,
      D,
      arg(params, 5),
    );
  } else if (op == OP_RMSNORM_BACKWARD_INPUT) {
    const D = <i32> arg(params, 5);
    const w = <usize> arg(params, 3);
    const rstd = <usize> arg(params, 4);
    rmsnormBackwardRows(ptr(params, 0, 0), ptr(params, 1, 0), ptr(params, 2, 0), w, rstd, lo, hi, D);
  } else if (op == OP_RMSNORM_BACKWARD_WEIGHT) {
    const N = <i32> arg(params, 4);
    const D = <i32> arg(params, 5);
    rmsnormBackwardWeightColumns(
      ptr(params, 0, 0),
      ptr(params, 1, 0),
      ptr(params, 2, 0),
      ptr(params, 3, 0),
      N,
      D,
      lo,
      hi,
    );
  } else if (op == OP_SHORTCONV_FORWARD) {
    shortconvForwardChannels(
      ptr(params, 0, 0),
      ptr(params, 1, 0),
      ptr(params, 2, 0),
      <usize> arg(params, 3),
      <i32> arg(params, 4),
      <i32> arg(params, 5),
      <i32> arg(params, 6),
      <i32> arg(params, 7),
      lo,
      hi,
      scratch,
    );
  } else if (op == OP_SHORTCONV_BACKWARD) {
    shortconvBackwardChannels(
      ptr(params, 0, 0),
      ptr(params, 1, 0),
      ptr(params, 2, 0),
      ptr(params, 3, 0),
      ptr(params, 4, 0),
      <usize> arg(params, 5),
      <i32> arg(params, 6),
      <i32> arg(params, 7),
      <i32> arg(params, 8),
      <i32> arg(params, 9),
      lo,
      hi,
      scratch,
    );
  } else if (op == OP_EMBEDDING_FORWARD) {
    const D = <i32> arg(params, 3);
    const table = <usize> arg(params, 1);
    const ids = <usize> arg(params, 2);
    for (let r = lo; r < hi; r++) {
      const id = load<i32>(ids + (<usize> r << 2));
      copyF(ptr(params, 0, r * D), table + (<usize> (id * D) << 2), D);
    }
  } else if (op == OP_EMBEDDING_BACKWARD) {
    const N = <i32> arg(params, 3);
    const D = <i32> arg(params, 4);
    const dTable = <usize> arg(params, 0);
    const ids = <usize> arg(params, 2);
    for (let r = 0; r < N; r++) {
      const id = load<i32>(ids + (<usize> r << 2));
      axpy_f32(dTable + (<usize> (id * D + lo) << 2), ptr(params, 1, r * D + lo), 1, n);
    }
  } else if (op == OP_CROSS_ENTROPY_FORWARD) {
    const V = <i32> arg(params, 4);
    ce_forward_f32(ptr(params, 0, lo), ptr(params, 1, lo * V), ptr(params, 2, lo), ptr(params, 3, lo), n, V);
  } else if (op == OP_CROSS_ENTROPY_BACKWARD) {
    const V = <i32> arg(params, 4);
    ce_backward_f32(
      ptr(params, 0, lo * V),
      ptr(params, 1, lo * V),
      ptr(params, 2, lo),
      ptr(params, 3, lo),
      n,
      V,
    );
  } else {
    unreachable();
  }
}
