/**
 * The recurrent step kernels of assembly/fw_step.ts (the splatted in-place sweep with two readouts, the
 * one-readout sweep of the additive rules, of the last step and of the backward's recomputation, and
 * their 8-column, 4-column and single-column tails) against the float64 reference: every
 * coefficient-stream rule, both alignments, value sizes that hit each tail (4, 12, 13, 19, 24) with odd
 * key sizes, packed starts, non-zero S0, a continuation from a carry, checkpoint interval 5.
 */

import type { RuleName } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { caseLabel, type FastWeightCase, runFastWeightCase } from "../testing/parity.ts";
import { createWasmBackend } from "./backend.ts";

const RULES: RuleName[] = [
  "falcon1",
  "falcon2",
  "falcon1a",
  "falcon2a",
  "linear",
  "retnet",
  "mamba2",
  "deltanet",
  "gated_deltanet",
];
const SIZES: [number, number][] = [[3, 4], [7, 12], [5, 13], [9, 19], [11, 24]];

Deno.test("the step kernels match the reference at every column tail (every coefficient rule, both alignments)", async () => {
  const wasm = await createWasmBackend({ threads: 1, poison: true });
  const ref = createRefBackend();
  const failures: string[] = [];
  let seed = 1;
  let compared = 0;
  try {
    for (const rule of RULES) {
      for (const alignment of ["prefix", "same-step"] as const) {
        for (const [dk, dv] of SIZES) {
          for (const split of [false, true]) {
            const c: FastWeightCase = {
              rule,
              alignment,
              form: "recurrent",
              chunkSize: 5,
              B: 2,
              T: 17,
              H: 1,
              dk,
              dv,
              packed: true,
              s0: true,
              split,
              clampEveryStep: false,
              seed: seed++,
            };
            for (const r of await runFastWeightCase(wasm, c, ref)) {
              compared++;
              if (!(r.error <= r.tolerance)) {
                failures.push(`${caseLabel(c)}: ${r.name} rel L2 ${r.error} > ${r.tolerance}`);
              }
            }
          }
        }
      }
    }
  } finally {
    wasm.close();
  }
  if (failures.length > 0) throw new Error(`${failures.length} mismatches:\n${failures.join("\n")}`);
  if (compared < RULES.length * 2 * SIZES.length * 8) throw new Error(`only ${compared} arrays compared`);
});
