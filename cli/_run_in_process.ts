/**
 * Test helper: run the `falcon` CLI in-process on an argument list, capturing what it prints.
 *
 * @module
 */

import { main } from "./main.ts";

/** Exit code and captured standard output / error of one CLI run. */
export interface CliRun {
  /** Exit code `main` returned. */
  readonly code: number;
  /** Lines printed with `console.log`. */
  readonly out: string;
  /** Lines printed with `console.error`. */
  readonly err: string;
}

/** Run `falcon <args>` in this process; console output is captured, then restored. */
export async function runCli(args: string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => out.push(a.join(" "));
  console.error = (...a: unknown[]) => err.push(a.join(" "));
  try {
    const code = await main(args);
    return { code, out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
    Deno.exitCode = 0;
  }
}
