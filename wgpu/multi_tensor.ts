/**
 * Ops over many tensors of one block (`WebGpuBackend.zerosBlock`, `wgpu/tensor.ts`) in one dispatch:
 * AdamW over every parameter and the partial sums of `accumulateSum` over every gradient. A training
 * step of the `lab` preset otherwise records one AdamW and one partial-sum dispatch per parameter
 * (36 each), and the host cost of recording a dispatch is what bounds small steps.
 *
 * Both give the same numbers as the per-tensor dispatches: AdamW is the same arithmetic per element
 * (`adamwShader(guarded, true)`), and the partial sums are the same workgroups' sums of the same
 * elements in the same order, added by the same finishing pass.
 *
 * @module
 */

import type { AdamWParams, AdamWSlot, StepGuard, Tensor } from "../src/rules/backend.ts";
import { type GpuRuntime, grid } from "./runtime.ts";
import { type GpuBlock, GpuTensor, liveTensor } from "./tensor.ts";
import { adamwShader, ELEMENTWISE_WG } from "./shaders/elementwise.ts";
import { blockSumSquaresShader } from "./shaders/rows.ts";

/** Workgroups of the partial sums of one tensor of `size` elements (as `accumulateSum` has always used). */
export function partialSumGroups(size: number): number {
  return Math.min(256, Math.ceil(size / 256));
}

/**
 * The block of which `tensors` are views, in that order and each once (with `all`: every tensor of the
 * block, in layout order), or null.
 */
export function sameBlock(tensors: readonly Tensor[], all: boolean): GpuBlock | null {
  const first = tensors[0];
  if (!(first instanceof GpuTensor) || !first.block) return null;
  const block = first.block;
  if (all && tensors.length !== block.tensors.length) return null;
  let last = -1;
  for (const [i, t] of tensors.entries()) {
    if (!(t instanceof GpuTensor) || t.block !== block || t.disposed) return null;
    if (all ? t.index !== i : t.index <= last) return null;
    last = t.index;
  }
  return block;
}

/** The per-workgroup table of {@linkcode blockSumSquaresShader} for `tensors` of one block: `[w] = (offset, n, groups, g)`. */
export function blockSumTable(tensors: readonly GpuTensor[]): Uint32Array {
  const rows: number[] = [];
  for (const t of tensors) {
    if (t.size === 0) continue;
    const groups = partialSumGroups(t.size);
    for (let g = 0; g < groups; g++) rows.push(t.offset / 4, t.size, groups, g);
  }
  return Uint32Array.from(rows);
}

/** The `decay` table of a blocked AdamW: 1 or 0 per aligned run of `chunk` elements of `block`. */
export function decayTable(block: GpuBlock, decays: readonly boolean[]): Float32Array {
  const chunk = block.alignment / 4;
  const table = new Float32Array(block.elements / chunk);
  block.tensors.forEach((t, i) => {
    if (decays[i]) table.fill(1, t.offset / 4 / chunk, (t.offset + t.reserved) / 4 / chunk);
  });
  return table;
}

/** Blocks of a multi-tensor AdamW (parameters, gradients, first and second moments) and its decay table. */
interface AdamwPlan {
  readonly blocks: readonly [GpuBlock, GpuBlock, GpuBlock, GpuBlock];
  readonly decay: GPUBuffer;
  readonly tensors: number;
}

