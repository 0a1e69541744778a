/**
 * Every rule of the catalog (`src/rules/catalog.ts`) exists in every CPU backend and in the
 * generated AssemblyScript: its test vectors are committed, the generated `assembly/fw_rules.ts`
 * has its id and family flags, and the reference and the WASM backend (recurrent and chunk forms)
 * reproduce its vectors. A failure names the rule. (The WebGPU backend runs the same vectors in
 * `wgpu/fast_weight_vectors_test.ts`; an unknown rule there is an `UnknownRuleError` at
 * `usesChunkKernels` and `coefficientWgsl`, checked below.)
 */

import { createRefBackend } from "../src/rules/reference/backend.ts";
import { CATALOG, type RuleName, RULES, UnknownRuleError, wasmRuleId } from "../src/rules/catalog.ts";
import { ruleConfig } from "../src/rules/config.ts";
import { assertMatchesVector, fixtureVectors } from "../src/testing/vector_fixtures.ts";
import { createWasmBackend } from "../src/wasm/backend.ts";
import { usesChunkKernels } from "../wgpu/fast_weight.ts";
import { coefficientWgsl } from "../wgpu/shaders/fast_weight_coef.ts";

const generated = Deno.readTextFileSync(new URL("../assembly/fw_rules.ts", import.meta.url));

/** The rules whose bit is set in the generated predicate `name`. */
function flagged(name: string): RuleName[] {
  const m = generated.match(
    new RegExp(`function ${name}\\(rule: i32\\): bool \\{\\n  return \\(\\(0b([01]+) >> rule\\)`),
  );
  if (!m) throw new Error(`assembly/fw_rules.ts has no predicate ${name}: run deno task build:wasm`);
  const mask = parseInt(m[1], 2);
  return RULES.filter((rule) => ((mask >> wasmRuleId(rule)) & 1) === 1);
}

Deno.test("assembly/fw_rules.ts has every catalog rule's id and family flags", () => {
  for (const rule of RULES) {
    const line = `export const ${rule.toUpperCase()}: i32 = ${wasmRuleId(rule)};`;
    if (!generated.includes(line)) {
      throw new Error(`rule "${rule}" is missing from assembly/fw_rules.ts (${line})`);
    }
  }
  const expect = (name: string, has: (rule: RuleName) => boolean) => {
    const got = flagged(name).join();
    const want = RULES.filter(has).join();
    if (got !== want) throw new Error(`fw_rules.ts ${name} holds ${got}, the catalog says ${want}`);
  };
  expect("isFalcon", (r) => CATALOG[r].statistic !== "none");
  expect("isPerColumn", (r) => CATALOG[r].coefficients === "per-column");
  expect("isRegression", (r) => CATALOG[r].write === "delta");
  expect("isWindow", (r) => CATALOG[r].window);
  expect("usesTopEigen", (r) => CATALOG[r].statistic === "mu");
});

for (const rule of RULES) {
  Deno.test(`rule ${rule}: its vectors exist and the reference and WASM backends reproduce them`, async () => {
    const vectors = fixtureVectors([rule]); // names the rule when a file is missing
    const ref = createRefBackend();
    const wasm = await createWasmBackend({ threads: 1 });
    try {
      for (const vector of vectors) {
        await assertMatchesVector(ref, vector, { form: "recurrent" }, `rule ${rule}, reference recurrent`, {
          forward: 1e-9,
          backward: 1e-9,
          zeros: "near",
        });
        await assertMatchesVector(
          ref,
          vector,
          { form: "chunk", chunkSize: 4 },
          `rule ${rule}, reference chunk`,
          {
            forward: 1e-9,
            backward: 1e-8,
            zeros: "near",
          },
        );
        for (const form of ["recurrent", "chunk"] as const) {
          await assertMatchesVector(wasm, vector, { form, chunkSize: 4 }, `rule ${rule}, wasm ${form}`);
        }
      }
    } finally {
      wasm.close();
    }
  });
}

Deno.test("an unknown rule is an UnknownRuleError in the WebGPU routing and coefficient WGSL", () => {
  const config = { ...ruleConfig("falcon1"), rule: "nope" as RuleName };
  for (
    const [label, f] of [
      ["usesChunkKernels", () => usesChunkKernels(config, { form: "chunk" })],
      ["coefficientWgsl", () => coefficientWgsl(config, { mambaA: [1], retnetG: [1] })],
    ] as const
  ) {
    let error: unknown = null;
    try {
      f();
    } catch (e) {
      error = e;
    }
    if (!(error instanceof UnknownRuleError)) {
      throw new Error(`${label}: ${error ?? "no error"} for rule "nope"`);
    }
  }
});
