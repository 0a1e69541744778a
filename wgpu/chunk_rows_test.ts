/**
 * The staged row kernels (`shaders/chunk_rows.ts`: `readout` and `query_grads` of the additive and
 * delta families): their tiles fit the workgroup memory they are sized for, and the shapes that take
 * the kernels' other code paths (pair columns in several panels, two output tiles per invocation)
 * match the float64 reference (forward, carry and every gradient, through `compareChunk`).
 */

import { ruleConfig } from "../src/rules/config.ts";
import { chunkForm, compareChunk, FULL_LEVEL } from "./_chunk_compare.ts";
import { gpuTest } from "./_test_util.ts";
import { chunkShape } from "./fast_weight_chunk.ts";
import { ROWS_WG, rowsKernelFloats, rowsTiles } from "./shaders/chunk_rows.ts";

const WEBGPU_DEFAULT_SHARED = 16384;

Deno.test("rowsTiles: the widest panel and deepest slab that fit, one score tile per invocation", () => {
  const steps = 4 * 64;
  const roomy = rowsTiles(64, 0, 64, 64, steps, 49152 / 4 - 16);
  if (roomy?.slab !== 16 || roomy.panel !== 64) throw new Error(`C = 64 at 48 KiB: ${JSON.stringify(roomy)}`);
  const limit = WEBGPU_DEFAULT_SHARED / 4 - 16;
  const tight = rowsTiles(64, 3, 128, 128, steps, limit);
  if (!tight || rowsKernelFloats(64, 128, 128, steps, tight) > limit) {
    throw new Error(`C = 64, D = 128 at 16 KiB: ${JSON.stringify(tight)} does not fit`);
  }
  // one 4 x 4 score tile per invocation: C / 4 row quads times panel / 4 column quads <= ROWS_WG
  // and whole slabs per panel (the mix walks a panel slab by slab)
  for (const C of [1, 3, 40, 64, 128, 256]) {
    const t = rowsTiles(C, 3, 16, 16, 4 * C, 49152 / 4 - 16);
    if (!t || t.panel % 4 !== 0 || t.panel % t.slab !== 0 || Math.ceil(C / 4) * (t.panel / 4) > ROWS_WG) {
      throw new Error(`C = ${C}: ${JSON.stringify(t)}`);
    }
  }
  if (rowsTiles(4096, 0, 64, 64, 4 * 4096, limit) !== null) throw new Error("C = 4096 fits 16 KiB?");
});

Deno.test("chunkShape gives the staged row kernels their tiles, and none to the families without them", () => {
  const d = { B: 1, T: 256, H: 1, dk: 64, dv: 64 };
  for (const rule of ["falcon1a", "falcon1", "mamba2"] as const) {
    const s = chunkShape(ruleConfig(rule), d, 64, 49152);
    if (s.rowsSlab !== 16 || s.rowsPanel !== 64) throw new Error(`${rule}: ${s.rowsSlab} x ${s.rowsPanel}`);
  }
  for (const rule of ["falcon2", "falcon3"] as const) {
    const s = chunkShape(ruleConfig(rule), d, 64, 49152);
    if (s.rowsSlab !== 0 || s.rowsPanel !== 0) throw new Error(`${rule}: ${s.rowsSlab} x ${s.rowsPanel}`);
  }
});

// falcon3a's window (3 pairs before the chunk) makes 67 pair columns at C = 64: two panels, of 64 and 4;
// Dv = 68 at C = 64 makes 16 x 17 output tiles of the readout: two per invocation for some
const CASES = [
  { rule: "falcon3a", spec: { B: 1, T: 70, H: 1, dk: 4, dv: 4, seed: 41, packed: true, s0: true }, C: 64 },
  { rule: "falcon1a", spec: { B: 1, T: 70, H: 1, dk: 4, dv: 68, seed: 42, packed: true, s0: true }, C: 64 },
  { rule: "falcon1", spec: { B: 1, T: 70, H: 1, dk: 4, dv: 68, seed: 43, packed: true, s0: true }, C: 64 },
] as const;

// at Dv = 68 every backward pipeline takes minutes to compile on a software adapter: the forward (the
// readout's two tiles per invocation) in every run, the backward (query_grads at Dk = 4) at the full level
// falcon1's forward at Dv = 68 alone takes ~3 minutes to compile there (its solve and scans): full level only
for (const c of CASES.filter((c) => FULL_LEVEL || c.rule !== "falcon1")) {
  const whole = FULL_LEVEL || c.spec.dv < 64;
  gpuTest(
    `staged row kernels of ${c.rule} match the reference at C = ${c.C}, Dk = ${c.spec.dk}, Dv = ${c.spec.dv}${
      whole ? "" : " (forward; backward at the full level)"
    }`,
    async (gpu) => {
      await compareChunk(gpu, ruleConfig(c.rule), c.spec, chunkForm(c.C), `${c.rule} C=${c.C}`, {
        forwardOnly: !whole,
      });
    },
  );
}
