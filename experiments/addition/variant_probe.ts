/**
 * One probe run of the addition experiment: a plan's variant with changed model fields (today the
 * Falcon-3/3A window), trained and evaluated exactly like a plan run (`one_run.ts`), under its own
 * name (`falcon3a-prefix-w2-s0`), so it never mixes with the plan's runs. For questions a plan run
 * raises (docs/results/addition.md: does falcon3a under prefix alignment learn answer place 0 with
 * a window of 2?). Imports nothing from npm (runs on the GPU machine beside `run_one.ts`):
 *
 * ```
 * deno run --allow-read --allow-write experiments/addition/variant_probe.ts --plan gpu \
 *   --variant falcon3a-prefix --window 2 [--steps N] [--seed 0] --runs DIR [--backend webgpu]
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { backendChoice } from "../../backend_select.ts";
import { trainAndEvaluate } from "./one_run.ts";
import { int, planVariant } from "./run_one.ts";
import {
  FULL_VARIANTS,
  makePlan,
  type Plan,
  type PlanName,
  type Variant,
  variantName,
  windowVariant,
} from "./plan.ts";

/** What a probe changes in a variant. */
export interface ProbeChanges {
  /** Falcon-3/3A window `B` (SPEC section 3). */
  readonly window?: number;
}

/**
 * `base` with `changes` applied to its model fields and a name that says so
 * (`falcon3a-prefix` with window 2 is `falcon3a-prefix-w2`). A RangeError names a change the
 * variant cannot take (a window for a rule without one) or a value out of range.
 */
export function probeVariant(base: Variant, changes: ProbeChanges): Variant {
  const { window } = changes;
  if (window === undefined) throw new RangeError("variant_probe: nothing to change (give --window)");
  if (!Number.isInteger(window) || window < 1) {
    throw new RangeError(`variant_probe: --window must be an integer >= 1, got ${window}`);
  }
  if (base.mixer !== "falcon3" && base.mixer !== "falcon3a") {
    throw new RangeError(`variant_probe: --window applies to falcon3 and falcon3a, not ${base.mixer}`);
  }
  return windowVariant(base, window);
}

/**
 * The variant a probe changes: the plan's own of that name, else the unchanged one of the full list
 * (the `gpu` plan runs Falcon-3A at a window of 2 as `falcon3a-prefix-w2`; `falcon3a-prefix` names the
 * default window there too). Otherwise the plan's RangeError listing its variants.
 */
export function probeBase(plan: Plan, name: string | undefined): Variant {
  return FULL_VARIANTS.find((v) =>
    variantName(v) === name && !plan.variants.some((p) => variantName(p) === name)
  ) ??
    planVariant(plan, name);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      plan: { type: "string", default: "gpu" },
      variant: { type: "string" },
      window: { type: "string" },
      steps: { type: "string" },
      samples: { type: "string" },
      seed: { type: "string", default: "0" },
      runs: { type: "string" },
      backend: { type: "string", default: "webgpu" },
      threads: { type: "string" },
    },
    strict: true,
  });
  try {
    const backendName = backendChoice(values.backend);
    if (values.runs === undefined) throw new RangeError("--runs is required");
    const plan = makePlan(values.plan as PlanName, {
      steps: int("steps", values.steps),
      samples: int("samples", values.samples),
    });
    const variant = probeVariant(probeBase(plan, values.variant), { window: int("window", values.window) });
    await trainAndEvaluate(plan, variant, int("seed", values.seed) ?? 0, {
      backend: backendName,
      threads: int("threads", values.threads),
      runsDir: values.runs,
      log: (line) => console.error(line),
    });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    console.error(message.startsWith("variant_probe:") ? message : `variant_probe: ${message}`);
    Deno.exit(2);
  }
}
