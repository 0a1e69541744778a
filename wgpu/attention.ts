/**
 * Causal softmax attention with RoPE on the `webgpu` backend (Transformer baseline): rotates q
 * and k into scratch tensors, then runs the row kernels of `shaders/attention.ts`.
 *
 * @module
 */

import type { DenseOps, Tensor } from "../src/rules/backend.ts";
import { type GpuRuntime, grid } from "./runtime.ts";
import { gpuBuffer, type GpuTensor } from "./tensor.ts";
import { segmentStarts } from "./dense.ts";
import {
  attentionForwardShader,
  attentionKeyGradShader,
  attentionQueryGradShader,
  ropeShader,
} from "./shaders/attention.ts";

type AttentionOps = Pick<DenseOps, "attentionForward" | "attentionBackward">;

/** The attention ops on a runtime. */
export function createAttentionOps(rt: GpuRuntime): AttentionOps {
  function dims(op: string, q: Tensor, others: [string, Tensor][], starts?: Uint8Array) {
    if (q.shape.length !== 4) throw new RangeError(`${op}: q must be [B, T, H, D], got [${q.shape}]`);
    const [B, T, H, D] = q.shape;
    if (D % 2 !== 0) throw new RangeError(`${op}: head size D must be even for RoPE, got ${D}`);
    for (const [name, t] of others) {
      if (t.size !== q.size) {
        throw new RangeError(`${op}: ${name} has shape [${t.shape}], expected [${q.shape}]`);
      }
    }
    if (starts && starts.length !== B * T) {
      throw new RangeError(`${op}: starts has length ${starts.length}, expected ${B * T}`);
    }
    return { B, T, H, D, n: B * T * H, seg: rt.temp(segmentStarts(B, T, starts), "storage") };
  }

  function rotate(
    dst: GpuTensor | GPUBuffer,
    src: GPUBuffer,
    seg: GPUBuffer,
    D: number,
    n: number,
    T: number,
    H: number,
    base: number,
    inverse: boolean,
  ) {
    const u = rt.uniform([{ u: n }, { u: T }, { u: H }, { f: base }]);
    const pipe = rt.pipeline(`rope_${inverse ? "t" : "n"}_${D}`, () => ropeShader(D, inverse));
    rt.dispatch(pipe, [dst instanceof GPUBuffer ? dst : dst.buffer, src, seg, u], grid(Math.ceil(n / 64)));
  }

  return {
    attentionForward(out, lse, q, k, v, ropeBase, starts) {
      const { B, T, H, D, n, seg } = dims("attentionForward", q, [["k", k], ["v", v], ["out", out]], starts);
      if (lse.size !== B * T * H) throw new RangeError(`attentionForward: lse must be [${B}, ${T}, ${H}]`);
      if (n === 0) return;
      const qr = rt.tensor([q.size], false);
      const kr = rt.tensor([q.size], false);
      rotate(qr, gpuBuffer(q, "q"), seg, D, n, T, H, ropeBase, false);
      rotate(kr, gpuBuffer(k, "k"), seg, D, n, T, H, ropeBase, false);
      const u = rt.uniform([{ u: n }, { u: T }, { u: H }, { f: ropeBase }]);
      rt.dispatch(rt.pipeline(`attention_forward_f32_${D}`, () => attentionForwardShader(D)), [
        gpuBuffer(out, "out"),
        qr.buffer,
        kr.buffer,
        gpuBuffer(v, "v"),
        seg,
        gpuBuffer(lse, "lse"),
        u,
      ], grid(Math.ceil(n / 64)));
      rt.pool.release(qr.buffer);
      rt.pool.release(kr.buffer);
    },

    attentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, ropeBase, starts) {
      const { T, H, D, n, seg } = dims("attentionBackward", q, [
        ["k", k],
        ["v", v],
        ["out", out],
        ["dOut", dOut],
        ["dq", dq],
        ["dk", dk],
        ["dv", dv],
      ], starts);
      if (n === 0) return;
      const qr = rt.tensor([q.size], false);
      const kr = rt.tensor([q.size], false);
      const dqr = rt.tensor([q.size], false);
      const dkr = rt.tensor([q.size], false);
      const delta = rt.tensor([n], false);
      rotate(qr, gpuBuffer(q, "q"), seg, D, n, T, H, ropeBase, false);
      rotate(kr, gpuBuffer(k, "k"), seg, D, n, T, H, ropeBase, false);
      const u = rt.uniform([{ u: n }, { u: T }, { u: H }, { f: ropeBase }]);
      const common = [
        qr.buffer,
        kr.buffer,
        gpuBuffer(v, "v"),
        seg,
        gpuBuffer(lse, "lse"),
        gpuBuffer(dOut, "dOut"),
      ];
      rt.dispatch(rt.pipeline(`attention_qgrad_f32_${D}`, () => attentionQueryGradShader(D)), [
        dqr.buffer,
        ...common,
        gpuBuffer(out, "out"),
        delta.buffer,
        u,
      ], grid(Math.ceil(n / 64)));
      rt.dispatch(rt.pipeline(`attention_kgrad_f32_${D}`, () => attentionKeyGradShader(D)), [
        dkr.buffer,
        ...common,
        gpuBuffer(dv, "dv"),
        delta.buffer,
        u,
      ], grid(Math.ceil(n / 64)));
      rotate(gpuBuffer(dq, "dq"), dqr.buffer, seg, D, n, T, H, ropeBase, true);
      rotate(gpuBuffer(dk, "dk"), dkr.buffer, seg, D, n, T, H, ropeBase, true);
      for (const t of [qr, kr, dqr, dkr, delta]) rt.pool.release(t.buffer);
    },
  };
}
