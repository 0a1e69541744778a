/**
 * A/B timing of the WASM backend's chunk-parallel kernel against its recurrent kernel: forward +
 * backward of one rule at B = 1, T = 2048, H = 4, dk = dv = 64 on one thread, the two forms
 * alternating inside one process (so both see the same machine load), median of `--reps` (default 3)
 * after one warm-up of each.
 *
 * Usage: `deno run --allow-read --allow-env bench/chunk_form_bench.ts [--rule falcon1] [--chunk 64] [--reps 3]`
 *
 * @module
 */

import { type Form, isPerColumnRule, ruleConfig, type RuleName, RULES } from "../src/rules/config.ts";
import { Rng } from "../src/testing/compare.ts";
import { createWasmBackend } from "../src/wasm/backend.ts";

/** Value of `--name` in `args`, or `fallback`. */
function flag(args: readonly string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
}

/** Median of a list of numbers. */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[(s.length - 1) >> 1];
}

/** Time both forms; returns the median forward, backward and total ms of each. */
export async function benchForms(rule: RuleName, chunkSize: number, reps: number) {
  const [B, T, H, dk, dv] = [1, 2048, 4, 64, 64];
  const be = await createWasmBackend({ threads: 1 });
  try {
    const rng = new Rng(3);
    const n = B * T * H;
    const perColumn = isPerColumnRule(rule);
    const inputs = {
      q: be.fromArray(rng.normals(n * dk), [B, T, H, dk]),
      k: be.fromArray(rng.normals(n * dk), [B, T, H, dk]),
      v: be.fromArray(rng.normals(n * dv), [B, T, H, dv]),
      beta: perColumn
        ? be.fromArray(rng.uniforms(n * dv, 0.2, 1.5), [B, T, H, dv])
        : be.fromArray(rng.uniforms(n, 0.2, 1.5), [B, T, H]),
      lambdabar: be.fromArray(rng.uniforms(n, 0, 0.5), [B, T, H]),
    };
    const dO = be.fromArray(rng.normals(n * dv), [B, T, H, dv]);
    const config = ruleConfig(rule);
    const once = (form: Form): [number, number] => {
      const t0 = performance.now();
      const out = be.fastWeightForward(config, inputs, { form, chunkSize });
      const t1 = performance.now();
      const grads = be.fastWeightBackward(config, inputs, dO, { form, chunkSize });
      const t2 = performance.now();
      for (const t of [out.o, ...Object.values(out.carry).filter((x) => "shape" in x)]) be.dispose(t);
      for (const t of Object.values(grads)) be.dispose(t);
      return [t1 - t0, t2 - t1];
    };
    const forms = ["chunk", "recurrent"] as const;
    for (const f of forms) once(f); // warm-up
    const runs: Record<Form, [number, number][]> = { chunk: [], recurrent: [], parallel: [] };
    for (let r = 0; r < reps; r++) for (const f of forms) runs[f].push(once(f));
    return Object.fromEntries(forms.map((f) => [f, {
      forwardMs: median(runs[f].map((x) => x[0])),
      backwardMs: median(runs[f].map((x) => x[1])),
      totalMs: median(runs[f].map((x) => x[0] + x[1])),
    }]));
  } finally {
    be.close();
  }
}

if (import.meta.main) {
  const rule = flag(Deno.args, "rule", "falcon1") as RuleName;
  if (!RULES.includes(rule)) throw new RangeError(`unknown rule "${rule}"; expected ${RULES.join(", ")}`);
  const chunk = Number(flag(Deno.args, "chunk", "64"));
  const reps = Number(flag(Deno.args, "reps", "3"));
  const result = await benchForms(rule, chunk, reps);
  console.log(`${rule} B=1 T=2048 H=4 dk=dv=64, 1 thread, C=${chunk}, median of ${reps}:`);
  for (const [form, r] of Object.entries(result)) {
    console.log(
      `  ${form.padEnd(9)} forward ${r.forwardMs.toFixed(1)} ms  backward ${
        r.backwardMs.toFixed(1)
      } ms  total ${r.totalMs.toFixed(1)} ms`,
    );
  }
}
