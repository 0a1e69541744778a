/**
 * Parsing the `--lengths` option: comma-separated items, each `N` or an inclusive range `A-B`,
 * with `1 <= A <= B`; the result is sorted and free of repeats.
 *
 * @module
 */

/** Largest length or pair count accepted (keeps a typo from asking for millions of test groups). */
export const MAX_EVAL_LENGTH = 4096;

/**
 * Parse `1-48`, `5`, `1-4,8,16` into sorted distinct integers; throws a RangeError naming the bad item.
 *
 * @example
 * ```ts
 * import { parseLengths } from "./lengths.ts";
 * const lengths = parseLengths("1-3,8");
 * if (lengths.join(",") !== "1,2,3,8") throw new Error("unexpected lengths");
 * ```
 */
export function parseLengths(spec: string): number[] {
  const out = new Set<number>();
  const items = spec.split(",").map((s) => s.trim());
  for (const item of items) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(item);
    if (!m) throw new RangeError(`length item "${item}" is not N or A-B (e.g. 1-48)`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (from < 1) throw new RangeError(`length range "${item}" starts at ${from}; lengths start at 1`);
    if (to < from) throw new RangeError(`length range "${item}" runs backwards (${from} > ${to})`);
    if (to > MAX_EVAL_LENGTH) throw new RangeError(`length range "${item}" goes past ${MAX_EVAL_LENGTH}`);
    for (let n = from; n <= to; n++) out.add(n);
  }
  return [...out].sort((a, b) => a - b);
}
