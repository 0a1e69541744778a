/**
 * Which operand digits an addition model's answer places read (docs/results/addition.md, the falcon3a
 * place-0 failure): for random sums of `--digits`-digit operands, the teacher-forced distribution over
 * the ten digits at each answer place in `--places` is taken, then one operand digit at a time is moved
 * by 5 (mod 10; the leading digit is left alone so the operand keeps its length) and the sum's answer
 * rewritten; the total-variation distance between the two distributions, averaged over `--trials` sums,
 * is how much that place depends on that digit (0: not at all, 1: completely). A place that computes
 * its digit reads `a_p` and `b_p` (distance ~1) and the carry's digits `a_{p-1}`, `b_{p-1}` in part.
 *
 * Imports nothing from npm:
 *
 * ```
 * deno run --allow-read experiments/addition/place_sensitivity.ts [--digits 8] [--trials 6] \
 *   [--places 0,1,2,3] [--seed 1] [--backend ref] CHECKPOINT
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { backendChoice, releaseBackend, selectBackend } from "../../backend_select.ts";
import type { ScoringModel } from "../../src/eval/evaluate.ts";
import { loadEvalCheckpoint } from "../../src/eval/load.ts";
import {
  type AdditionConfig,
  additionConfig,
  additionExample,
  additionText,
  randomOperand,
} from "../../src/tasks/addition.ts";
import { DataRng } from "../../src/tasks/rng.ts";

/** Options of {@linkcode placeSensitivity}. */
export interface SensitivityOptions {
  /** Digits of both operands. */
  readonly digits: number;
  /** Random sums averaged over. */
  readonly trials: number;
  /** Answer places measured. */
  readonly places: readonly number[];
  /** Seed of the sums. */
  readonly seed: number;
}

/** How much one answer place depends on each operand digit: `a[i]`, `b[i]` for operand place `i`. */
export interface PlaceSensitivity {
  /** The answer place. */
  readonly place: number;
  /** Mean total-variation distance per place of the first operand (the leading place is not moved: NaN). */
  readonly a: readonly number[];
  /** The same for the second operand. */
  readonly b: readonly number[];
}

/** The ten digits' probabilities at each answer place of `places`, teacher-forced, for `a + b`. */
async function digitDistributions(
  model: ScoringModel,
  config: AdditionConfig,
  a: string,
  b: string,
  places: readonly number[],
): Promise<number[][]> {
  const example = additionExample(additionText(a, b, config, 0), config);
  const T = example.tokens.length;
  const starts = new Uint8Array(T);
  starts[0] = 1;
  const logits = await model.logits({ B: 1, T, ids: Int32Array.from(example.tokens), starts });
  const V = logits.length / T;
  return places.map((place) => {
    const at = example.places?.indexOf(place) ?? -1;
    if (at < 1) {
      throw new RangeError(`place_sensitivity: a ${a.length}-digit sum has no answer place ${place}`);
    }
    const row = Array.from(logits.subarray((at - 1) * V, (at - 1) * V + 10));
    const top = Math.max(...row);
    const e = row.map((x) => Math.exp(x - top));
    const z = e.reduce((s, x) => s + x, 0);
    return e.map((x) => x / z);
  });
}

/** The dependence of each answer place in `options.places` on every operand digit (see the module doc). */
export async function placeSensitivity(
  model: ScoringModel,
  config: AdditionConfig,
  options: SensitivityOptions,
): Promise<PlaceSensitivity[]> {
  const { digits, trials, places } = options;
  const rng = new DataRng(options.seed);
  const sums = places.map(() => ({ a: new Array(digits).fill(0), b: new Array(digits).fill(0) }));
  for (let t = 0; t < trials; t++) {
    const operands = { a: randomOperand(rng, digits), b: randomOperand(rng, digits) };
    const base = await digitDistributions(model, config, operands.a, operands.b, places);
    for (const which of ["a", "b"] as const) {
      for (let i = 0; i < digits - 1; i++) {
        const s = operands[which];
        const k = digits - 1 - i; // operands are written most significant first
        const moved = s.slice(0, k) + String((Number(s[k]) + 5) % 10) + s.slice(k + 1);
        const changed = { ...operands, [which]: moved };
        const got = await digitDistributions(model, config, changed.a, changed.b, places);
        got.forEach((g, p) => {
          sums[p][which][i] += 0.5 * g.reduce((acc, x, j) => acc + Math.abs(x - base[p][j]), 0);
        });
      }
    }
  }
  return places.map((place, p) => ({
    place,
    a: sums[p].a.map((s, i) => (i === digits - 1 ? NaN : s / trials)),
    b: sums[p].b.map((s, i) => (i === digits - 1 ? NaN : s / trials)),
  }));
}

/** One line per place: `place P: a0 .. b0 ..` with two decimals. */
export function formatSensitivity(rows: readonly PlaceSensitivity[]): string {
  const cells = (name: string, xs: readonly number[]) =>
    xs.flatMap((x, i) => (Number.isNaN(x) ? [] : [`${name}${i} ${x.toFixed(2)}`]));
  return rows.map((r) => `place ${r.place}: ${[...cells("a", r.a), ...cells("b", r.b)].join("  ")}`).join(
    "\n",
  ) +
    "\n";
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    options: {
      digits: { type: "string", default: "8" },
      trials: { type: "string", default: "6" },
      places: { type: "string", default: "0,1,2,3" },
      seed: { type: "string", default: "1" },
      backend: { type: "string", default: "ref" },
    },
    allowPositionals: true,
    strict: true,
  });
  try {
    if (positionals.length !== 1) throw new RangeError("give one checkpoint");
    const whole = (name: string, value: string, min: number) => {
      if (!/^\d+$/.test(value) || Number(value) < min) {
        throw new RangeError(`--${name} must be an integer >= ${min}, got "${value}"`);
      }
      return Number(value);
    };
    const digits = whole("digits", values.digits, 2);
    const places = values.places.split(",").map((p) => whole("places", p, 0));
    const backend = await selectBackend(backendChoice(values.backend));
    try {
      const checkpoint = await loadEvalCheckpoint(positionals[0], backend);
      if (checkpoint.task.task !== "addition") {
        throw new RangeError(`${positionals[0]} is not an addition model`);
      }
      const rows = await placeSensitivity(checkpoint.model, additionConfig(checkpoint.task), {
        digits,
        trials: whole("trials", values.trials, 1),
        places,
        seed: whole("seed", values.seed, 0),
      });
      console.log(formatSensitivity(rows).trimEnd());
    } finally {
      releaseBackend(backend);
    }
  } catch (err) {
    console.error(`place_sensitivity: ${err instanceof Error ? err.message : err}`);
    Deno.exit(2);
  }
}
