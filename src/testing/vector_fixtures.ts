/**
 * The float64 test vectors of `fixtures/vectors/` for the backend tests: one file per catalog rule
 * and alignment (`<rule>__<alignment>__default.json`), parsed by `src/vectors/load.ts`, and one
 * comparison of a backend's forward and backward against a vector. A rule of the catalog without
 * its vector files fails the loading, naming the rule.
 *
 * @module
 */

import { type Backend, type FormOptions, gradOf } from "../rules/backend.ts";
import { type Alignment, ALIGNMENTS, type RuleName, RULES } from "../rules/config.ts";
import { parseVectorFile, type VectorCase } from "../vectors/load.ts";
import { vectorInputs } from "../verify/verify_vector.ts";
import { assertRelL2 } from "./compare.ts";

/** The directory of the committed test vectors. */
export const VECTOR_DIR: URL = new URL("../../fixtures/vectors/", import.meta.url);

/** The file name of the default vector of `rule` under `alignment`. */
export function vectorFileName(rule: RuleName, alignment: Alignment): string {
  return `${rule}__${alignment}__default.json`;
}

/**
 * The default vector of every catalog rule and alignment, in catalog order. Throws naming the rule
 * when its file is missing, and naming the file when it does not parse or holds another rule.
 */
export function fixtureVectors(rules: readonly RuleName[] = RULES): VectorCase[] {
  const out: VectorCase[] = [];
  for (const rule of rules) {
    for (const alignment of ALIGNMENTS) {
      const file = vectorFileName(rule, alignment);
      let text: string;
      try {
        text = Deno.readTextFileSync(new URL(file, VECTOR_DIR));
      } catch (e) {
        throw new Error(
          `rule "${rule}" has no ${alignment} test vector: fixtures/vectors/${file} (${
            (e as Error).message
          })`,
        );
      }
      const vector = parseVectorFile(file, JSON.parse(text));
      if (vector.rule !== rule || vector.alignment !== alignment) {
        throw new RangeError(`${file} holds rule "${vector.rule}" (${vector.alignment}), expected "${rule}"`);
      }
      out.push(vector);
    }
  }
  return out;
}

/** How {@linkcode assertMatchesVector} compares a gradient the vector has as all zeros. */
export type ZeroGradients = "exact" | "near";

/**
 * Run `vector` forward and backward on `backend` with `options` and assert outputs and final state
 * at relative L2 `forward` (default 1e-5) and every gradient at `backward` (default 1e-4). A
 * gradient that is all zeros in the file must be exactly zero (`exact`) or within 1e-6 of zero
 * relative to one (`near`). Failures name `tag` (the backend and form), the file and the array.
 */
export async function assertMatchesVector(
  backend: Backend,
  vector: VectorCase,
  options: FormOptions,
  tag: string,
  tolerances: { forward?: number; backward?: number; zeros?: ZeroGradients } = {},
): Promise<void> {
  const forward = tolerances.forward ?? 1e-5;
  const backward = tolerances.backward ?? 1e-4;
  const label = `${vector.name} (${tag})`;
  const inputs = vectorInputs(backend, vector);
  const out = backend.fastWeightForward(vector.config, inputs, options);
  assertRelL2(`${label} o`, await backend.read(out.o), vector.expected.o, forward);
  assertRelL2(`${label} S_final`, await backend.read(out.carry.state), vector.expected.sFinal, forward);
  const { T, dv } = vector.head;
  const dO = backend.fromArray(vector.dO, [1, T, 1, dv]);
  const g = backend.fastWeightBackward(vector.config, inputs, dO, options);
  const e = vector.expected.grads;
  const pairs = [
    ["dq", g.dq, e.q],
    ["dk", g.dk, e.k],
    ["dv", g.dv, e.v],
    ["dbeta", g.dbeta, e.beta],
    ["dlambdabar", g.dlambdabar, e.lambdabar],
    ["dS0", gradOf(g, "ds0"), e.S0],
  ] as const;
  for (const [name, tensor, expected] of pairs) {
    const actual = await backend.read(tensor);
    if (expected.every((x) => x === 0)) {
      if (tolerances.zeros === "near") {
        assertRelL2(`${label} ${name} (zero)`, actual.map((x) => x + 1), expected.map((x) => x + 1), 1e-6);
      } else if (actual.some((x) => x !== 0)) {
        throw new Error(`${label} ${name}: expected all zeros`);
      }
    } else {
      assertRelL2(`${label} ${name}`, actual, expected, backward);
    }
  }
}
