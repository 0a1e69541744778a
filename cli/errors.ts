/**
 * Errors the CLI turns into exit codes.
 *
 * @module
 */

import { InputError } from "../src/errors.ts";

/** Exit code for bad input (unknown option, bad value, malformed file). */
export const EXIT_USAGE = 2;

/** An error in what the user asked for (bad option value, unreadable input): exit code 2. */
export class UsageError extends InputError {
  /** Always `UsageError`. */
  override name = "UsageError";
}

export { InputError };
