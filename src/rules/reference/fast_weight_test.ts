/**
 * The batched multi-head calls of the float64 reference (`fast_weight.ts`): a backward with `s0Grad: false`
 * returns no `ds0` and every other gradient as the backward with it, every rule in every form.
 */

import { FORMS, ruleConfig, RULES } from "../config.ts";
import { assertS0GradOptOut } from "../../testing/s0_grad.ts";
import { createRefBackend } from "./backend.ts";

Deno.test("reference backward without dS0: no ds0, every other gradient identical (every rule and form)", async () => {
  const ref = createRefBackend();
  for (const rule of RULES) {
    for (const form of FORMS) await assertS0GradOptOut(ref, ruleConfig(rule), { form, chunkSize: 3 });
  }
});
