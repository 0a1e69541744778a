/**
 * Test assertions for the eval tests (JSR's `@std/assert` is out of reach; `node:assert` is built in).
 *
 * @module
 */

import assert from "node:assert/strict";

/** Deep strict equality. */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  assert.deepStrictEqual(actual, expected, message);
}

/** `|actual - expected| <= tolerance`, naming both values on failure. */
export function assertAlmostEquals(actual: number, expected: number, tolerance: number): void {
  if (!(Math.abs(actual - expected) <= tolerance)) {
    throw new Error(`expected ${expected} within ${tolerance}, got ${actual}`);
  }
}

/** `f` throws an instance of `type` whose message contains `includes`; returns the error. */
export function assertThrows(
  f: () => unknown,
  type: new (...args: never[]) => Error,
  includes: string,
): Error {
  try {
    f();
  } catch (err) {
    if (!(err instanceof type)) throw new Error(`expected a ${type.name}, got ${err}`);
    if (!err.message.includes(includes)) {
      throw new Error(`expected "${includes}" in the message "${err.message}"`);
    }
    return err;
  }
  throw new Error(`expected a ${type.name} containing "${includes}", nothing was thrown`);
}

/** Async variant of {@linkcode assertThrows}. */
export async function assertRejects(
  f: () => Promise<unknown>,
  type: new (...args: never[]) => Error,
  includes: string,
): Promise<Error> {
  try {
    await f();
  } catch (err) {
    if (!(err instanceof type)) throw new Error(`expected a ${type.name}, got ${err}`);
    if (!err.message.includes(includes)) {
      throw new Error(`expected "${includes}" in the message "${err.message}"`);
    }
    return err;
  }
  throw new Error(`expected a ${type.name} containing "${includes}", nothing was rejected`);
}
