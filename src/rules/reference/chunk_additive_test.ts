/** The banded window weights `M = Gam diag(g) H` of the additive chunk form. */

import { assertClose, Rng } from "../../testing/compare.ts";
import { matmul, mul, Tape } from "./autodiff.ts";
import { checkTapeGradient } from "./autodiff_check.ts";
import { windowWeights } from "./chunk_additive.ts";
import { chunkLayout, planSequence } from "./chunk_layout.ts";
import { ruleConfig } from "../config.ts";
import { randomHeadInputs } from "./chunk_random.ts";

const rng = new Rng(11);

function layoutOf() {
  const config = ruleConfig("falcon3a", { window: 3 });
  const inputs = randomHeadInputs(config, { T: 12, dk: 2, dv: 2, seed: 3, starts: [6], carry: true });
  return chunkLayout(planSequence(config, inputs), 4, 5);
}

Deno.test("windowWeights equals the dense product Gam diag(g) H, including pairs before the chunk", () => {
  const layout = layoutOf();
  const { n, np } = layout;
  const tape = new Tape();
  const gam = tape.constant(n, n, rng.normals(n * n));
  const g = tape.constant(n, 1, rng.normals(n));
  const dense = matmul(gam, mul(tape.constant(n, np, layout.H), g));
  assertClose("M", windowWeights(gam, g, layout).value, dense.value, { rtol: 1e-14, atol: 1e-15 });
  // the B-1 = 2 pairs before the chunk must be written by some step of it
  if (!layout.H.some((h, k) => h !== 0 && k % np < 2)) {
    throw new Error("the layout has no pair before the chunk: the case checks nothing");
  }
});

Deno.test("windowWeights has exact gradients", () => {
  const layout = layoutOf();
  const { n } = layout;
  checkTapeGradient(
    "windowWeights",
    [[n, n, rng.normals(n * n)], [n, 1, rng.normals(n)]],
    ([gam, g]) => windowWeights(gam, g, layout),
  );
});
