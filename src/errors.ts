/**
 * Errors shared by the core and the CLI.
 *
 * @module
 */

/**
 * Bad input from the user: a malformed or missing file, a field with a wrong value, an option out
 * of range. The message names the file, the field and the value. The CLI exits with code 2.
 */
export class InputError extends Error {
  /** Always `InputError`. */
  override name = "InputError";
}
