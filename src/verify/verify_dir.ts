/**
 * `falcon verify`: check a backend against a directory of test vectors. Reads the files the user
 * names; prints nothing.
 *
 * @module
 */

import type { Backend, FormOptions } from "../rules/backend.ts";
import { InputError } from "../errors.ts";
import { parseVectorFile } from "../vectors/load.ts";
import { type VectorCheck, verifyVector } from "./verify_vector.ts";

/** The result of one file: a check, or the error that stopped it (malformed file). */
export type FileResult = { readonly file: string; readonly check: VectorCheck } | {
  readonly file: string;
  readonly error: string;
};

/** The `*.json` vector files of a directory (skipping `index.json`), sorted. */
export async function vectorFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isFile && entry.name.endsWith(".json") && entry.name !== "index.json") files.push(entry.name);
    }
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) {
      throw new InputError(`vector directory ${dir} does not exist`);
    }
    throw err;
  }
  if (files.length === 0) throw new InputError(`vector directory ${dir} holds no .json vector files`);
  return files.sort();
}

/** Where a directory run stands, reported before each file starts. */
export interface VerifyProgress {
  /** File about to run. */
  readonly file: string;
  /** Its 1-based position. */
  readonly index: number;
  /** Files in the directory. */
  readonly total: number;
}

/**
 * Verify every vector file of `dir`; a malformed file becomes an error entry and the others still
 * run. `onStart` is told before each file (a vector can take minutes on a slow backend), `onFile`
 * after it with its result and the seconds it took.
 */
export async function verifyDirectory(
  backend: Backend,
  dir: string,
  options: FormOptions = {},
  onFile?: (result: FileResult, seconds: number) => void,
  onStart?: (progress: VerifyProgress) => void,
): Promise<FileResult[]> {
  const results: FileResult[] = [];
  const files = await vectorFiles(dir);
  for (const [i, file] of files.entries()) {
    onStart?.({ file, index: i + 1, total: files.length });
    const t0 = performance.now();
    let result: FileResult;
    try {
      const text = await Deno.readTextFile(`${dir}/${file}`);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (err) {
        throw new SyntaxError(`${file}: not valid JSON (${(err as Error).message})`);
      }
      result = { file, check: await verifyVector(backend, parseVectorFile(file, json), options) };
    } catch (err) {
      result = { file, error: err instanceof Error ? err.message : String(err) };
    }
    onFile?.(result, (performance.now() - t0) / 1000);
    results.push(result);
  }
  return results;
}

/** True when every file ran and every array is within tolerance. */
export function allPassed(results: readonly FileResult[]): boolean {
  return results.every((r) => "check" in r && r.check.ok);
}
