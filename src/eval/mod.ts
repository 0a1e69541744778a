/**
 * Evaluation (SPEC section 8): teacher-forced accuracy (per length and per place value), the
 * no-extrapolation reference, bits per byte, the streaming evaluation loop over several
 * checkpoints, the periodic evaluation during training, seeded test sets, and the report formats
 * (table, JSON, CSV, SVG plot). PNG rendering lives in `png.ts` and is imported on demand (it loads a 2.5 MB WASM module).
 *
 * @example
 * ```ts
 * import { addTeacherForced, emptyAccuracyTally } from "./mod.ts";
 * const tally = emptyAccuracyTally();
 * const batch = { B: 1, T: 1, targets: Int32Array.of(1), weights: Float32Array.of(1), starts: Uint8Array.of(1) };
 * addTeacherForced(tally, Float32Array.of(0, 2), batch, 2);
 * if (tally.correctTokens !== 1) throw new Error("expected the argmax to hit");
 * ```
 *
 * @module
 */

export * from "./metrics.ts";
export * from "./reference.ts";
export * from "./evaluate.ts";
export * from "./periodic.ts";
export * from "./test_sets.ts";
export * from "./lengths.ts";
export * from "./load.ts";
export * from "./run.ts";
export * from "./report.ts";
export * from "./table.ts";
export * from "./csv.ts";
export * from "./plot.ts";
