/**
 * Run one test vector through a backend and measure how far every array is from the file.
 *
 * @module
 */

import {
  type Backend,
  type FastWeightInputs,
  type FormOptions,
  gradOf,
  type Tensor,
} from "../rules/backend.ts";
import { isPerColumnRule } from "../rules/config.ts";
import { maxAbsDiff, relativeL2 } from "../testing/compare.ts";
import type { VectorCase } from "../vectors/load.ts";

/** Tolerances (relative L2 per array) of `falcon verify` by backend precision (SPEC section 4). */
export const VERIFY_TOLERANCE = {
  f64: { forward: 1e-9, backward: 1e-9 },
  f32: { forward: 1e-5, backward: 1e-4 },
} as const;

/** How far one array is from the expected one. */
export interface ArrayCheck {
  /** `o`, `S_final`, `dq`, ... */
  readonly name: string;
  /** Largest absolute difference. */
  readonly maxAbs: number;
  /** Relative L2 error `||a - e|| / ||e||`. */
  readonly relL2: number;
  /** The tolerance on `relL2`. */
  readonly tolerance: number;
  /** Within tolerance (and finite). */
  readonly ok: boolean;
}

/** The result of one vector. */
export interface VectorCheck {
  /** File name. */
  readonly name: string;
  /** One entry per compared array. */
  readonly arrays: ArrayCheck[];
  /** Every array within tolerance. */
  readonly ok: boolean;
}

function check(
  name: string,
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tolerance: number,
): ArrayCheck {
  const relL2 = relativeL2(actual, expected);
  const maxAbs = maxAbsDiff(actual, expected).value;
  return { name, maxAbs, relL2, tolerance, ok: relL2 <= tolerance && Number.isFinite(maxAbs) };
}

/** The vector's single head as a `[1, T, 1, D]` call of `backend`. */
export function vectorInputs(backend: Backend, vector: VectorCase): FastWeightInputs {
  const { T, dk, dv } = vector.head;
  const h = vector.head;
  return {
    q: backend.fromArray(h.q, [1, T, 1, dk]),
    k: backend.fromArray(h.k, [1, T, 1, dk]),
    v: backend.fromArray(h.v, [1, T, 1, dv]),
    beta: backend.fromArray(h.beta, isPerColumnRule(vector.rule) ? [1, T, 1, dv] : [1, T, 1]),
    lambdabar: backend.fromArray(h.lambdabar, [1, T, 1]),
    starts: h.starts,
    s0: backend.fromArray(h.s0, [1, 1, dk, dv]),
  };
}

/** Run `vector` forward and backward on `backend` and compare every array with the file. */
export async function verifyVector(
  backend: Backend,
  vector: VectorCase,
  options: FormOptions = {},
): Promise<VectorCheck> {
  const tol = VERIFY_TOLERANCE[backend.dtype];
  const config = vector.config;
  const inputs = vectorInputs(backend, vector);
  const out = backend.fastWeightForward(config, inputs, options);
  const { T, dv } = vector.head;
  const grads = backend.fastWeightBackward(
    config,
    inputs,
    backend.fromArray(vector.dO, [1, T, 1, dv]),
    options,
  );
  const read = (t: Tensor) => backend.read(t);
  const e = vector.expected;
  const arrays = [
    check("o", await read(out.o), e.o, tol.forward),
    check("S_final", await read(out.carry.state), e.sFinal, tol.forward),
    check("dq", await read(grads.dq), e.grads.q, tol.backward),
    check("dk", await read(grads.dk), e.grads.k, tol.backward),
    check("dv", await read(grads.dv), e.grads.v, tol.backward),
    check("dbeta", await read(grads.dbeta), e.grads.beta, tol.backward),
    check("dlambdabar", await read(grads.dlambdabar), e.grads.lambdabar, tol.backward),
    check("dS0", await read(gradOf(grads, "ds0")), e.grads.S0, tol.backward),
  ];
  return { name: vector.name, arrays, ok: arrays.every((a) => a.ok) };
}
