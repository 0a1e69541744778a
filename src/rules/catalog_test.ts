import { coefficientPlan } from "../model/coefficients.ts";
import {
  CATALOG,
  catalogTable,
  FAMILY_FILES,
  isDeltaRule,
  isFalconRule,
  isPerColumnRule,
  isWindowRule,
  RULE_FAMILIES,
  ruleEntry,
  ruleFamily,
  type RuleName,
  ruleName,
  RULES,
  rulesOfFamily,
  UnknownRuleError,
  wasmRuleId,
} from "./catalog.ts";
import { ruleConfig } from "./config.ts";

function expectUnknown(label: string, f: () => unknown): void {
  try {
    f();
  } catch (e) {
    if (!(e instanceof UnknownRuleError)) throw new Error(`${label}: threw ${e}, expected UnknownRuleError`);
    if (!(e instanceof RangeError)) throw new Error(`${label}: UnknownRuleError is not a RangeError`);
    if (!e.message.includes('"nope"')) {
      throw new Error(`${label}: message does not name the value: ${e.message}`);
    }
    return;
  }
  throw new Error(`${label}: accepted the unknown rule "nope"`);
}

Deno.test("RULES lists the catalog in the order of the WASM ids (falcon1 = 0 ... gated_deltanet = 10)", () => {
  const expected = [
    "falcon1",
    "falcon2",
    "falcon3",
    "falcon1a",
    "falcon2a",
    "falcon3a",
    "linear",
    "retnet",
    "mamba2",
    "deltanet",
    "gated_deltanet",
  ];
  if (RULES.join() !== expected.join()) throw new Error(`RULES is ${RULES.join()}`);
  RULES.forEach((rule, i) => {
    if (wasmRuleId(rule) !== i) throw new Error(`wasmRuleId("${rule}") = ${wasmRuleId(rule)}, expected ${i}`);
  });
  if (catalogTable().map((r) => `${r.id}:${r.rule}`).join() !== RULES.map((r, i) => `${i}:${r}`).join()) {
    throw new Error("catalogTable() rows are not the rules in id order");
  }
});

Deno.test("the predicates follow SPEC 3 and 6 (per-column 2/2A, window 3/3A, Falcon 1-3A, delta write)", () => {
  const pick = (f: (r: RuleName) => boolean) => RULES.filter(f).join();
  const cases: [string, string, string][] = [
    ["isPerColumnRule", pick(isPerColumnRule), "falcon2,falcon2a"],
    ["isWindowRule", pick(isWindowRule), "falcon3,falcon3a"],
    ["isFalconRule", pick(isFalconRule), "falcon1,falcon2,falcon3,falcon1a,falcon2a,falcon3a"],
    ["isDeltaRule", pick(isDeltaRule), "falcon1,falcon2,falcon3,deltanet,gated_deltanet"],
    ["additive family", rulesOfFamily("additive").join(), "falcon1a,linear,retnet,mamba2"],
    ["delta family", rulesOfFamily("delta").join(), "falcon1,deltanet,gated_deltanet"],
    ["per-column family", rulesOfFamily("per-column").join(), "falcon2,falcon2a"],
    ["window family", rulesOfFamily("window").join(), "falcon3,falcon3a"],
  ];
  for (const [name, got, want] of cases) {
    if (got !== want) throw new Error(`${name}: ${got}, expected ${want}`);
  }
  for (const rule of RULES) {
    const e = CATALOG[rule];
    // the family follows from the other fields: per-column first, then window, then the write
    const family = e.coefficients === "per-column" ? "per-column" : e.window ? "window" : e.write;
    if (ruleFamily(rule) !== family) {
      throw new Error(`${rule}: family ${ruleFamily(rule)}, expected ${family}`);
    }
    if (ruleConfig(rule).qkNorm !== e.defaultQkNorm) throw new Error(`${rule}: ruleConfig qkNorm differs`);
  }
});

Deno.test("every family names its files in each backend, and they exist", () => {
  for (const family of RULE_FAMILIES) {
    for (const [backend, files] of Object.entries(FAMILY_FILES[family])) {
      if (files.length === 0) throw new Error(`family ${family} names no ${backend} file`);
      for (const file of files) {
        const url = new URL(`../../${file}`, import.meta.url);
        if (!Deno.statSync(url).isFile) {
          throw new Error(`family ${family}: ${backend} file ${file} is missing`);
        }
      }
    }
  }
});

Deno.test("an unknown rule is an UnknownRuleError naming the value at every boundary of src/", () => {
  const nope = "nope" as RuleName;
  expectUnknown("ruleConfig", () => ruleConfig(nope));
  expectUnknown("ruleEntry", () => ruleEntry(nope));
  expectUnknown("ruleName", () => ruleName("nope"));
  expectUnknown("wasmRuleId", () => wasmRuleId(nope));
  expectUnknown("isFalconRule", () => isFalconRule(nope));
  expectUnknown("coefficientPlan", () => coefficientPlan(nope, 2));
  if (ruleName("falcon1") !== "falcon1") throw new Error("ruleName rejected falcon1");
});
