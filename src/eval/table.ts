/**
 * The terminal table of an evaluation report: one row per test group, one column per checkpoint.
 *
 * @module
 */

import type { RangeAverage } from "./metrics.ts";
import type { EvalReport } from "./report.ts";

/** A rate as a percentage with one decimal, `-` when undefined. */
export function percent(rate: number): string {
  return Number.isFinite(rate) ? (100 * rate).toFixed(1) : "-";
}

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ").trimEnd();
}

function rangeCell(avg: RangeAverage | null): string {
  return avg === null ? "-" : `${percent(avg.digitAccuracy)} / ${percent(avg.exactMatch)}`;
}

/**
 * Format a report as an aligned text table. Accuracy tasks show `digit% / exact%` per group and the
 * in-distribution and extrapolation means; the text task shows bits per byte and perplexity.
 */
export function formatTable(report: EvalReport): string {
  const cks = report.checkpoints;
  const header = [report.keyName, ...cks.map((c) => c.label)];
  const rows: string[][] = [];
  if (report.task === "text") {
    rows.push(["bits/byte", ...cks.map((c) => (c.text ? c.text.bitsPerByte.toFixed(4) : "-"))]);
    rows.push(["perplexity", ...cks.map((c) => (c.text ? c.text.perplexity.toFixed(3) : "-"))]);
    rows.push(["bytes", ...cks.map((c) => String(c.text?.bytes ?? "-"))]);
  } else {
    for (const key of report.keys) {
      rows.push([
        String(key),
        ...cks.map((c) => {
          const g = c.groups.find((x) => x.key === key);
          return g ? `${percent(g.digitAccuracy)} / ${percent(g.exactMatch)}` : "-";
        }),
      ]);
    }
    const ranges = (pick: "inDistribution" | "extrapolation") => {
      const first = cks.map((c) => c[pick]).find((a) => a !== null);
      return first ? `avg ${first.from}-${first.to}` : null;
    };
    const inName = ranges("inDistribution");
    if (inName) rows.push([inName, ...cks.map((c) => rangeCell(c.inDistribution))]);
    const exName = ranges("extrapolation");
    if (exName) rows.push([exName, ...cks.map((c) => rangeCell(c.extrapolation))]);
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const lines = [
    pad(header, widths),
    widths.map((w) => "-".repeat(w)).join("  "),
    ...rows.map((r) => pad(r, widths)),
  ];
  const legend = report.task === "text"
    ? `${report.task}: bits per byte on the held-out file`
    : `${report.task}: teacher-forced digit accuracy % / exact match %, ${report.samples} samples per ${report.keyName}, seed ${report.seed}`;
  return [legend, ...lines].join("\n") + "\n";
}
