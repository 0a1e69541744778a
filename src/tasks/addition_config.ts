/**
 * Configuration of the addition task (SPEC section 8 and 8.1): the operand length, the digit orders,
 * BOS, index hints, equal-length operands and the length curriculum, with defaults and validation.
 *
 * Every field has a default that means the format of the first version of the task (operands
 * most-significant digit first, answer least-significant first, no BOS, no hints, independent
 * operand lengths, no curriculum), so a configuration stored before these options existed, normalised
 * through {@linkcode additionConfig}, describes the same task.
 *
 * @module
 */

/** A digit order: `msd` (most-significant digit first, as numbers are usually written) or `lsd`. */
export type AdditionFormat = "lsd" | "msd";

/** The length curriculum: the largest training operand length rises from `startDigits` to `maxDigits`. */
export interface AdditionCurriculum {
  /** Largest operand length at the first step (1..maxDigits). */
  readonly startDigits: number;
  /** Fraction of the training steps over which the length rises, in (0, 1]. */
  readonly fraction: number;
}

/** Configuration of the addition task. */
export interface AdditionConfig {
  /** Always `addition`. */
  readonly task: "addition";
  /** Largest operand length `L` in digits (the paper trains on 32). */
  readonly maxDigits: number;
  /**
   * ANSWER digit order (default `lsd`). The name `format` is kept from the first version of the
   * task, when the answer order was the only format option.
   */
  readonly format: AdditionFormat;
  /** Operand digit order (default `msd`, written as usual; `lsd` reversed, aligned with an lsd answer). */
  readonly operandOrder: AdditionFormat;
  /** A beginning-of-sequence token before the first operand of every example (default off). */
  readonly bos: boolean;
  /**
   * Number `H` of index-hint ids (default 0 = no hints). With hints, every digit is preceded by a
   * hint token naming its place; `H` must be at least `maxDigits + 1` (the answer's places).
   */
  readonly indexHints: number;
  /** Both training operands have the same length, drawn from `[1, L]` (default off). */
  readonly equalLength: boolean;
  /** Length curriculum, or null (default) to train on `[1, L]` from the first step. */
  readonly curriculum: AdditionCurriculum | null;
}

/** The fields of {@linkcode AdditionConfig} a caller may set (all optional; `task` is ignored). */
export type AdditionOptions = Partial<Omit<AdditionConfig, "task">> & { readonly task?: "addition" };

const DEFAULTS: Omit<AdditionConfig, "task"> = {
  maxDigits: 32,
  format: "lsd",
  operandOrder: "msd",
  bos: false,
  indexHints: 0,
  equalLength: false,
  curriculum: null,
};

function describe(value: unknown): string {
  return typeof value === "string" ? `"${value}"` : JSON.stringify(value) ?? String(value);
}

function checkOrder(field: "format" | "operandOrder", value: unknown): void {
  if (value !== "lsd" && value !== "msd") {
    const choices = field === "format" ? "lsd or msd" : "msd or lsd";
    throw new RangeError(`addition: ${field} must be ${choices}, got ${describe(value)}`);
  }
}

function checkBoolean(field: "bos" | "equalLength", value: unknown): void {
  if (typeof value !== "boolean") {
    throw new RangeError(`addition: ${field} must be true or false, got ${describe(value)}`);
  }
}

function checkCurriculum(value: unknown, maxDigits: number): AdditionCurriculum | null {
  if (value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new RangeError(
      `addition: curriculum must be null or { startDigits, fraction }, got ${describe(value)}`,
    );
  }
  const { startDigits, fraction } = value as Record<string, unknown>;
  if (
    typeof startDigits !== "number" || !Number.isInteger(startDigits) || startDigits < 1 ||
    startDigits > maxDigits
  ) {
    throw new RangeError(
      `addition: curriculum.startDigits must be an integer in [1, maxDigits = ${maxDigits}], got ${
        describe(startDigits)
      }`,
    );
  }
  if (typeof fraction !== "number" || !(fraction > 0 && fraction <= 1)) {
    throw new RangeError(`addition: curriculum.fraction must be in (0, 1], got ${describe(fraction)}`);
  }
  return { startDigits, fraction };
}

/**
 * Build an {@linkcode AdditionConfig}: fields left out (or `undefined`) take their defaults, every
 * field is validated (a RangeError names the field and the value), unknown fields are dropped.
 *
 * @example
 * ```ts
 * import { additionConfig } from "./addition_config.ts";
 * const config = additionConfig({ maxDigits: 8, operandOrder: "lsd", bos: true, indexHints: 24 });
 * if (config.format !== "lsd" || config.curriculum !== null) throw new Error("defaults expected");
 * ```
 */
export function additionConfig(overrides: AdditionOptions = {}): AdditionConfig {
  const pick = <K extends keyof typeof DEFAULTS>(key: K): (typeof DEFAULTS)[K] =>
    overrides[key] === undefined ? DEFAULTS[key] : overrides[key] as (typeof DEFAULTS)[K];
  const maxDigits = pick("maxDigits");
  if (!Number.isInteger(maxDigits) || maxDigits < 1) {
    throw new RangeError(`addition: maxDigits must be an integer >= 1, got ${maxDigits}`);
  }
  const format = pick("format");
  checkOrder("format", format);
  const operandOrder = pick("operandOrder");
  checkOrder("operandOrder", operandOrder);
  const bos = pick("bos");
  checkBoolean("bos", bos);
  const indexHints = pick("indexHints");
  if (
    typeof indexHints !== "number" || !Number.isInteger(indexHints) || indexHints < 0 ||
    (indexHints > 0 && indexHints < maxDigits + 1)
  ) {
    throw new RangeError(
      `addition: indexHints must be 0 (off) or an integer >= maxDigits + 1 = ${
        maxDigits + 1
      } (one id per answer place), got ${describe(indexHints)}`,
    );
  }
  const equalLength = pick("equalLength");
  checkBoolean("equalLength", equalLength);
  const curriculum = checkCurriculum(pick("curriculum"), maxDigits);
  return { task: "addition", maxDigits, format, operandOrder, bos, indexHints, equalLength, curriculum };
}
