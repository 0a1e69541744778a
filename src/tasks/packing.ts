/**
 * Packing examples into a {@linkcode Batch}: each of the `B` rows of `T` positions holds as many
 * whole examples as fit, each flagged as a sequence start; the rest of a row is PAD with weight 0.
 *
 * An example of length `n` placed at offset `o` fills positions `o..o+n-1`:
 * `ids[o+i] = tokens[i]`, `targets[o+i] = tokens[i+1]`, `weights[o+i] = loss[i+1]`, and its last
 * position predicts nothing (target PAD, weight 0). When examples carry `places`, the batch gets
 * `places[o+i] = places[i+1]` (the place of the token position `o+i` predicts), -1 elsewhere. Examples are never split. An example that does
 * not fit in the rest of a row opens the next row; the one that does not fit in the last row is
 * dropped, so a batch depends only on the stream's state when packing began.
 *
 * Examples with place values (addition) also fill `places`, aligned with `targets`:
 * `places[o+i] = places_of_example[i+1]` (the place of the digit position `o+i` predicts), -1 for
 * every other position (padding, the last position of an example, examples without places). A
 * batch none of whose examples has places has no `places`.
 *
 * @module
 */

import type { Batch } from "../model/types.ts";
import type { Example } from "./types.ts";

/** Pack examples drawn from `next` into `B` rows of `T` positions. */
export function packBatch(next: () => Example, B: number, T: number, padId: number): Batch {
  for (const [name, v] of [["B", B], ["T", T]] as const) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RangeError(`packBatch: ${name} must be an integer >= 1, got ${v}`);
    }
  }
  const ids = new Int32Array(B * T).fill(padId);
  const targets = new Int32Array(B * T).fill(padId);
  const weights = new Float32Array(B * T);
  const starts = new Uint8Array(B * T);
  let places: Int16Array | undefined;
  let pending: Example | null = null;
  for (let row = 0; row < B; row++) {
    let offset = 0;
    for (;;) {
      const ex: Example = pending ?? next();
      pending = null;
      const n = ex.tokens.length;
      if (n > T) throw new RangeError(`packBatch: an example of ${n} tokens does not fit a row of T = ${T}`);
      if (ex.loss.length !== n) {
        throw new RangeError(`packBatch: example has ${n} tokens but ${ex.loss.length} loss flags`);
      }
      if (ex.places && ex.places.length !== n) {
        throw new RangeError(`packBatch: example has ${n} tokens but ${ex.places.length} places`);
      }
      if (offset + n > T) {
        pending = ex;
        break;
      }
      const base = row * T + offset;
      starts[base] = 1;
      ids.set(ex.tokens, base);
      targets.set(ex.tokens.subarray(1), base);
      for (let i = 0; i + 1 < n; i++) weights[base + i] = ex.loss[i + 1];
      if (ex.places) {
        places ??= new Int16Array(B * T).fill(-1);
        places.set(ex.places.subarray(1), base);
      }
      offset += n;
      if (offset === T) break;
    }
    // padding after the last example is its own (unsupervised) segment
    if (offset < T) starts[row * T + offset] = 1;
  }
  return places ? { B, T, ids, targets, weights, starts, places } : { B, T, ids, targets, weights, starts };
}
