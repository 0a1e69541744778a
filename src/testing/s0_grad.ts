/**
 * The check of `BackwardOptions.s0Grad` that every backend runs: a backward with `s0Grad: false` returns
 * no `ds0`, and every other gradient bit for bit as the backward with `dS0` does. Cases (by default at the shared
 * small sizes, {@linkcode SMALL_HEADS}, chunk size {@linkcode SMALL_CHUNK}): `S0` given with packed sequence starts;
 * packed starts without `S0` (as the model runs); a call continuing from a carry, with `S0` and a start inside
 * it. Each backward without `dS0` runs twice: recomputing the forward and given a kept forward
 * (`keepForBackward`; a backend that keeps nothing recomputes there too).
 *
 * @module
 */

import { type Backend, type FastWeightOps, type FormOptions, gradOf, type Tensor } from "../rules/backend.ts";
import type { RuleConfig } from "../rules/config.ts";
import { type FastWeightCase, fastWeightCaseData, fastWeightCaseInputs } from "./parity.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "./shapes.ts";

/** The gradients besides `ds0`, each compared bit for bit. */
const OTHER_GRADS = ["dq", "dk", "dv", "dbeta", "dlambdabar", "dCarryState"] as const;

/** Positions of the cases, and where the carried case's second call begins (a start follows inside it). */
const T = 11;
const CARRY_FROM = 3;

/** The cases: which inputs, and whether the call continues from a carry of `[0, CARRY_FROM)`. */
const CASES = [
  { label: "S0 and packed starts", s0: true, carry: false },
  { label: "packed starts without S0", s0: false, carry: false },
  { label: "from a carry, with S0 and a start inside", s0: true, carry: true },
] as const;

/** Throw unless `a` and `b` hold the same floats. */
async function expectBitIdentical(backend: Backend, a: Tensor, b: Tensor, what: string): Promise<void> {
  const [x, y] = [await backend.read(a), await backend.read(b)];
  const bad = x.findIndex((v, i) => !Object.is(v, y[i]));
  if (x.length !== y.length || bad >= 0) {
    throw new Error(
      `${what}: without dS0 ${x[bad]} at ${bad} (of ${x.length}), with dS0 ${y[bad]} (of ${y.length})`,
    );
  }
}

/**
 * Run the cases of `config` in `options`' form at head sizes `heads` on `ops` (default `backend`'s own ops),
 * with `backend` for uploads and reads; throws naming the case and gradient that differ, or a `ds0` returned
 * without `dS0`.
 */
export async function assertS0GradOptOut(
  backend: Backend,
  config: RuleConfig,
  options: FormOptions,
  ops: FastWeightOps = backend,
  heads: { H: number; dk: number; dv: number } = SMALL_HEADS,
): Promise<void> {
  for (const [i, { label, s0, carry }] of CASES.entries()) {
    const c: FastWeightCase = {
      rule: config.rule,
      alignment: config.alignment,
      form: options.form ?? "recurrent",
      chunkSize: options.chunkSize ?? SMALL_CHUNK,
      B: 2,
      T,
      ...heads,
      packed: true,
      s0,
      split: false,
      clampEveryStep: false,
      seed: 61 + i,
    };
    const data = fastWeightCaseData(c);
    const from = carry ? CARRY_FROM : 0;
    const inputs = {
      ...fastWeightCaseInputs(backend, data, c, from, T),
      carry: carry
        ? ops.fastWeightForward(config, fastWeightCaseInputs(backend, data, c, 0, from), options).carry
        : undefined,
    };
    // any output gradient of the call's shape
    const dOShape = [c.B, T - from, c.H, c.dv];
    const dO = backend.fromArray(data.dO.subarray(0, dOShape.reduce((a, b) => a * b)), dOShape);
    const { saved } = ops.fastWeightForward(config, inputs, { ...options, keepForBackward: true });
    const withoutKept = ops.fastWeightBackward(config, inputs, dO, { ...options, saved, s0Grad: false });
    const without = ops.fastWeightBackward(config, inputs, dO, { ...options, s0Grad: false });
    const withS0 = ops.fastWeightBackward(config, inputs, dO, options);
    const tag = `${config.rule} ${config.alignment} ${c.form}: ${label}`;
    gradOf(withS0, "ds0");
    for (const [name, grads] of [["recomputed", without], ["kept forward", withoutKept]] as const) {
      if (grads.ds0 !== undefined) throw new Error(`${tag} (${name}): s0Grad: false returned a ds0`);
      for (const g of OTHER_GRADS) {
        await expectBitIdentical(backend, grads[g], withS0[g], `${tag} (${name}) ${g}`);
      }
    }
  }
}
