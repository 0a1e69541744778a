/**
 * CSV form of an evaluation report: one row per checkpoint and test group, plus one row per
 * checkpoint for each range mean (`row` = `in_distribution` / `extrapolation`) or for the text task.
 * Addition adds, per checkpoint: `place` rows (key = place value, tokens = answer digits of that
 * place), `places_in_range` and `places_extrapolation` (key = `from-to` places, pooled over digits),
 * and the no-extrapolation reference at its training length: `reference` rows per length (tokens =
 * expected answer digits) and `reference_in_distribution` / `reference_extrapolation`.
 *
 * @module
 */

import type { EvalReport } from "./report.ts";

/** Column names, in order. */
export const CSV_COLUMNS = [
  "label",
  "path",
  "mixer",
  "alignment",
  "seed",
  "train_length",
  "task",
  "row",
  "key",
  "tokens",
  "sequences",
  "digit_accuracy",
  "exact_match",
  "bits_per_byte",
  "perplexity",
] as const;

/** Quote a CSV field when it holds a comma, quote or line break (RFC 4180). */
export function csvField(value: string | number | null): string {
  if (value === null) return "";
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "";
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** The report as CSV text with a header line. */
export function reportCsv(report: EvalReport): string {
  const lines = [CSV_COLUMNS.join(",")];
  for (const c of report.checkpoints) {
    const head = [c.label, c.path, c.mixer, c.alignment, c.seed, c.trainLength, report.task];
    const push = (cells: (string | number | null)[]) =>
      lines.push([...head, ...cells].map(csvField).join(","));
    for (const g of c.groups) {
      push(["group", g.key, g.tokens, g.sequences, g.digitAccuracy, g.exactMatch, null, null]);
    }
    for (
      const [row, avg] of [["in_distribution", c.inDistribution], ["extrapolation", c.extrapolation]] as const
    ) {
      if (avg) {
        push([row, `${avg.from}-${avg.to}`, null, avg.groups, avg.digitAccuracy, avg.exactMatch, null, null]);
      }
    }
    for (const p of c.places?.perPlace ?? []) {
      push(["place", p.place, p.tokens, null, p.digitAccuracy, null, null, null]);
    }
    for (
      const [row, range] of [
        ["places_in_range", c.places?.inRange],
        ["places_extrapolation", c.places?.extrapolation],
      ] as const
    ) {
      if (range) {
        push([row, `${range.from}-${range.to}`, range.tokens, null, range.digitAccuracy, null, null, null]);
      }
    }
    for (const g of c.reference?.perLength ?? []) {
      push(["reference", g.key, g.tokens, null, g.digitAccuracy, g.exactMatch, null, null]);
    }
    for (
      const [row, avg] of [
        ["reference_in_distribution", c.reference?.inDistribution],
        ["reference_extrapolation", c.reference?.extrapolation],
      ] as const
    ) {
      if (avg) {
        push([row, `${avg.from}-${avg.to}`, null, avg.groups, avg.digitAccuracy, avg.exactMatch, null, null]);
      }
    }
    if (c.text) push(["text", null, c.text.bytes, null, null, null, c.text.bitsPerByte, c.text.perplexity]);
  }
  return lines.join("\n") + "\n";
}
