import { assertAlmostEquals, assertEquals, assertThrows } from "./_assert.ts";
import { additionTestSet } from "../tasks/mod.ts";
import { carryProbability, noExtrapolationReference, referenceAtLength } from "./reference.ts";

const LENGTHS_1_48 = Array.from({ length: 48 }, (_, i) => i + 1);

Deno.test("carryProbability() matches a count over every pair of operands of 1, 2 and 3 digits", () => {
  for (const digits of [1, 2, 3]) {
    const low = digits === 1 ? 0 : 10 ** (digits - 1);
    const high = 10 ** digits;
    let carries = 0;
    for (let a = low; a < high; a++) {
      // b >= high - a carries: count those b in [low, high)
      carries += Math.max(0, high - Math.max(low, high - a));
    }
    assertAlmostEquals(carryProbability(digits), carries / (high - low) ** 2, 1e-12);
  }
  assertThrows(() => carryProbability(0), RangeError, "digits must be an integer >= 1, got 0");
});

Deno.test("noExtrapolationReference() at Ltrain 32: about 81% over 33-48 and 69-70% at 48 (SPEC section 8)", () => {
  const ref = noExtrapolationReference(32, LENGTHS_1_48);
  const beyond = ref.extrapolation!;
  assertEquals([beyond.from, beyond.to, beyond.groups], [33, 48, 16]);
  // 80.97%: SPEC's "about 81-82%" (82.1% if the carry digit is left out)
  assertEquals(beyond.digitAccuracy > 0.805 && beyond.digitAccuracy < 0.82, true);
  assertEquals((100 * beyond.digitAccuracy).toFixed(1), "81.0");
  const at48 = ref.perLength.find((g) => g.key === 48)!;
  assertEquals(at48.digitAccuracy > 0.69 && at48.digitAccuracy < 0.70, true);
  // every length whose answer stays below place 32 is all right; at 32 only the carry digit is guessed
  assertEquals(ref.perLength.slice(0, 31).every((g) => g.digitAccuracy === 1 && g.exactMatch === 1), true);
  const at32 = referenceAtLength(32, 32);
  assertAlmostEquals(
    at32.digitAccuracy,
    (32 + 0.1 * carryProbability(32)) / (32 + carryProbability(32)),
    1e-15,
  );
  assertAlmostEquals(at32.exactMatch, 1 - 0.9 * carryProbability(32), 1e-15);
  assertEquals(ref.inDistribution?.to, 32);
});

Deno.test("noExtrapolationReference() agrees with a count over drawn test sets (right below L, 1/10 beyond)", () => {
  const L = 4;
  const lengths = [3, 4, 6, 9];
  const ref = noExtrapolationReference(L, lengths);
  for (const n of lengths) {
    let digits = 0;
    let expectedRight = 0;
    for (const ex of additionTestSet(n, 4000, 11)) {
      for (const place of ex.places!) {
        if (place < 0) continue;
        digits++;
        expectedRight += place < L ? 1 : 0.1;
      }
    }
    const counted = expectedRight / digits;
    const analytic = ref.perLength.find((g) => g.key === n)!.digitAccuracy;
    if (Math.abs(counted - analytic) > 0.003) {
      throw new Error(`length ${n}: counted ${counted}, analytic ${analytic}`);
    }
  }
});

Deno.test("noExtrapolationReference() takes any guess rate and rejects bad input", () => {
  // guess 1 is a perfect model; guess 0 scores only the known places
  assertEquals(noExtrapolationReference(2, [5], 1).perLength[0].digitAccuracy, 1);
  const blind = noExtrapolationReference(2, [5], 0).perLength[0];
  assertAlmostEquals(blind.digitAccuracy, 2 / (5 + carryProbability(5)), 1e-15);
  assertEquals(blind.exactMatch, 0);
  assertEquals(noExtrapolationReference(8, [1, 2]).extrapolation, null);
  assertThrows(() => referenceAtLength(3, 0), RangeError, "trainLength must be an integer >= 1, got 0");
  assertThrows(() => referenceAtLength(3, 2, 1.5), RangeError, "guess must be in [0, 1], got 1.5");
});
