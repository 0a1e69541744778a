/**
 * Chunk-parallel and masked-parallel forms (SPEC section 4). Placeholder until implemented.
 *
 * @module
 */

import type { HeadForm } from "./head.ts";

/** The chunk-parallel form of every rule. */
export const chunkForm: HeadForm = {
  forward() {
    throw new Error("chunk form: not implemented yet");
  },
  backward() {
    throw new Error("chunk form: not implemented yet");
  },
};

/** The masked-parallel form (additive family; the regression family runs one chunk). */
export const parallelForm: HeadForm = {
  forward() {
    throw new Error("parallel form: not implemented yet");
  },
  backward() {
    throw new Error("parallel form: not implemented yet");
  },
};
