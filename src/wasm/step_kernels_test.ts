/**
 * The recurrent step kernels of assembly/fw_step.ts (the splatted in-place sweep with two readouts, the
 * one-readout sweep of the additive rules, of the last step and of the backward's recomputation, and
 * their 8-column, 4-column and single-column tails) against the float64 reference: every
 * coefficient-stream rule, both alignments, value sizes that hit each tail (4, 12, 13, 19, 24) with odd
 * key sizes, packed starts, non-zero S0, a continuation from a carry, checkpoint interval 5. The window
 * update (register-held pairs for windows of up to 4, the general loop above) with windows 2, 4 and 6.
 */

import { gradOf } from "../rules/backend.ts";
import { ruleConfig, type RuleName } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertRelL2, Rng } from "../testing/compare.ts";
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

Deno.test("the window update matches the reference for windows 2, 4 and 6 at every column tail (falcon3, falcon3a)", async () => {
  const wasm = await createWasmBackend({ threads: 1, poison: true });
  const ref = createRefBackend();
  let compared = 0;
  try {
    let seed = 500;
    for (const rule of ["falcon3", "falcon3a"] as const) {
      for (const alignment of ["prefix", "same-step"] as const) {
        for (const window of [2, 4, 6]) {
          for (const [dk, dv] of [[7, 12], [5, 19], [9, 8]]) {
            const config = ruleConfig(rule, { alignment, window });
            const [B, T, H] = [2, 17, 1];
            const n = B * T * H;
            const rng = new Rng(seed++);
            const host = {
              q: rng.normals(n * dk),
              k: rng.normals(n * dk),
              v: rng.normals(n * dv),
              beta: rng.uniforms(n, 0.2, 1.8),
              lambdabar: rng.uniforms(n, 0, 0.5),
              s0: rng.normals(B * H * dk * dv, 0.3),
              dO: rng.normals(n * dv),
            };
            const starts = new Uint8Array(B * T);
            starts[0] = starts[T] = starts[T + 6] = 1;
            const results = [];
            for (const be of [wasm, ref]) {
              const inputs = {
                q: be.fromArray(host.q, [B, T, H, dk]),
                k: be.fromArray(host.k, [B, T, H, dk]),
                v: be.fromArray(host.v, [B, T, H, dv]),
                beta: be.fromArray(host.beta, [B, T, H]),
                lambdabar: be.fromArray(host.lambdabar, [B, T, H]),
                s0: be.fromArray(host.s0, [B, H, dk, dv]),
                starts,
              };
              const out = be.fastWeightForward(config, inputs, { form: "recurrent", chunkSize: 5 });
              const g = be.fastWeightBackward(config, inputs, be.fromArray(host.dO, [B, T, H, dv]), {
                form: "recurrent",
                chunkSize: 5,
              });
              results.push({
                o: await be.read(out.o),
                state: await be.read(out.carry.state),
                dq: await be.read(g.dq),
                dk: await be.read(g.dk),
                dv: await be.read(g.dv),
                dbeta: await be.read(g.dbeta),
                ds0: await be.read(gradOf(g, "ds0")),
              });
            }
            const [w, r] = results;
            const label = `${rule} ${alignment} window ${window} dk ${dk} dv ${dv}`;
            for (const key of ["o", "state"] as const) assertRelL2(`${label} ${key}`, w[key], r[key], 1e-5);
            for (const key of ["dq", "dk", "dv", "dbeta", "ds0"] as const) {
              assertRelL2(`${label} ${key}`, w[key], r[key], 1e-4);
            }
            compared++;
          }
        }
      }
    }
  } finally {
    wasm.close();
  }
  if (compared !== 36) throw new Error(`compared ${compared} cases, expected 36`);
});
