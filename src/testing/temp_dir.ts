/**
 * A temporary directory for one test: created (its real path, symlinks resolved), handed to `f`, and
 * removed with everything in it when `f` settles, whether it returned or threw.
 *
 * @module
 */

/** Run `f` in a fresh temporary directory and remove the directory afterwards; returns what `f` returns. */
export async function withTempDir<T>(f: (dir: string) => Promise<T>, prefix = "falcon_test_"): Promise<T> {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix }));
  try {
    return await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
