/**
 * Batch slicing of fast-weight calls: a call whose working memory does not fit one storage binding
 * (the chunk-parallel workspace grows with `B`) runs as consecutive slices of batch rows. Every
 * input with a leading batch dimension is copied slice by slice into its own tensor, the call runs
 * on the slice, and its outputs are copied into place in full-size tensors; the rows of a batch are
 * independent sequences, so the result is the one an unsliced call gives. The copies are
 * `copyBufferToBuffer` ranges on the GPU (a few bytes per element against the kernels' work).
 *
 * @module
 */

import type {
  BackwardOptions,
  Carry,
  FastWeightGrads,
  FastWeightInputs,
  FastWeightOps,
  FastWeightOutputs,
  FormOptions,
  ForwardOptions,
  ForwardSaved,
  Tensor,
} from "../src/rules/backend.ts";
import { shapeSize } from "../src/rules/backend.ts";
import type { RuleConfig } from "../src/rules/config.ts";
import type { GpuRuntime } from "./runtime.ts";
import { disposeTensor, gpuBuffer, type GpuTensor } from "./tensor.ts";
import { SlicedKeptForward } from "./kept_forward.ts";

/** How many batch rows one call may take at once (`>= B` runs the call whole). */
export type SliceRows = (
  config: RuleConfig,
  inputs: FastWeightInputs,
  options: FormOptions,
  backward: boolean,
) => number;

/** The batch slices `[b0, b0 + n)` of `B` rows, `rows` at a time. */
export function batchSlices(B: number, rows: number): { b0: number; n: number }[] {
  if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`rows per slice must be >= 1, got ${rows}`);
  const out: { b0: number; n: number }[] = [];
  for (let b0 = 0; b0 < B; b0 += rows) out.push({ b0, n: Math.min(rows, B - b0) });
  return out;
}

