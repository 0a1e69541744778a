/**
 * Seeded, deterministic parameter initialisation. Each parameter draws from its own stream, seeded
 * by the model seed and the parameter's name, so adding or removing one parameter leaves the
 * initial values of every other parameter unchanged.
 *
 * @module
 */

import type { Backend } from "../rules/backend.ts";
import { Rng } from "../random.ts";
import type { ParamSpec } from "./params.ts";
import type { NamedParam } from "./types.ts";

/** FNV-1a hash of `name`, mixed with `seed`: the seed of a parameter's stream. */
export function paramSeed(seed: number, name: string): number {
  let h = (0x811c9dc5 ^ (seed >>> 0)) >>> 0;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** Initial values of one parameter (float64, row-major). */
export function initialValues(spec: ParamSpec, seed: number): Float64Array {
  const size = spec.shape.reduce((a, b) => a * b, 1);
  const init = spec.init;
  switch (init.kind) {
    case "constant":
      return new Float64Array(size).fill(init.value);
    case "normal":
      return new Rng(paramSeed(seed, spec.name)).normals(size, init.std);
    case "uniform":
      return new Rng(paramSeed(seed, spec.name)).uniforms(size, -init.bound, init.bound);
  }
}

/**
 * Allocate every parameter of `specs` on `backend` with its initial value and a zero gradient. Where
 * the backend has `zerosBlock`, the values are one block and the gradients another (in the order of
 * `specs`), so the optimizer's ops over all of them run in one pass; the values are the same.
 */
export function createParameters(backend: Backend, specs: readonly ParamSpec[], seed: number): NamedParam[] {
  if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  if (!backend.zerosBlock) {
    return specs.map((spec) => ({
      name: spec.name,
      value: backend.fromArray(initialValues(spec, seed), spec.shape),
      grad: backend.zeros(spec.shape),
      decay: spec.decay,
    }));
  }
  const shapes = specs.map((spec) => spec.shape);
  const values = backend.zerosBlock(shapes);
  const grads = backend.zerosBlock(shapes);
  return specs.map((spec, i) => {
    const initial = backend.fromArray(initialValues(spec, seed), spec.shape);
    backend.copy(values[i], initial);
    backend.dispose(initial);
    return { name: spec.name, value: values[i], grad: grads[i], decay: spec.decay };
  });
}
