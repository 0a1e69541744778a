/**
 * Entry points of the fast-weight kernels: `fw_forward_f32` and `fw_backward_f32` run one head
 * (task = b * H + h) of a batched call described by a parameter block (fw_params.ts), with the calling
 * thread's scratch area. When the parameter block asks for a chunked form, every rule runs the
 * chunk-parallel kernel (fw_chunk.ts, the chunk loops, with the families' segments:
 * fw_chunk_additive_delta.ts for the additive and delta families, fw_chunk_per_column.ts for
 * falcon2 and falcon2a, fw_chunk_window_additive.ts for falcon3a, fw_chunk_window_delta.ts for
 * falcon3; families as in src/rules/catalog.ts); otherwise the recurrent kernels run:
 * the window kernel of falcon3/falcon3a (fw_window.ts) or the coefficient-stream kernel
 * (fw_recurrent.ts).
 */

import * as P from "./fw_params";
import { BW, CHUNKED, DK, DV, H, HB, L_KHAT, loadContext, pp, RULE, T, WIN } from "./fw_common";
import { isWindow } from "./fw_rules";
import { chunkBackward, chunkForward } from "./fw_chunk";
import { coefBackward, coefForward, setBetaStride, setGrads, setOutputs } from "./fw_recurrent";
import { windowBackward, windowCarryOut, windowForward } from "./fw_window";
import { fillF } from "./simd";

export { fwScratchBytes } from "./fw_common";

/** Whether this call's rule writes a window of pairs per step (Falcon-3/3A). */
function isWindowCall(): bool {
  return isWindow(RULE);
}

/** Whether this call runs the chunk-parallel kernel (asked for: forms "chunk" and "parallel"). */
function isChunked(): bool {
  return CHUNKED;
}

/** Forward of head `task`: writes o, the carried state, last key and window pairs of this head. */
export function fw_forward_f32(params: usize, task: i32, scratch: usize): void {
  loadContext(params, task);
  const bh = <usize> task;
  const row = <usize> HB * <usize> T * <usize> H + <usize> (task % H);
  const slots = WIN - 1;
  setOutputs(
    pp(params, P.P_O) + ((row * <usize> DV) << 2),
    pp(params, P.P_OUT_STATE) + ((bh * <usize> DK * <usize> DV) << 2),
    pp(params, P.P_OUT_LASTKEY) + ((bh * <usize> DK) << 2),
  );
  const outWX = pp(params, P.P_OUT_WX) + ((bh * <usize> slots * <usize> DK) << 2);
  const outWY = pp(params, P.P_OUT_WY) + ((bh * <usize> slots * <usize> DV) << 2);
  let count = 0;
  if (isWindowCall()) {
    if (isChunked()) chunkForward(scratch);
    else windowForward(scratch);
    count = windowCarryOut(scratch + L_KHAT, outWX, outWY);
  } else {
    if (isChunked()) chunkForward(scratch);
    else coefForward(scratch);
    if (slots > 0) {
      fillF(outWX, 0, slots * DK);
      fillF(outWY, 0, slots * DV);
    }
  }
  // every head of a row writes the same count
  store<i32>(pp(params, P.P_OUT_COUNT) + (<usize> HB << 2), count);
}

/** Backward of head `task`: writes dq, dk, dv, dbeta, dlambdabar of this head and its ds0, dCarryState. */
export function fw_backward_f32(params: usize, task: i32, scratch: usize): void {
  loadContext(params, task);
  const bh = <usize> task;
  const row = <usize> HB * <usize> T * <usize> H + <usize> (task % H);
  setGrads(
    pp(params, P.P_DQ) + ((row * <usize> DK) << 2),
    pp(params, P.P_DK_) + ((row * <usize> DK) << 2),
    pp(params, P.P_DV_) + ((row * <usize> DV) << 2),
    pp(params, P.P_DBETA) + ((row * <usize> BW) << 2),
    pp(params, P.P_DLAMBDA) + (row << 2),
    pp(params, P.P_DS0) + ((bh * <usize> DK * <usize> DV) << 2),
    pp(params, P.P_DCARRY) + ((bh * <usize> DK * <usize> DV) << 2),
  );
  setBetaStride(H * BW);
  if (isChunked()) chunkBackward(scratch);
  else if (isWindowCall()) windowBackward(scratch);
  else coefBackward(scratch);
}