/** `ops` with every call of more than `sliceRows(...)` batch rows run slice by slice. */
export function batchSlicedOps(rt: GpuRuntime, ops: FastWeightOps, sliceRows: SliceRows): FastWeightOps {
  /** Elements per batch row of a tensor with a leading batch dimension. */
  const rowSize = (t: Tensor) => shapeSize(t.shape.slice(1));

  /** Rows `[b0, b0 + n)` of `t` as a tensor of their own. */
  function rowsOf(t: Tensor, name: string, b0: number, n: number): GpuTensor {
    const per = rowSize(t);
    const part = rt.tensor([n, ...t.shape.slice(1)], false);
    if (per * n > 0) {
      rt.encoder().copyBufferToBuffer(gpuBuffer(t, name), b0 * per * 4, part.buffer, 0, per * n * 4);
    }
    return part;
  }

  /** Copy `part` (rows of `whole` from `b0`) into place. */
  function putRows(whole: GpuTensor, part: Tensor, b0: number): void {
    const per = rowSize(whole);
    if (per * part.shape[0] > 0) {
      rt.encoder().copyBufferToBuffer(
        gpuBuffer(part),
        0,
        whole.buffer,
        b0 * per * 4,
        per * part.shape[0] * 4,
      );
    }
  }

  const release = (t: Tensor) => disposeTensor(rt.pool, t);

  /** Copy the outputs of the slice at `b0` into full-batch tensors (made at the first slice) and release them. */
  function placeRows<K extends string>(
    whole: Record<K, GpuTensor> | null,
    parts: Record<K, Tensor>,
    B: number,
    b0: number,
  ): Record<K, GpuTensor> {
    const names = Object.keys(parts) as K[];
    const into = whole ??
      Object.fromEntries(names.map((k) => [k, rt.tensor([B, ...parts[k].shape.slice(1)], false)])) as Record<
        K,
        GpuTensor
      >;
    for (const k of names) {
      putRows(into[k], parts[k], b0);
      release(parts[k]);
    }
    return into;
  }

  /** The inputs of rows `[b0, b0 + n)` and the tensors made for them (released after the call). */
  function sliceInputs(inputs: FastWeightInputs, T: number, b0: number, n: number) {
    const made: GpuTensor[] = [];
    const take = (t: Tensor, name: string) => {
      const part = rowsOf(t, name, b0, n);
      made.push(part);
      return part;
    };
    const c = inputs.carry;
    const carry: Carry | undefined = c
      ? {
        state: take(c.state, "carry.state"),
        lastKey: take(c.lastKey, "carry.lastKey"),
        windowX: take(c.windowX, "carry.windowX"),
        windowY: take(c.windowY, "carry.windowY"),
        windowCount: c.windowCount.slice(b0, b0 + n),
      }
      : undefined;
    const part: FastWeightInputs = {
      q: take(inputs.q, "q"),
      k: take(inputs.k, "k"),
      v: take(inputs.v, "v"),
      beta: take(inputs.beta, "beta"),
      lambdabar: take(inputs.lambdabar, "lambdabar"),
      starts: inputs.starts?.subarray(b0 * T, (b0 + n) * T),
      s0: inputs.s0 ? take(inputs.s0, "s0") : undefined,
      carry,
    };
    return { part, made };
  }

  return {
    fastWeightForward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      options: ForwardOptions = {},
    ): FastWeightOutputs {
      const [B, T] = inputs.q.shape;
      const keep = options.keepForBackward ?? false;
      // a kept forward is sliced as its backward will be (its workspace is the backward's)
      const rows = sliceRows(config, inputs, options, keep);
      if (rows >= B) {
        const whole = ops.fastWeightForward(config, inputs, options);
        if (!whole.saved) return whole;
        return { ...whole, saved: new SlicedKeptForward(inputs.q, [{ b0: 0, n: B, saved: whole.saved }]) };
      }
      let outs: Record<"o" | "state" | "lastKey" | "windowX" | "windowY", GpuTensor> | null = null;
      const windowCount = new Int32Array(B);
      const kept: { b0: number; n: number; saved: ForwardSaved | undefined }[] = [];
      for (const { b0, n } of batchSlices(B, rows)) {
        const { part, made } = sliceInputs(inputs, T, b0, n);
        const { o, carry: { windowCount: counts, ...state }, saved } = ops.fastWeightForward(
          config,
          part,
          options,
        );
        outs = placeRows(outs, { o, ...state }, B, b0);
        windowCount.set(counts, b0);
        kept.push({ b0, n, saved });
        made.forEach(release);
      }
      const { o, ...state } = outs!;
      const carry = { ...state, windowCount };
      if (!kept.some((k) => k.saved)) return { o, carry };
      return { o, carry, saved: new SlicedKeptForward(inputs.q, kept) };
    },

    fastWeightBackward(
      config: RuleConfig,
      inputs: FastWeightInputs,
      dO: Tensor,
      options: BackwardOptions = {},
    ): FastWeightGrads {
      const [B, T] = inputs.q.shape;
      const rows = sliceRows(config, inputs, options, true);
      const kept = keptSlices(options.saved, inputs.q, batchSlices(B, Math.min(rows, B)));
      try {
        if (rows >= B) {
          return ops.fastWeightBackward(config, inputs, dO, { ...options, saved: kept?.[0].saved });
        }
        // checked here, not per slice, so that the error names the call's shapes
        const want = [B, T, inputs.q.shape[2], inputs.v.shape[3]];
        if (dO.shape.length !== 4 || dO.shape.some((d, i) => d !== want[i])) {
          throw new RangeError(`dO has shape [${dO.shape}], expected [${want}]`);
        }
        let result: Record<Exclude<keyof FastWeightGrads, "ds0">, GpuTensor> | null = null;
        // present when the backward computes dS0 (every slice alike)
        let ds0: { ds0: GpuTensor } | null = null;
        for (const [i, { b0, n }] of batchSlices(B, rows).entries()) {
          const { part, made } = sliceInputs(inputs, T, b0, n);
          const dOPart = rowsOf(dO, "dO", b0, n);
          const partOptions = { ...options, saved: kept?.[i].saved };
          const { ds0: ds0Part, ...grads } = ops.fastWeightBackward(config, part, dOPart, partOptions);
          result = placeRows(result, grads, B, b0);
          if (ds0Part) ds0 = placeRows(ds0, { ds0: ds0Part }, B, b0);
          release(dOPart);
          made.forEach(release);
        }
        return { ...result!, ...ds0 };
      } catch (e) {
        // what a failed backward did not take is released (a part it took, it released)
        kept?.forEach((k) => k.saved?.dispose());
        throw e;
      }
    },
  };
}

/**
 * The per-slice parts of a saved forward of `q`, checked against the backward's `slices` (null when none
 * was given); a saved forward of another backend, of other inputs or sliced otherwise is an error.
 */
function keptSlices(saved: ForwardSaved | undefined, q: Tensor, slices: { b0: number; n: number }[]) {
  if (saved === undefined) return null;
  if (!(saved instanceof SlicedKeptForward)) {
    throw new TypeError("options.saved is not from a forward of this webgpu backend");
  }
  const parts = saved.take(q);
  if (parts.length !== slices.length || parts.some((p, i) => p.b0 !== slices[i].b0 || p.n !== slices[i].n)) {
    parts.forEach((p) => p.saved?.dispose());
    throw new RangeError(
      `saved forward ran in ${parts.length} batch slices, this backward in ${slices.length}: ` +
        "give the backward the options of the forward",
    );
  }
  return parts;
}
