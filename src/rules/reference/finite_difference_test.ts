/** Central differences and the gradient comparison used by the backward checks. */

import { assertGradientClose, numericGradient } from "./finite_difference.ts";

Deno.test("numericGradient() recovers the gradient of a cubic and restores x", () => {
  const x = Float64Array.of(0.5, -1.5, 2);
  const g = numericGradient(() => x[0] ** 3 + x[0] * x[1] + Math.sin(x[2]), x);
  assertGradientClose("cubic", g, [3 * 0.25 - 1.5, 0.5, Math.cos(2)], 1e-8, 1e-9);
  if (x[0] !== 0.5 || x[1] !== -1.5 || x[2] !== 2) throw new Error(`x changed to ${x}`);
});

Deno.test("assertGradientClose() throws on a wrong gradient, naming the array and the index", () => {
  let error: unknown;
  try {
    assertGradientClose("dq", [1, 2, 3], [1, 2.1, 3]);
  } catch (e) {
    error = e;
  }
  if (!(error instanceof Error) || !error.message.includes("dq") || !error.message.includes("index 1")) {
    throw new Error(`expected an error naming dq and index 1, got ${error}`);
  }
});
