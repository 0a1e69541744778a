/**
 * Validation of a fast-weight call, shared by every backend (reference, WASM, WebGPU) so that they
 * accept and reject the same calls with the same messages: the shapes of the inputs against each
 * other, the per-head constants, the form and the chunk size. Errors are `RangeError`s naming the
 * field and the value.
 *
 * Edge cases, one behaviour everywhere: `T = 0` is rejected (`T must be >= 1`), as the vector
 * format does; `chunkSize` defaults to 64 and must be an integer >= 1 in every form (it is the
 * checkpoint interval of the recurrent backward); `form` defaults to `recurrent`.
 *
 * @module
 */

import type { FastWeightInputs, FormOptions, Tensor } from "./backend.ts";
import { type Form, FORMS, isPerColumnRule, type RuleConfig } from "./config.ts";

/** Sizes read from the inputs, checked against each other. */
export interface FastWeightDims {
  /** Batch rows. */
  B: number;
  /** Positions. */
  T: number;
  /** Heads. */
  H: number;
  /** Key size. */
  dk: number;
  /** Value size. */
  dv: number;
}

/** Default `chunkSize` of {@linkcode FormOptions}. */
export const DEFAULT_CHUNK_SIZE = 64;

/** Throw a RangeError naming `name` unless tensor `t` has exactly `shape`. */
export function expectShape(name: string, t: Tensor, shape: readonly number[]): void {
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new RangeError(`${name} has shape [${t.shape}], expected [${shape}]`);
  }
}

/** Check the shapes of a fast-weight call (inputs, carry, per-head constants) and return its sizes. */
export function fastWeightDims(config: RuleConfig, inputs: FastWeightInputs): FastWeightDims {
  if (inputs.q.shape.length !== 4) throw new RangeError(`q must be [B, T, H, Dk], got [${inputs.q.shape}]`);
  const [B, T, H, dk] = inputs.q.shape;
  if (inputs.v.shape.length !== 4) throw new RangeError(`v must be [B, T, H, Dv], got [${inputs.v.shape}]`);
  const dv = inputs.v.shape[3];
  if (T < 1) throw new RangeError(`T must be >= 1, got ${T}`);
  expectShape("k", inputs.k, [B, T, H, dk]);
  expectShape("v", inputs.v, [B, T, H, dv]);
  expectShape("beta", inputs.beta, isPerColumnRule(config.rule) ? [B, T, H, dv] : [B, T, H]);
  expectShape("lambdabar", inputs.lambdabar, [B, T, H]);
  if (inputs.starts && inputs.starts.length !== B * T) {
    throw new RangeError(`starts has length ${inputs.starts.length}, expected B*T = ${B * T}`);
  }
  if (inputs.s0) expectShape("s0", inputs.s0, [B, H, dk, dv]);
  if (inputs.carry) {
    const slots = Math.max(0, config.window - 1);
    expectShape("carry.state", inputs.carry.state, [B, H, dk, dv]);
    expectShape("carry.lastKey", inputs.carry.lastKey, [B, H, dk]);
    expectShape("carry.windowX", inputs.carry.windowX, [B, H, slots, dk]);
    expectShape("carry.windowY", inputs.carry.windowY, [B, H, slots, dv]);
  }
  if (config.mambaA && config.mambaA.length !== H) {
    throw new RangeError(`mambaA has ${config.mambaA.length} entries, expected one per head (${H})`);
  }
  if (config.retnetHeads && config.retnetHeads.length !== H) {
    throw new RangeError(
      `retnetHeads has ${config.retnetHeads.length} entries, expected one per head (${H})`,
    );
  }
  return { B, T, H, dk, dv };
}

/** The form of a call (default `recurrent`); a RangeError naming an unknown one. */
export function formOf(options: FormOptions): Form {
  const form = options.form ?? "recurrent";
  if (!(FORMS as readonly string[]).includes(form)) {
    throw new RangeError(`unknown form "${form}"; expected one of ${FORMS.join(", ")}`);
  }
  return form;
}

/** The chunk size of a call (default 64); a RangeError unless it is an integer >= 1. */
export function chunkSizeOf(options: FormOptions): number {
  return checkChunkSize(options.chunkSize ?? DEFAULT_CHUNK_SIZE);
}

/** `chunkSize` itself when it is an integer >= 1; a RangeError naming the value otherwise. */
export function checkChunkSize(chunkSize: number): number {
  if (!Number.isInteger(chunkSize) || chunkSize < 1) {
    throw new RangeError(`chunkSize must be an integer >= 1, got ${chunkSize}`);
  }
  return chunkSize;
}
