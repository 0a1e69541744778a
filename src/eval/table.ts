/**
 * The terminal table of an evaluation report: one row per test group, one column per checkpoint.
 *
 * Summary rows use each checkpoint's own training length `L`: `avg 1-L` (in distribution) and
 * `avg (L+1)-max` (beyond); a range of one length is labelled `only N` (not `avg N-N`); checkpoints trained on different lengths get different rows, each
 * filled only in the columns of the checkpoints it belongs to. Addition adds a column per distinct
 * `L` with the no-extrapolation reference (`reference.ts`) and a second table of accuracy per place
 * value, with the places `>= L` marked `*` and pooled into the extrapolation row.
 *
 * @module
 */

import type { GroupAccuracy, PlaceRangeAccuracy, RangeAverage } from "./metrics.ts";
import type { CheckpointResult, EvalReport } from "./report.ts";
import type { NoExtrapolationReference } from "./reference.ts";

/** A rate as a percentage with one decimal, `-` when undefined. */
export function percent(rate: number): string {
  return Number.isFinite(rate) ? (100 * rate).toFixed(1) : "-";
}

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ").trimEnd();
}

/** Header, rule and rows as aligned lines. */
function aligned(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [
    pad(header, widths),
    widths.map((w) => "-".repeat(w)).join("  "),
    ...rows.map((r) => pad(r, widths)),
  ];
}

function rateCell(g: Pick<GroupAccuracy, "digitAccuracy" | "exactMatch"> | null | undefined): string {
  return g ? `${percent(g.digitAccuracy)} / ${percent(g.exactMatch)}` : "-";
}

/** A column of the length table: a checkpoint, or the reference at one training length. */
interface LengthColumn {
  readonly header: string;
  readonly group: (key: number) => GroupAccuracy | undefined;
  readonly inDistribution: RangeAverage | null;
  readonly extrapolation: RangeAverage | null;
}

/** The distinct references of a report's checkpoints, one per training length, in order of appearance. */
function distinctReferences(cks: readonly CheckpointResult[]): NoExtrapolationReference[] {
  const byLength = new Map<number, NoExtrapolationReference>();
  for (const c of cks) {
    if (c.reference && !byLength.has(c.reference.trainLength)) {
      byLength.set(c.reference.trainLength, c.reference);
    }
  }
  return [...byLength.values()];
}

/** One row per distinct range label, filled in the columns whose range has that label. */
function rangeRows<C>(
  columns: readonly C[],
  pick: (c: C) => { label: string; cell: string } | null,
): string[][] {
  const labels: string[] = [];
  for (const c of columns) {
    const p = pick(c);
    if (p && !labels.includes(p.label)) labels.push(p.label);
  }
  return labels.map((label) => [
    label,
    ...columns.map((c) => {
      const p = pick(c);
      return p && p.label === label ? p.cell : "-";
    }),
  ]);
}

/** `avg 1-2` for a range, `only 3` for a single length (its mean is that length's row). */
function rangeLabel(avg: RangeAverage): string {
  return avg.from === avg.to ? `only ${avg.from}` : `avg ${avg.from}-${avg.to}`;
}

function lengthTable(report: EvalReport): string[] {
  const cks = report.checkpoints;
  const columns: LengthColumn[] = [
    ...cks.map((c) => ({
      header: c.label,
      group: (key: number) => c.groups.find((g) => g.key === key),
      inDistribution: c.inDistribution,
      extrapolation: c.extrapolation,
    })),
    ...distinctReferences(cks).map((r) => ({
      header: `ref L=${r.trainLength}`,
      group: (key: number) => r.perLength.find((g) => g.key === key),
      inDistribution: r.inDistribution,
      extrapolation: r.extrapolation,
    })),
  ];
  const rows = report.keys.map((key) => [String(key), ...columns.map((c) => rateCell(c.group(key)))]);
  for (const pick of ["inDistribution", "extrapolation"] as const) {
    rows.push(...rangeRows(columns, (c) => {
      const avg = c[pick];
      return avg ? { label: rangeLabel(avg), cell: rateCell(avg) } : null;
    }));
  }
  return aligned([report.keyName, ...columns.map((c) => c.header)], rows);
}

