/**
 * The rules of a run directory (`falcon train --out D`), applied before a run starts:
 *
 * - **One run at a time.** The run holds `run.lock` in `D`: a file naming the process (pid, host,
 *   start time) with an exclusive advisory lock (`flock`) on it for as long as the run lives. A
 *   second run into `D` is refused, naming the first. The operating system drops the lock when
 *   its process dies, however it dies (kill -9 included), so a lock file nobody holds is a stale
 *   one left by a dead run: it is recognised and replaced. The file is removed when the run ends.
 * - **Stale temporary files are cleaned.** A checkpoint is written to
 *   `.checkpoint.safetensors.<pid>.<id>.tmp` and renamed into place (a resume rewrites
 *   `metrics.jsonl` the same way); a run killed midway leaves that file behind. Holding the lock, nothing else writes in `D`, so every such file is stale
 *   and is removed.
 * - **A fresh run needs an empty directory.** Without `resume`, a directory holding anything
 *   (a checkpoint, the `metrics.jsonl` of a run killed before its first checkpoint, any file) is
 *   refused; with `force` the run's own files (`checkpoint.safetensors`, `metrics.jsonl`) are
 *   removed first (other files are left alone) and the run starts clean.
 *
 * Errors are {@linkcode RunDirectoryError}s (an {@linkcode InputError}: the CLI exits with code 2).
 *
 * @module
 */

import { isTemporaryNameFor } from "../checkpoint/atomic_write.ts";
import { InputError } from "../errors.ts";
import { describeFsError } from "../output_path.ts";
import { CHECKPOINT_FILE, METRICS_FILE } from "./trainer.ts";

/** File name of the lock inside a run directory. */
export const LOCK_FILE = "run.lock";

/** The files a run writes in its directory (what `force` removes). */
export const RUN_FILES: readonly string[] = [CHECKPOINT_FILE, METRICS_FILE];

/** A run directory that cannot be used: the message names it and says why. */
export class RunDirectoryError extends InputError {
  /** Always `RunDirectoryError`. */
  override name = "RunDirectoryError";
}

/** Who holds (or held) a run directory's lock: what `run.lock` says. */
export interface LockOwner {
  /** Process id. */
  readonly pid: number;
  /** Host name (`unknown` when it could not be read). */
  readonly host: string;
  /** When the run started (ISO 8601). */
  readonly started: string;
}

/** Options of {@linkcode openRunDirectory}. */
export interface OpenRunOptions {
  /** The run continues the directory's checkpoint: its files are kept. */
  readonly resume: boolean;
  /** A fresh run into a non-empty directory removes the run's files first instead of refusing. */
  readonly force?: boolean;
}

/** An opened run directory, locked by this process until {@linkcode RunDirectory.release}. */
export interface RunDirectory {
  /** The directory. */
  readonly path: string;
  /** Whether this call created it. */
  readonly created: boolean;
  /** The owner named by a stale lock that was replaced (its process is gone), if any. */
  readonly staleLock?: LockOwner;
  /** Stale temporary files removed (names). */
  readonly removedTemporaryFiles: readonly string[];
  /** Run files removed by `force` (names). */
  readonly removedRunFiles: readonly string[];
  /** Remove the lock; a directory this call created that is still empty is removed too. */
  release(): Promise<void>;
}

/** The host name if the runtime may read it (`--allow-sys=hostname`, or `/etc/hostname` readable), else `unknown`. */
export function hostName(): string {
  try {
    if (Deno.permissions.querySync({ name: "sys", kind: "hostname" }).state === "granted") {
      return Deno.hostname();
    }
  } catch {
    // fall through to the file
  }
  for (const file of ["/proc/sys/kernel/hostname", "/etc/hostname"]) {
    try {
      if (Deno.permissions.querySync({ name: "read", path: file }).state !== "granted") continue;
      const name = Deno.readTextFileSync(file).trim();
      if (name) return name;
    } catch {
      // not there: try the next
    }
  }
  return "unknown";
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const o = JSON.parse(text);
    if (typeof o?.pid === "number" && typeof o?.host === "string") {
      return { pid: o.pid, host: o.host, started: typeof o.started === "string" ? o.started : "?" };
    }
  } catch {
    // not a lock we wrote
  }
  return undefined;
}

function ownerText(owner: LockOwner | undefined): string {
  return owner ? `pid ${owner.pid} on host ${owner.host}, started ${owner.started}` : "an unknown process";
}

