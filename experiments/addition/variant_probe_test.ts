import { assertEquals, assertThrows } from "../../src/eval/_assert.ts";
import { describeVariant, makePlan, runName, variantName } from "./plan.ts";
import { probeBase, probeVariant } from "./variant_probe.ts";

const plan = makePlan("gpu");
// the gpu plan runs falcon3a at a window of 2: a probe of "falcon3a-prefix" starts from the full list's
const falcon3aPrefix = probeBase(plan, "falcon3a-prefix");

Deno.test("probeBase() takes the plan's variant of a name, else the full list's; names neither: the plan's error", () => {
  assertEquals([falcon3aPrefix.mixer, falcon3aPrefix.alignment, falcon3aPrefix.model], [
    "falcon3a",
    "prefix",
    undefined,
  ]);
  assertEquals(probeBase(plan, "falcon3a-prefix-w2").model, { window: 2 });
  assertThrows(() => probeBase(plan, "falcon9"), RangeError, 'plan gpu has no variant "falcon9"');
});

Deno.test("probeVariant() sets the window, names the run after it and says so in the variant's description", () => {
  const probe = probeVariant(falcon3aPrefix, { window: 2 });
  assertEquals(probe.mixer, "falcon3a");
  assertEquals(probe.alignment, "prefix");
  assertEquals(probe.model, { window: 2 });
  assertEquals(runName(probe, 1), "falcon3a-prefix-w2-s1");
  assertEquals(describeVariant(probe), "falcon3a-prefix-w2: falcon3a with a window of 2 pairs (window 2)");
});

Deno.test("probeVariant() refuses a window for a rule without one, a bad window and no change", () => {
  const falcon1a = plan.variants.find((v) => variantName(v) === "falcon1a-prefix")!;
  assertThrows(() => probeVariant(falcon1a, { window: 2 }), RangeError, "not falcon1a");
  assertThrows(() => probeVariant(falcon3aPrefix, { window: 0 }), RangeError, "got 0");
  assertThrows(() => probeVariant(falcon3aPrefix, {}), RangeError, "nothing to change");
});
