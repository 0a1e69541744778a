/**
 * What each `falcon` subcommand reads and writes, declared in one table, so that a run can be given
 * only the permissions it needs: `deno run --allow-read=<its inputs> --allow-write=<its outputs>`
 * and no env, net, run, ffi or sys. Every asset the CLI uses (WASM bytes, shaders, fonts, the built-in
 * corpus) is a module, so the inputs are only the paths named on the command line.
 *
 * A subcommand without a declaration here fails `permissions_test.ts`: a new command cannot be added
 * without saying what it touches.
 *
 * @module
 */

import type { Command } from "@commander-js/extra-typings";

/** A path named on the command line: an option's value or a positional argument. */
export type PathRef =
  | {
    /** Option name in camelCase as commander stores it (`--batch-size` is `batchSize`). */
    readonly option: string;
    /** Path used when the option is not given (e.g. train's run directory under `runs`). */
    readonly fallback?: string;
    /** The access is to the path's directory (a temporary sibling is written, then renamed). */
    readonly parent?: boolean;
  }
  | {
    /** Index of the positional argument; a variadic argument yields every path it holds. */
    readonly argument: number;
    /** The access is to the path's directory (a temporary sibling is written, then renamed). */
    readonly parent?: boolean;
  };

/** What one subcommand touches: the paths it reads and the paths it writes. */
export interface CommandAccess {
  /** Inputs (files or directories read). */
  readonly reads: readonly PathRef[];
  /** Outputs (files or directories created or replaced). */
  readonly writes: readonly PathRef[];
}

/** Per subcommand, the paths it reads and writes. Nothing else is touched: no env, net, run, ffi, sys. */
export const COMMAND_ACCESS: Readonly<Record<string, CommandAccess>> = {
  verify: { reads: [{ option: "vectors" }], writes: [] },
  info: { reads: [], writes: [] },
  eval: {
    reads: [{ argument: 0 }, { option: "text" }],
    writes: [{ option: "json" }, { option: "csv" }, { option: "plot" }],
  },
  // the output is written under a temporary sibling name, renamed when complete
  convert: {
    reads: [{ argument: 0 }, { argument: 1, parent: true }],
    writes: [{ argument: 1, parent: true }],
  },
  inspect: { reads: [{ argument: 0 }], writes: [] },
  // the run directory is read too: `--resume` loads its checkpoint, and a fresh run looks for a checkpoint there
  train: {
    reads: [{ option: "corpus" }, { option: "out", fallback: "runs" }],
    writes: [{ option: "out", fallback: "runs" }],
  },
  predict: { reads: [{ argument: 0 }], writes: [] },
};

/** The read and write paths one invocation needs (deduplicated, in order of declaration). */
export interface Access {
  /** Paths to pass to `--allow-read`. */
  readonly read: string[];
  /** Paths to pass to `--allow-write`. */
  readonly write: string[];
}

/** A subcommand invocation as parsed by commander: its option values and positional arguments. */
export interface ParsedInvocation {
  /** Subcommand name. */
  readonly command: string;
  /** Option values (commander's `opts()`). */
  readonly options: Readonly<Record<string, unknown>>;
  /** Positional arguments (commander's `processedArgs`; a variadic one is an array). */
  readonly args: readonly unknown[];
}

function parentOf(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  const slash = trimmed.lastIndexOf("/");
  if (slash < 0) return ".";
  return slash === 0 ? "/" : trimmed.slice(0, slash);
}

function resolve(ref: PathRef, invocation: ParsedInvocation): string[] {
  let values: unknown;
  if ("option" in ref) values = invocation.options[ref.option] ?? ref.fallback;
  else values = invocation.args[ref.argument];
  const paths = (Array.isArray(values) ? values : [values]).filter((v) => typeof v === "string");
  return paths.map((p) => (ref.parent ? parentOf(p) : p));
}

/**
 * The paths an invocation reads and writes, from {@linkcode COMMAND_ACCESS}.
 *
 * @example
 * ```ts
 * import { accessOf } from "./permissions.ts";
 *
 * const access = accessOf({ command: "eval", options: { plot: "out/p.svg" }, args: [["a.safetensors"]] });
 * if (access.read.join() !== "a.safetensors" || access.write.join() !== "out/p.svg") {
 *   throw new Error(`unexpected ${JSON.stringify(access)}`);
 * }
 * ```
 */
export function accessOf(invocation: ParsedInvocation): Access {
  const declared = COMMAND_ACCESS[invocation.command];
  if (!declared) {
    throw new RangeError(
      `subcommand "${invocation.command}" declares no file access; add it to COMMAND_ACCESS in cli/permissions.ts`,
    );
  }
  const collect = (refs: readonly PathRef[]) => [...new Set(refs.flatMap((r) => resolve(r, invocation)))];
  return { read: collect(declared.reads), write: collect(declared.writes) };
}

/**
 * `deno run` permission flags granting exactly `access` (`--no-prompt` first, so a missing grant is
 * an error, never a question).
 *
 * @example
 * ```ts
 * import { permissionFlags } from "./permissions.ts";
 *
 * const flags = permissionFlags({ read: ["runs"], write: ["runs"] });
 * if (flags.join(" ") !== "--no-prompt --allow-read=runs --allow-write=runs") throw new Error(flags.join(" "));
 * ```
 */
export function permissionFlags(access: Access): string[] {
  for (const path of [...access.read, ...access.write]) {
    if (path.includes(",")) {
      throw new RangeError(`path "${path}" holds a comma, which a permission list cannot`);
    }
  }
  const flags = ["--no-prompt"];
  if (access.read.length > 0) flags.push(`--allow-read=${access.read.join(",")}`);
  if (access.write.length > 0) flags.push(`--allow-write=${access.write.join(",")}`);
  return flags;
}

class Parsed extends Error {
  constructor(readonly invocation: ParsedInvocation) {
    super("parsed");
  }
}

/**
 * Parse `argv` with `program` (e.g. `buildProgram()` of `main.ts`) up to the point where a
 * subcommand's action would run, and return that invocation instead of running it. Usage errors
 * throw as they do in the CLI.
 */
export async function parseInvocation(
  // deno-lint-ignore no-explicit-any
  program: Command<any, any, any>,
  argv: readonly string[],
): Promise<ParsedInvocation> {
  program.hook("preAction", (_program, action) => {
    throw new Parsed({ command: action.name(), options: action.opts(), args: action.processedArgs });
  });
  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (err) {
    if (err instanceof Parsed) return err.invocation;
    throw err;
  }
  throw new RangeError(`"${argv.join(" ")}" names no subcommand`);
}
