/**
 * Output paths of `falcon convert`: refuse an output that is the input, and write through a
 * temporary name in the same directory that is renamed into place only when complete, so a refusal
 * or a crash leaves nothing at the output path.
 *
 * @module
 */

import { resolve } from "node:path";
import { CheckpointError } from "./errors.ts";

/**
 * The absolute, symlink-resolved form of `path`; for a path that does not exist yet, its resolved
 * parent plus its name, with `.` and `..` folded first (`Deno.realPath` of such a path folds them or
 * not depending on the permission flags: with `-A` it does not).
 */
export async function resolvePath(path: string): Promise<string> {
  try {
    return await Deno.realPath(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const abs = resolve(path);
  const slash = abs.lastIndexOf("/");
  const parent = slash <= 0 ? "/" : abs.slice(0, slash);
  const name = abs.slice(slash + 1);
  let realParent = parent;
  try {
    realParent = await Deno.realPath(parent);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return realParent === "/" ? `/${name}` : `${realParent}/${name}`;
}

/**
 * Throw a {@linkcode CheckpointError} when `output` names the same file or directory as `input`,
 * or a path inside it (an `hf` directory holds its own files).
 */
export async function refuseSamePath(input: string, output: string): Promise<void> {
  const a = await resolvePath(input);
  const b = await resolvePath(output);
  if (a === b) {
    throw new CheckpointError(output, `output path is the input (${a}); choose another output path`);
  }
  if (b.startsWith(`${a}/`)) {
    throw new CheckpointError(output, `output path is inside the input directory ${a}`);
  }
}

/** A temporary sibling name of `path` (same directory, so the final rename is atomic). */
export function temporaryName(path: string): string {
  const clean = path.replace(/\/+$/, "");
  const slash = clean.lastIndexOf("/");
  const dir = slash < 0 ? "" : clean.slice(0, slash + 1);
  const name = clean.slice(slash + 1);
  const tag = `${Date.now().toString(36)}${Math.floor(Math.random() * 0x7fffffff).toString(36)}`;
  return `${dir}.${name}.tmp-${tag}`;
}

/**
 * Write a single file atomically: `write` fills a temporary sibling path, which is then renamed
 * to `path`. If `write` throws, the temporary file is removed and the error is rethrown.
 */
export async function writeFileAtomic(path: string, write: (tmp: string) => Promise<void>): Promise<void> {
  const tmp = temporaryName(path);
  try {
    await write(tmp);
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
}

/**
 * Check an output directory before any work: an existing file at `path` is refused, and so is an
 * existing non-empty directory unless `replace` is set; even then only a directory holding
 * nothing but `replaceable` files (an earlier export) is replaced, never one with other files.
 * Returns whether a non-empty directory will be replaced.
 */
export async function checkOutputDirectory(
  path: string,
  options: { readonly replace?: boolean; readonly replaceable?: readonly string[] } = {},
): Promise<boolean> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
  if (!info.isDirectory) throw new CheckpointError(path, "output exists and is not a directory");
  const names: string[] = [];
  for await (const e of Deno.readDir(path)) names.push(e.name);
  if (names.length === 0) return false;
  if (!options.replace) {
    throw new CheckpointError(
      path,
      "output directory exists and is not empty; pass --force to replace it, or choose another",
    );
  }
  const foreign = names.filter((n) => !(options.replaceable ?? []).includes(n)).sort();
  if (foreign.length > 0) {
    throw new CheckpointError(
      path,
      `output directory holds files that are not part of an export (${foreign.join(", ")}); ` +
        "--force replaces only an earlier export: remove them or choose another directory",
    );
  }
  return true;
}

/**
 * Write a directory atomically: `write` fills a fresh temporary sibling directory, which is then
 * renamed to `path`. An existing non-empty directory at `path` is refused (nothing is overwritten
 * file by file) unless `replace` allows it ({@linkcode checkOutputDirectory}): then the old
 * directory is moved aside, the new one renamed in and the old one removed. An existing file at
 * `path` is refused too.
 */
export async function writeDirAtomic(
  path: string,
  write: (tmpDir: string) => Promise<void>,
  options: { readonly replace?: boolean; readonly replaceable?: readonly string[] } = {},
): Promise<void> {
  const replacing = await checkOutputDirectory(path, options);
  const tmp = temporaryName(path);
  await Deno.mkdir(tmp);
  try {
    await write(tmp);
    if (replacing) {
      const old = temporaryName(path);
      await Deno.rename(path, old);
      await Deno.rename(tmp, path);
      await Deno.remove(old, { recursive: true });
    } else {
      await Deno.remove(path).catch(() => {}); // an empty directory: rename needs it gone on some systems
      await Deno.rename(tmp, path);
    }
  } catch (err) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw err;
  }
}
