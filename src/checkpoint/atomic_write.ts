/**
 * Crash-safe file replacement: write a temporary file in the target's directory, then rename it
 * over the target (a rename within one directory is atomic on POSIX file systems), so a reader
 * sees either the old file or the complete new one, never a torn write.
 *
 * @module
 */

/** The temporary path used while writing `path` (same directory, ends in `.tmp`). */
export function temporaryPathFor(path: string): string {
  const slash = path.lastIndexOf("/");
  const dir = slash >= 0 ? path.slice(0, slash + 1) : "";
  const base = path.slice(slash + 1);
  return `${dir}.${base}.${Deno.pid}.${crypto.randomUUID().slice(0, 8)}.tmp`;
}

/**
 * Whether `name` (a bare file name) is a temporary file {@linkcode temporaryPathFor} made for the
 * file named `base`: `.<base>.<pid>.<id>.tmp`. One left behind means a write was killed midway.
 */
export function isTemporaryNameFor(name: string, base: string): boolean {
  const prefix = `.${base}.`;
  return name.startsWith(prefix) && /^\d+\.[0-9a-f]{8}\.tmp$/.test(name.slice(prefix.length));
}

/** Write `bytes` to `path` atomically; on failure the temporary file is removed and `path` is untouched. */
export async function atomicWriteFile(path: string, bytes: Uint8Array): Promise<void> {
  const tmp = temporaryPathFor(path);
  try {
    const file = await Deno.open(tmp, { write: true, createNew: true });
    try {
      let written = 0;
      while (written < bytes.length) written += await file.write(bytes.subarray(written));
      await file.syncData();
    } finally {
      file.close();
    }
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
}
