/**
 * The one place that chooses a backend. Nothing else in `src/` knows which backend runs.
 *
 * @module
 */

import type { Backend } from "./rules/backend.ts";
import { createRefBackend } from "./rules/reference/backend.ts";

/** Backend names the CLI accepts. `auto` picks the fastest available one. */
export const BACKEND_CHOICES = ["auto", "ref", "wasm", "webgpu"] as const;

/** A backend choice. */
export type BackendChoice = typeof BACKEND_CHOICES[number];

/** Options of {@linkcode selectBackend}. */
export interface SelectBackendOptions {
  /** Worker threads of the WASM backend (default: all cores). */
  readonly threads?: number;
  /** Told which backend `auto` chose and why (e.g. a fallback). */
  readonly onNote?: (note: string) => void;
}

/** Create the backend named by `choice`. */
export function selectBackend(choice: BackendChoice, options: SelectBackendOptions = {}): Promise<Backend> {
  switch (choice) {
    case "ref":
      return Promise.resolve(createRefBackend());
    case "auto":
      options.onNote?.("backend auto: using the float64 reference (no fast backend is wired in yet)");
      return Promise.resolve(createRefBackend());
    case "wasm":
    case "webgpu":
      return Promise.reject(new Error(`backend ${choice} is not available yet`));
    default:
      return Promise.reject(new RangeError(`unknown backend "${choice}"; expected ${BACKEND_CHOICES.join(", ")}`));
  }
}