function placeRangeCell(range: PlaceRangeAccuracy | null | undefined): string {
  return range ? percent(range.digitAccuracy) : "-";
}

/** The per-place table of the checkpoints that have places; empty when none has. */
function placeTable(report: EvalReport): string[] {
  const cks = report.checkpoints.filter((c) => c.places);
  if (cks.length === 0) return [];
  const highest = Math.max(...cks.map((c) => c.places!.perPlace.length)) - 1;
  const digits = (place: number) => {
    const counts = cks.map((c) => c.places!.perPlace[place]?.tokens).filter((n) => n !== undefined);
    return counts.length > 0 ? String(Math.max(...counts)) : "-";
  };
  const rows: string[][] = [];
  for (let place = 0; place <= highest; place++) {
    rows.push([
      String(place),
      digits(place),
      ...cks.map((c) => {
        const p = c.places!.perPlace[place];
        if (!p || p.tokens === 0) return "- ";
        return percent(p.digitAccuracy) + (place >= c.places!.trainLength ? "*" : " ");
      }),
    ]);
  }
  const summary = (pick: "inRange" | "extrapolation") =>
    rangeRows(cks, (c) => {
      const L = c.places!.trainLength;
      const label = pick === "inRange" ? (L === 1 ? "places 0" : `places 0-${L - 1}`) : `places >= ${L}`;
      return { label, cell: placeRangeCell(c.places![pick]) + " " };
    }).map(([label, ...cells]) => [label, "", ...cells]);
  rows.push(...summary("inRange"), ...summary("extrapolation"));
  return [
    "per place value: digit accuracy % over every test sum (* = place >= the checkpoint's training length L: " +
    "no training sum had it; a model that guesses there scores 10%)",
    ...aligned(["place", "digits", ...cks.map((c) => c.label)], rows),
  ];
}

/**
 * Format a report as an aligned text table. Accuracy tasks show `digit% / exact%` per group and the
 * in-distribution and extrapolation means; addition adds the reference columns and the per-place
 * table; the text task shows bits per byte and perplexity.
 */
export function formatTable(report: EvalReport): string {
  const cks = report.checkpoints;
  if (report.task === "text") {
    const rows = [
      ["bits/byte", ...cks.map((c) => (c.text ? c.text.bitsPerByte.toFixed(4) : "-"))],
      ["perplexity", ...cks.map((c) => (c.text ? c.text.perplexity.toFixed(3) : "-"))],
      ["bytes", ...cks.map((c) => String(c.text?.bytes ?? "-"))],
    ];
    const lines = aligned([report.keyName, ...cks.map((c) => c.label)], rows);
    return [`${report.task}: bits per byte on the held-out file`, ...lines].join("\n") + "\n";
  }
  // mqar scores recall of the queried values, not digits
  const metric = report.task === "mqar"
    ? "teacher-forced recall % (per query) / exact match % (every query of a sequence right)"
    : "teacher-forced digit accuracy % / exact match %";
  const legend =
    `${report.task}: ${metric}, ${report.samples} samples per ${report.keyName}, seed ${report.seed}` +
    (report.hintOffset ? `, hints from id ${report.hintOffset}` : "");
  const references = distinctReferences(cks);
  const referenceNote = references.length === 0 ? [] : [
    "ref L=N: no-extrapolation reference, the expected score of a model right on every place < N and " +
    "guessing (10%) beyond",
  ];
  const places = placeTable(report);
  return [legend, ...lengthTable(report), ...referenceNote, ...(places.length > 0 ? ["", ...places] : [])]
    .join("\n") + "\n";
}
