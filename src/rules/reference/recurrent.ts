/**
 * Recurrent form of every rule (SPEC section 3): the oracle. Placeholder until implemented.
 *
 * @module
 */

import type { HeadForm } from "./head.ts";

/** The recurrent form of every rule. */
export const recurrentForm: HeadForm = {
  forward() {
    throw new Error("recurrent form: not implemented yet");
  },
  backward() {
    throw new Error("recurrent form: not implemented yet");
  },
};
