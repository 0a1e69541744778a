/**
 * The error `falcon convert` and `falcon inspect` raise for input they refuse. It is an
 * {@linkcode InputError}, so the CLI exits with code 2.
 *
 * @module
 */

import { SafetensorsError } from "../checkpoint/safetensors.ts";
import { InputError } from "../errors.ts";

/** A refused checkpoint file or directory: the message names the path, and the field where one applies. */
export class CheckpointError extends InputError {
  /** Always `CheckpointError`. */
  override name = "CheckpointError";
  /** The file or directory refused. */
  readonly path: string;

  /** `path` is the file refused; `reason` says what is wrong with it (naming the field and value). */
  constructor(path: string, reason: string, options?: ErrorOptions) {
    super(`${path}: ${reason}`, options);
    this.path = path;
  }
}

/**
 * Run `read` on the file at `path`, turning the safetensors reader's `SafetensorsError` into a
 * {@linkcode CheckpointError} (same message) so every refusal has one type.
 */
export function asCheckpointError<T>(path: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof SafetensorsError) {
      const reason = err.message.startsWith(`${path}: `) ? err.message.slice(path.length + 2) : err.message;
      throw new CheckpointError(path, reason, { cause: err });
    }
    throw err;
  }
}
