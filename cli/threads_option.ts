/**
 * `--threads N`: worker threads of the WASM backend (default: all cores), shared by every subcommand
 * that takes `--backend`. Ignored by the other backends.
 *
 * @module
 */

import { Option } from "@commander-js/extra-typings";
import { MAX_THREADS } from "../src/wasm/pool_layout.js";
import { UsageError } from "./errors.ts";

/** The `--threads <n>` option. */
export function threadsOption() {
  return new Option("--threads <n>", "WASM backend threads (default: all cores)");
}

/** The thread count of a `--threads` value (undefined when absent); a UsageError names a bad value. */
export function parseThreads(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > MAX_THREADS) {
    throw new UsageError(`--threads must be an integer in 1..${MAX_THREADS}, got "${value}"`);
  }
  return n;
}
