/**
 * What a chunk-parallel forward of the `webgpu` backend keeps for its backward
 * (`ForwardOptions.keepForBackward`): the head-major q/k/v workspace and the chunk workspace, laid out as
 * the backward's, with every state, solve and transition the backward would otherwise recompute.
 * The backward of the same call takes them once ({@linkcode KeptForward.take}) and releases them.
 *
 * @module
 */

import type { FormOptions, ForwardSaved, Tensor } from "../src/rules/backend.ts";
import type { RuleConfig } from "../src/rules/config.ts";
import { chunkSizeOf, type FastWeightDims } from "../src/rules/validate.ts";
import { disposeTensor, type GpuBufferPool, type GpuTensor } from "./tensor.ts";

/** What identifies a call: rule, alignment, sizes, form and chunk size. */
export function keptCallKey(config: RuleConfig, d: FastWeightDims, options: FormOptions): string {
  return `${config.rule} (${config.alignment}) at B = ${d.B}, T = ${d.T}, H = ${d.H}, Dk = ${d.dk}, ` +
    `Dv = ${d.dv}, form ${options.form ?? "recurrent"}, chunkSize = ${chunkSizeOf(options)}`;
}

/** The kept workspaces of one whole-batch chunk forward. */
export class KeptForward implements ForwardSaved {
  #parts: { ws: GpuTensor; cw: GpuTensor } | null;

  /** Keep `ws` (head-major workspace) and `cw` (chunk workspace) of the call `key`, owned from now on. */
  constructor(
    readonly key: string,
    ws: GpuTensor,
    cw: GpuTensor,
    private readonly pool: GpuBufferPool,
  ) {
    this.#parts = { ws, cw };
  }

  /** Hand the workspaces to the backward of call `key` (once; the caller releases them). */
  take(key: string): { ws: GpuTensor; cw: GpuTensor } {
    if (!this.#parts) throw new Error(`saved forward of ${this.key} was already used or disposed`);
    if (key !== this.key) throw new RangeError(`saved forward is of ${this.key}, not of ${key}`);
    const parts = this.#parts;
    this.#parts = null;
    return parts;
  }

  /** Release the workspaces unless a backward took them. */
  dispose(): void {
    if (!this.#parts) return;
    disposeTensor(this.pool, this.#parts.ws);
    disposeTensor(this.pool, this.#parts.cw);
    this.#parts = null;
  }
}

/**
 * What a forward kept, per batch slice (`fast_weight_slices.ts`; one slice when the call ran whole), with
 * the `q` it was computed from, so that a backward of other inputs is an error rather than wrong gradients.
 */
export class SlicedKeptForward implements ForwardSaved {
  #parts: { b0: number; n: number; saved: ForwardSaved | undefined }[] | null;

  /** Slices `parts` of the forward of `q`; owned from now on. */
  constructor(readonly q: Tensor, parts: { b0: number; n: number; saved: ForwardSaved | undefined }[]) {
    this.#parts = parts;
  }

  /** The slices, for the backward of `q` (once; each slice's backward disposes of its part). */
  take(q: Tensor): { b0: number; n: number; saved: ForwardSaved | undefined }[] {
    if (!this.#parts) throw new Error("saved forward was already used or disposed");
    if (q !== this.q) {
      throw new RangeError("saved forward is of other inputs (another q tensor) than this backward's");
    }
    const parts = this.#parts;
    this.#parts = null;
    return parts;
  }

  /** Dispose of every slice's part unless a backward took them. */
  dispose(): void {
    for (const p of this.#parts ?? []) p.saved?.dispose();
    this.#parts = null;
  }
}