async function readAll(file: Deno.FsFile): Promise<string> {
  await file.seek(0, Deno.SeekMode.Start);
  const chunks: Uint8Array[] = [];
  const buffer = new Uint8Array(4096);
  for (;;) {
    const n = await file.read(buffer);
    if (n === null) break;
    chunks.push(buffer.slice(0, n));
  }
  const out = new Uint8Array(chunks.reduce((s, c) => s + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return new TextDecoder().decode(out);
}

async function ensureDirectory(dir: string): Promise<boolean> {
  try {
    const info = await Deno.stat(dir);
    if (!info.isDirectory) {
      throw new RunDirectoryError(`--out ${dir} is not a directory (a run directory goes here)`);
    }
    return false;
  } catch (err) {
    if (err instanceof RunDirectoryError || err instanceof Deno.errors.NotCapable) throw err;
    if (!(err instanceof Deno.errors.NotFound) && (err as { code?: string }).code !== "ENOTDIR") throw err;
  }
  try {
    await Deno.mkdir(dir, { recursive: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) throw err;
    throw new RunDirectoryError(`--out ${dir}: cannot create the run directory: ${describeFsError(err)}`, {
      cause: err,
    });
  }
  return true;
}

/** Take the lock of `dir`; returns the open, locked file and the owner of a stale lock it replaced. */
async function takeLock(dir: string): Promise<{ file: Deno.FsFile; stale?: LockOwner }> {
  const path = `${dir}/${LOCK_FILE}`;
  for (let attempt = 0; attempt < 5; attempt++) {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(path, { read: true, write: true, create: true });
    } catch (err) {
      if (err instanceof Deno.errors.NotCapable) throw err;
      throw new RunDirectoryError(
        `--out ${dir}: cannot write in the run directory: ${describeFsError(err)}`,
        {
          cause: err,
        },
      );
    }
    if (!(await file.tryLock(true))) {
      const owner = parseOwner(await readAll(file).catch(() => ""));
      file.close();
      throw new RunDirectoryError(
        `--out ${dir} is in use by another run (${ownerText(owner)}; lock ${path}); ` +
          "wait for it to finish or stop it, or choose another --out",
      );
    }
    // the holder before us may have removed the file between our open and our lock: lock the file
    // that is at the path now
    const [held, current] = await Promise.all([file.stat(), Deno.stat(path).catch(() => null)]);
    if (!current || current.ino !== held.ino || current.dev !== held.dev) {
      file.close();
      continue;
    }
    const previous = await readAll(file);
    const stale = previous.trim() === "" ? undefined : parseOwner(previous) ?? {
      pid: -1,
      host: "unknown",
      started: "?",
    };
    const owner: LockOwner = { pid: Deno.pid, host: hostName(), started: new Date().toISOString() };
    await file.truncate(0);
    await file.seek(0, Deno.SeekMode.Start);
    await file.write(new TextEncoder().encode(JSON.stringify(owner) + "\n"));
    return { file, stale };
  }
  throw new RunDirectoryError(`--out ${dir}: could not take the lock ${path} (it keeps being replaced)`);
}

async function entries(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  return names.sort();
}

/**
 * Open `dir` for a run under the rules of the module doc: create it when missing, take its lock,
 * remove stale temporary files, and for a fresh run require it to be empty (or, with `force`,
 * remove the run's files). Throws a {@linkcode RunDirectoryError} naming the directory.
 */
export async function openRunDirectory(dir: string, options: OpenRunOptions): Promise<RunDirectory> {
  if (options.resume && options.force) {
    throw new RunDirectoryError("--force starts a run clean and --resume continues it: pass one of them");
  }
  const created = await ensureDirectory(dir);
  const { file, stale } = await takeLock(dir);
  const release = async () => {
    await Deno.remove(`${dir}/${LOCK_FILE}`).catch(() => {});
    file.close();
    if (created) await Deno.remove(dir).catch(() => {}); // only succeeds while it is empty
  };
  try {
    const removedTemporaryFiles: string[] = [];
    const removedRunFiles: string[] = [];
    for (const name of await entries(dir)) {
      if (isTemporaryNameFor(name, CHECKPOINT_FILE) || isTemporaryNameFor(name, METRICS_FILE)) {
        await Deno.remove(`${dir}/${name}`);
        removedTemporaryFiles.push(name);
      }
    }
    if (!options.resume) {
      const present = (await entries(dir)).filter((n) => n !== LOCK_FILE);
      if (present.length > 0 && !options.force) {
        const held = present.includes(CHECKPOINT_FILE)
          ? "already holds a checkpoint"
          : `is not empty (it holds ${present.slice(0, 5).join(", ")}${present.length > 5 ? ", ..." : ""})`;
        throw new RunDirectoryError(
          `${dir} ${held}; pass --resume to continue that run, --force to start clean ` +
            `(removes ${RUN_FILES.join(" and ")}), or choose another --out`,
        );
      }
      for (const name of RUN_FILES) {
        if (!present.includes(name)) continue;
        await Deno.remove(`${dir}/${name}`);
        removedRunFiles.push(name);
      }
    }
    return { path: dir, created, staleLock: stale, removedTemporaryFiles, removedRunFiles, release };
  } catch (err) {
    await release();
    throw err;
  }
}
