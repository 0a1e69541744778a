/**
 * Output paths checked before any work: a command that will write a file or a directory first
 * makes sure it can (the directory exists, is a directory and takes a new file; the path is not a
 * directory where a file goes; an existing output is refused unless the caller allows
 * overwriting), so that a bad path fails in a second with a message naming it, not after an hour
 * of work with an uncaught `NotFound`.
 *
 * Errors are {@linkcode OutputPathError}s (an {@linkcode InputError}: the CLI exits with code 2);
 * a path outside the runtime's permissions (`Deno.errors.NotCapable`) is rethrown as it is.
 *
 * @module
 */

import { InputError } from "./errors.ts";

/** An output path that cannot be written: the message names the path and why. */
export class OutputPathError extends InputError {
  /** Always `OutputPathError`. */
  override name = "OutputPathError";
  /** The path refused. */
  readonly path: string;

  /** `what` labels the path (`--json`, `output`), `reason` says what is wrong. */
  constructor(what: string, path: string, reason: string, options?: ErrorOptions) {
    super(`${what} ${path}: ${reason}`, options);
    this.path = path;
  }
}

/** Words for the file-system errors an output can meet (by `err.code`). */
const REASONS: Readonly<Record<string, string>> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  EISDIR: "is a directory",
  ENOTDIR: "a part of the path is not a directory",
  EEXIST: "already exists",
};

/** The OS error code of `err` (`EROFS`, `ENOSPC`, ...), or undefined. */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Whether `err` says the device is full (ENOSPC) or over quota (EDQUOT). */
export function isDiskFull(err: unknown): boolean {
  const code = errorCode(err);
  return code === "ENOSPC" || code === "EDQUOT";
}

/** A short reason for a file-system error: `read-only file system (EROFS)`. */
export function describeFsError(err: unknown): string {
  const code = errorCode(err);
  if (code && REASONS[code]) return `${REASONS[code]} (${code})`;
  return err instanceof Error ? err.message : String(err);
}

/** The directory part of `path` (`.` for a bare name, `/` for a name at the root). */
export function parentOf(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  const slash = trimmed.lastIndexOf("/");
  if (slash < 0) return ".";
  return slash === 0 ? "/" : trimmed.slice(0, slash);
}

async function statOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.stat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    if (err instanceof Deno.errors.NotCapable) throw err;
    if (errorCode(err) === "ENOTDIR") return null; // a parent is a file: reported by the caller
    throw err;
  }
}

/**
 * Throw unless a new file can be created in `dir`: it must exist, be a directory and take a file
 * (a probe file is created and removed at once).
 */
export async function checkWritableDirectory(what: string, dir: string, path = dir): Promise<void> {
  const info = await statOrNull(dir);
  if (!info) throw new OutputPathError(what, path, `directory ${dir} does not exist`);
  if (!info.isDirectory) throw new OutputPathError(what, path, `${dir} is not a directory`);
  const probe = `${dir}/.falcon-write-probe.${Deno.pid}.${crypto.randomUUID().slice(0, 8)}`;
  try {
    const file = await Deno.open(probe, { write: true, createNew: true });
    file.close();
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) throw err;
    throw new OutputPathError(what, path, `cannot write in ${dir}: ${describeFsError(err)}`, { cause: err });
  }
  await Deno.remove(probe).catch(() => {});
}

/** Options of {@linkcode checkOutputFile}. */
export interface OutputFileOptions {
  /** Replace an existing file (default: refuse it, naming the flag that allows it). */
  readonly overwrite?: boolean;
  /** The flag that allows overwriting, named in the refusal (e.g. `--force`); none: overwriting is allowed. */
  readonly overwriteFlag?: string;
}

/**
 * Check that the file `path` can be written: its directory exists and takes a file, `path` is not
 * a directory, an existing file is writable and, with `overwriteFlag` and without `overwrite`,
 * refused. Returns whether a file is there. Only `path` itself is touched (a new file is created
 * and removed at once, an existing one opened without truncating), so write access to that one
 * path is all it needs.
 */
export async function checkOutputFile(
  what: string,
  path: string,
  options: OutputFileOptions = {},
): Promise<{ exists: boolean }> {
  if (path === "" || path.endsWith("/")) throw new OutputPathError(what, path, "is not a file name");
  const refuse = (err: unknown): never => {
    if (err instanceof Deno.errors.NotCapable) throw err;
    const code = errorCode(err);
    if (code === "EISDIR") throw new OutputPathError(what, path, "is a directory; a file goes here");
    if (code === "ENOENT") {
      throw new OutputPathError(what, path, `directory ${parentOf(path)} does not exist`, { cause: err });
    }
    if (code === "ENOTDIR") {
      throw new OutputPathError(what, path, `${parentOf(path)} is not a directory`, { cause: err });
    }
    throw new OutputPathError(what, path, `cannot write in ${parentOf(path)}: ${describeFsError(err)}`, {
      cause: err,
    });
  };
  try {
    (await Deno.open(path, { write: true, createNew: true })).close();
    await Deno.remove(path);
    return { exists: false };
  } catch (err) {
    if (!(err instanceof Deno.errors.AlreadyExists)) refuse(err);
  }
  if (options.overwriteFlag && !options.overwrite) {
    // a directory is refused as such, whatever the flag
    try {
      (await Deno.open(path, { read: true })).close();
      const info = await Deno.stat(path).catch(() => null);
      if (info?.isDirectory) refuse(Object.assign(new Error("is a directory"), { code: "EISDIR" }));
    } catch (err) {
      if (err instanceof OutputPathError || err instanceof Deno.errors.NotCapable) throw err;
    }
    throw new OutputPathError(
      what,
      path,
      `already exists; pass ${options.overwriteFlag} to replace it, or choose another path`,
    );
  }
  try {
    (await Deno.open(path, { write: true })).close(); // opened, not truncated
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable || errorCode(err) === "EISDIR") refuse(err);
    throw new OutputPathError(what, path, `cannot be replaced: ${describeFsError(err)}`, { cause: err });
  }
  return { exists: true };
}

/** The absolute form of `path` with `.` and `..` segments resolved (no file-system access). */
export function absolutePath(path: string): string {
  const full = path.startsWith("/") ? path : `${Deno.cwd()}/${path}`;
  const parts: string[] = [];
  for (const part of full.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/**
 * Throw when two of the named paths are one file (after resolving `.`, `..` and symlinks of the
 * existing part), e.g. `eval --json r --csv r`, or an output that is one of the inputs.
 */
export async function refuseSharedPaths(
  outputs: readonly { what: string; path: string }[],
  inputs: readonly { what: string; path: string }[] = [],
): Promise<void> {
  const resolved = async (path: string) => {
    try {
      return await Deno.realPath(path);
    } catch {
      const abs = absolutePath(path);
      const parent = parentOf(abs);
      try {
        return `${await Deno.realPath(parent)}/${abs.slice(parent.length + 1)}`.replace(/^\/\//, "/");
      } catch {
        return abs;
      }
    }
  };
  const seen = new Map<string, string>();
  for (const input of inputs) seen.set(await resolved(input.path), `${input.what} ${input.path}`);
  for (const output of outputs) {
    const key = await resolved(output.path);
    const earlier = seen.get(key);
    if (earlier) {
      throw new OutputPathError(
        output.what,
        output.path,
        `is the same file as ${earlier}; choose another path`,
      );
    }
    seen.set(key, `${output.what} ${output.path}`);
  }
}
