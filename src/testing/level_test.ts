import { testLevelFromEnv } from "./level.ts";

function expectLevel(values: Record<string, string>, want: string) {
  const got = testLevelFromEnv((name) => values[name]);
  if (got !== want) throw new Error(`${JSON.stringify(values)}: level ${got}, expected ${want}`);
}

Deno.test("testLevelFromEnv: small by default, full from FALCON_TEST_LEVEL or the older FALCON_PARITY_LEVEL", () => {
  expectLevel({}, "small");
  expectLevel({ FALCON_TEST_LEVEL: "full" }, "full");
  expectLevel({ FALCON_PARITY_LEVEL: "full" }, "full");
  expectLevel({ FALCON_TEST_LEVEL: "", FALCON_PARITY_LEVEL: "full" }, "full");
  // the first variable that is set decides
  expectLevel({ FALCON_TEST_LEVEL: "small", FALCON_PARITY_LEVEL: "full" }, "small");
});

Deno.test("testLevelFromEnv: another value is a RangeError naming the variable and the value", () => {
  let message = "";
  try {
    testLevelFromEnv((name) => name === "FALCON_TEST_LEVEL" ? "ful" : undefined);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  if (!message.includes("FALCON_TEST_LEVEL") || !message.includes('"ful"')) {
    throw new Error(`expected a RangeError naming FALCON_TEST_LEVEL and "ful", got "${message}"`);
  }
});

Deno.test("testLevelFromEnv: without permission to read the environment, the small level", () => {
  const denied = () => {
    throw new Deno.errors.NotCapable("Requires env access");
  };
  if (testLevelFromEnv(denied) !== "small") throw new Error("expected the small level without --allow-env");
});
