/**
 * Child process of the addition experiment driver (`run.ts --jobs N`): trains and evaluates ONE run
 * and writes its `result.json` (see `one_run.ts`). Progress goes to stderr, one line at a time.
 *
 * ```
 * deno run --allow-read --allow-write experiments/addition/run_one.ts --plan full [--steps N]
 *   [--seeds N] [--samples N] --variant falcon1a-prefix --seed 0 --runs DIR
 *   [--backend wasm] [--threads 1]
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { backendChoice } from "../../backend_select.ts";
import { trainAndEvaluate } from "./one_run.ts";
import { makePlan, type Plan, type PlanName, type Variant, variantName } from "./plan.ts";

/** An optional non-negative integer flag (`--name`); a RangeError names a value that is not one. */
export function int(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new RangeError(`--${name} must be a non-negative integer, got "${value}"`);
  return Number(value);
}

/** The variant of `plan` named `name`; a RangeError lists the plan's variants otherwise. */
export function planVariant(plan: Plan, name: string | undefined): Variant {
  const variant = plan.variants.find((v) => variantName(v) === name);
  if (!variant) {
    throw new RangeError(
      `plan ${plan.name} has no variant "${name}"; expected one of ${
        plan.variants.map(variantName).join(", ")
      }`,
    );
  }
  return variant;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      plan: { type: "string", default: "full" },
      steps: { type: "string" },
      seeds: { type: "string" },
      samples: { type: "string" },
      variant: { type: "string" },
      seed: { type: "string" },
      runs: { type: "string" },
      backend: { type: "string", default: "wasm" },
      threads: { type: "string" },
    },
    strict: true,
  });
  try {
    const backendName = backendChoice(values.backend);
    if (values.runs === undefined) throw new RangeError("--runs is required");
    const plan = makePlan(values.plan as PlanName, {
      steps: int("steps", values.steps),
      seeds: int("seeds", values.seeds),
      samples: int("samples", values.samples),
    });
    const variant = planVariant(plan, values.variant);
    const seed = int("seed", values.seed) ?? 0;
    await trainAndEvaluate(plan, variant, seed, {
      backend: backendName,
      threads: int("threads", values.threads),
      runsDir: values.runs,
      log: (line) => console.error(line),
    });
  } catch (err) {
    console.error(`run_one: ${err instanceof Error ? err.message : err}`);
    Deno.exit(2);
  }
}
