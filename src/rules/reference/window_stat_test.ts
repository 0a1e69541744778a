/** The write statistic of a window: its values, bounds and gradients. */

import { Rng } from "../../testing/compare.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";
import { windowStatistic, windowStatisticBackward, type WindowStatKind } from "./window_stat.ts";

function rows(flat: Float64Array, n: number, m: number): Float64Array[] {
  return Array.from({ length: n }, (_, j) => flat.subarray(j * m, (j + 1) * m));
}

Deno.test("one feature: both statistics are ||x||^2", () => {
  const x = Float64Array.of(1, -2, 3);
  for (const kind of ["energy", "spectral"] as const) {
    const { value } = windowStatistic(kind, [x]);
    if (Math.abs(value - 14) > 1e-13) throw new Error(`${kind}: ${value}, expected 14`);
  }
});

Deno.test("the spectral statistic lies between Ebar / B_t and Ebar", () => {
  const rng = new Rng(7);
  for (let n = 1; n <= 5; n++) {
    const xs = rows(rng.normals(n * 4), n, 4);
    const ebar = windowStatistic("energy", xs).value;
    const mu = windowStatistic("spectral", xs).value;
    if (!(mu >= ebar / n * (1 - 1e-14) && mu <= ebar * (1 + 1e-14))) {
      throw new Error(`B_t=${n}: mu ${mu} outside [${ebar / n}, ${ebar}]`);
    }
  }
});

Deno.test("parallel features: mu equals Ebar (a rank-one window)", () => {
  const x = Float64Array.of(1, 2, 2);
  const xs = [x, x.map((v) => 2 * v), x.map((v) => -v)];
  const ebar = windowStatistic("energy", xs).value;
  const mu = windowStatistic("spectral", xs).value;
  if (Math.abs(mu - ebar) > 1e-12) throw new Error(`mu ${mu}, expected Ebar ${ebar}`);
});

Deno.test("windowStatisticBackward() matches finite differences for window sizes 1 to 4", () => {
  const rng = new Rng(8);
  for (const kind of ["energy", "spectral"] as WindowStatKind[]) {
    for (let n = 1; n <= 4; n++) {
      const flat = rng.normals(n * 3);
      const stat = windowStatistic(kind, rows(flat, n, 3));
      const dxs = windowStatisticBackward(kind, rows(flat, n, 3), stat, 1.7);
      const analytic = Float64Array.of(...dxs.flatMap((d) => [...d]));
      const f = () => 1.7 * windowStatistic(kind, rows(flat, n, 3)).value;
      assertGradientClose(`${kind} B_t=${n}`, analytic, numericGradient(f, flat, 1e-6));
    }
  }
});

Deno.test("windowStatistic() rejects an empty window", () => {
  let error: unknown;
  try {
    windowStatistic("energy", []);
  } catch (e) {
    error = e;
  }
  if (!(error instanceof RangeError)) throw new Error(`expected a RangeError, got ${error}`);
});