/** The multi-tensor ops on a runtime; `hyper` gives AdamW's per-step value buffer (shared with `adamw`). */
export function createMultiTensorOps(rt: GpuRuntime, hyper: (values: number[]) => GPUBuffer) {
  /** Tables by block and content (a training step asks for the same ones every step). */
  const tables = new WeakMap<GpuBlock, Map<string, { buffer: GPUBuffer; rows: number }>>();
  const tableOf = (block: GpuBlock, key: string, make: () => Uint32Array | Float32Array) => {
    let byKey = tables.get(block);
    if (!byKey) tables.set(block, byKey = new Map());
    let entry = byKey.get(key);
    if (!entry) {
      const data = make();
      entry = { buffer: rt.storageBuffer(data), rows: data.length };
      byKey.set(key, entry);
    }
    return entry;
  };

  /** What a list of slots (the optimizer's, the same array every step) resolved to: its blocks, or null. */
  const adamwPlans = new WeakMap<readonly AdamWSlot[], AdamwPlan | null>();
  /** The partial-sum table of a list of tensors (the device step's gradients, the same array every step). */
  const sumPlans = new WeakMap<
    readonly Tensor[],
    { block: GpuBlock; views: readonly GpuTensor[]; key: string }
  >();

  function adamwPlan(slots: readonly AdamWSlot[]): AdamwPlan | null {
    const params = sameBlock(slots.map((s) => s.param), true);
    const grads = sameBlock(slots.map((s) => s.grad), true);
    const ms = sameBlock(slots.map((s) => s.m), true);
    const vs = sameBlock(slots.map((s) => s.v), true);
    if (!params || !grads || !ms || !vs) return null;
    const layout = (b: GpuBlock) => b.tensors.map((t) => `${t.offset}+${t.reserved}`).join(",");
    const expected = layout(params);
    if ([grads, ms, vs].some((b) => b.elements !== params.elements || layout(b) !== expected)) return null;
    const decays = slots.map((s) => s.decay);
    const decay = tableOf(params, `decay:${decays.map(Number).join("")}`, () => decayTable(params, decays));
    return { blocks: [params, grads, ms, vs], decay: decay.buffer, tensors: slots.length };
  }

  /** The cached plan of `slots` while its tensors are the same and alive (checked, cheaply, every call). */
  function cachedAdamwPlan(slots: readonly AdamWSlot[]): AdamwPlan | null {
    let plan = adamwPlans.get(slots);
    const valid = plan !== undefined && (plan === null ||
      (plan.tensors === slots.length && plan.blocks.every((b) => b.live === b.tensors.length) &&
        slots.every((s, i) =>
          s.param === plan!.blocks[0].tensors[i] && s.grad === plan!.blocks[1].tensors[i] &&
          s.m === plan!.blocks[2].tensors[i] && s.v === plan!.blocks[3].tensors[i]
        )));
    if (!valid) {
      plan = adamwPlan(slots);
      adamwPlans.set(slots, plan);
    }
    return plan!;
  }

  function sumPlan(xs: readonly Tensor[]) {
    const cached = sumPlans.get(xs);
    if (
      cached && cached.views.length === xs.length && cached.views.every((t, i) => t === xs[i] && !t.disposed)
    ) {
      return cached;
    }
    const block = sameBlock(xs, false);
    if (!block) return null;
    const views = [...xs] as GpuTensor[];
    const plan = { block, views, key: `sum:${views.map((t) => t.index).join(",")}` };
    sumPlans.set(xs, plan);
    return plan;
  }

  return {
    /**
     * `partial[0..W)` (a pooled buffer, returned with `W`) of `accumulateSum` over `xs`, views into one
     * block in layout order, in one dispatch; null when they are not.
     */
    blockPartialSums(
      xs: readonly Tensor[],
      squares: boolean,
    ): { partial: GPUBuffer; workgroups: number } | null {
      const plan = sumPlan(xs);
      if (!plan) return null;
      const { block, views, key } = plan;
      const table = tableOf(block, key, () => blockSumTable(views));
      const workgroups = table.rows / 4;
      if (workgroups === 0) return null;
      const partial = rt.tensor([workgroups], false).buffer;
      const pipe = rt.pipeline(
        squares ? "block_sumsquares_f32" : "block_sum_f32",
        () => blockSumSquaresShader(squares),
      );
      rt.dispatch(
        pipe,
        [partial, block.buffer, table.buffer, rt.uniform([{ u: workgroups }])],
        grid(workgroups),
      );
      return { partial, workgroups };
    },

    /**
     * AdamW over `slots` in one dispatch when their parameters, gradients and moments are each every
     * tensor of one block (in layout order, with the same layout); false (nothing recorded) otherwise.
     */
    blockAdamw(slots: readonly AdamWSlot[], p: AdamWParams, guard?: StepGuard): boolean {
      const plan = cachedAdamwPlan(slots);
      if (!plan) return false;
      const [params, grads, ms, vs] = plan.blocks;
      const decay = { buffer: plan.decay };
      const c1 = 1 - Math.pow(p.beta1, p.step);
      const c2 = 1 - Math.pow(p.beta2, p.step);
      const values = hyper([p.lr, c1, c2, p.gradScale, guard ? Math.abs(guard.normScale) : 0]);
      const n = params.elements;
      const scalars = [{ u: n }, { f: p.beta1 }, { f: p.beta2 }, { f: p.eps }, { f: p.weightDecay }];
      const chunk = { u: params.alignment / 4 };
      const tensors = [params.buffer, grads.buffer, ms.buffer, vs.buffer, values];
      const groups = grid(Math.ceil(n / ELEMENTWISE_WG));
      if (!guard) {
        rt.dispatch(rt.pipeline("adamw_block_f32", () => adamwShader(false, true)), [
          ...tensors,
          decay.buffer,
          rt.uniform([...scalars, chunk]),
        ], groups);
        return true;
      }
      rt.dispatch(rt.pipeline("adamw_guarded_block_f32", () => adamwShader(true, true)), [
        ...tensors,
        liveTensor(guard.stats, "guard.stats").binding,
        liveTensor(guard.halted, "guard.halted").binding,
        decay.buffer,
        rt.uniform([...scalars, { f: guard.clipNorm }, chunk]),
      ], groups);
      return true;
    },
  };
}
