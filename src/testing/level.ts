/**
 * The test level: `small` (the default: shapes that reach every code path and compile quickly on a
 * software GPU adapter, for CI and `deno task test`) or `full` (adds the large shapes, e.g. the SPEC
 * section 4 shape `T = 1024`, `d_k = d_v = 64`, and chunk sizes up to 64; meant for a real GPU).
 *
 * `FALCON_TEST_LEVEL=full` asks for the full level; `FALCON_PARITY_LEVEL=full`, the older name that
 * only the parity suite read, still does.
 *
 * @module
 */

/** A test level. */
export type TestLevel = "small" | "full";

/** The variables that ask for a level, in the order they are read. */
export const TEST_LEVEL_VARIABLES = ["FALCON_TEST_LEVEL", "FALCON_PARITY_LEVEL"] as const;

/** Reads an environment variable (undefined when unset). */
export type EnvReader = (name: string) => string | undefined;

/**
 * The level asked for by the environment: the first of `FALCON_TEST_LEVEL`, `FALCON_PARITY_LEVEL`
 * that is set and not empty decides; `small` when neither is, and without `--allow-env`. A value other
 * than `small` or `full` is a RangeError naming the variable and the value (a typo must not quietly
 * run the small level). `read` is for tests (test modules share one process under `--parallel`, so
 * they must not set the real variables).
 */
export function testLevelFromEnv(read: EnvReader = (name) => Deno.env.get(name)): TestLevel {
  for (const name of TEST_LEVEL_VARIABLES) {
    let value: string | undefined;
    try {
      value = read(name);
    } catch {
      return "small"; // no --allow-env: the small level
    }
    if (value === undefined || value === "") continue;
    if (value === "small" || value === "full") return value;
    throw new RangeError(`${name} must be "small" or "full", got "${value}"`);
  }
  return "small";
}
