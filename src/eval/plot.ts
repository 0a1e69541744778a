/**
 * Accuracy against operand length (or number of mqar pairs), one line per checkpoint, the training
 * length marked by a dashed rule; for addition a second panel of accuracy per place value (the
 * extrapolation: places at or beyond the training length). Built as a Vega-Lite 6 spec, compiled to Vega 6 and rendered
 * headless (`renderer: "none"`, `view.toSVG()`): no browser, no DOM.
 *
 * @module
 */

import * as vega from "vega";
import * as vl from "vega-lite";
import type { EvalReport } from "./report.ts";

/** Which rate the plot shows. */
export type PlotMetric = "digitAccuracy" | "exactMatch";

/** Axis titles of a plot of `report` (exported so tests can look for them in the SVG). */
export function plotTitles(
  report: EvalReport,
  metric: PlotMetric = "digitAccuracy",
): { x: string; y: string } {
  const x = report.keyName === "pairs" ? "Key-value pairs" : "Operand length (digits)";
  const y = metric === "digitAccuracy"
    ? (report.task === "mqar" ? "Recall accuracy (teacher-forced)" : "Digit accuracy (teacher-forced)")
    : "Exact-match rate (teacher-forced)";
  return { x, y };
}

/** A checkpoint's line colour: the same scheme and order in every panel. */
function colorEncoding(report: EvalReport) {
  const order = report.checkpoints.map((c) => c.label);
  return {
    field: "checkpoint",
    type: "nominal" as const,
    title: "Checkpoint",
    sort: order,
    // tableau10 tells up to 10 lines apart; the full addition experiment plots 14, so more switch to 20 colours
    scale: { scheme: order.length <= 10 ? "tableau10" : "tableau20" },
    legend: { labelLimit: 400 },
  };
}

/**
 * One panel: lines and points of `values` (`checkpoint`, `key`, `value`) and, per checkpoint, a
 * dashed rule at its training length in its own line colour, labelled in that colour (labels of
 * several checkpoints stack upwards from the bottom).
 */
function linePanel(
  report: EvalReport,
  values: { checkpoint: string; key: number; value: number | null }[],
  titles: { x: string; y: string },
  title: string,
  ruleText: (trainLength: number) => string,
) {
  const rules = report.checkpoints
    .filter((c) => c.trainLength !== null)
    .map((c, i) => ({
      checkpoint: c.label,
      key: c.trainLength,
      text: ruleText(c.trainLength!),
      labelY: 0.03 + 0.06 * i,
    }));
  const color = colorEncoding(report);
  const x = {
    field: "key",
    type: "quantitative" as const,
    title: titles.x,
    scale: { zero: false, nice: false },
    axis: { format: "d", tickMinStep: 1 },
  };
  return {
    width: 560,
    height: 320,
    title,
    layer: [
      {
        data: { values },
        mark: { type: "line", strokeWidth: 2 },
        encoding: {
          x,
          y: {
            field: "value",
            type: "quantitative",
            title: titles.y,
            scale: { domain: [0, 1] },
            axis: { format: "%" },
          },
          color,
        },
      },
      {
        data: { values },
        mark: { type: "point", filled: true, size: 18 },
        encoding: { x, y: { field: "value", type: "quantitative" }, color },
      },
      {
        data: { values: rules },
        mark: { type: "rule", strokeDash: [4, 4], strokeWidth: 1.5 },
        encoding: { x: { field: "key", type: "quantitative" }, color },
      },
      {
        data: { values: rules },
        mark: { type: "text", align: "left", dx: 4, baseline: "middle" },
        encoding: {
          x: { field: "key", type: "quantitative" },
          y: { field: "labelY", type: "quantitative" },
          text: { field: "text" },
          color,
        },
      },
    ],
  };
}

/** Axis titles of the per-place panel. */
export const PLACE_PLOT_TITLES = {
  x: "Place value of the answer digit (0 = units)",
  y: "Digit accuracy at that place (teacher-forced)",
} as const;

/**
 * The Vega-Lite spec of the plot: the rate by operand length (or pairs), one line per checkpoint,
 * a dashed rule per training length. When checkpoints have per-place results (addition), a second
 * panel below shows the digit accuracy per place value over every test sum, the rule at place `L`
 * marking where the places no training sum had begin; both panels share the colours and the legend.
 */
export function plotSpec(report: EvalReport, metric: PlotMetric = "digitAccuracy"): vl.TopLevelSpec {
  if (report.task === "text") {
    throw new RangeError(
      "the text task has a single number per checkpoint (bits per byte); there is nothing to plot",
    );
  }
  const titles = plotTitles(report, metric);
  const values = report.checkpoints.flatMap((c) =>
    c.groups.map((g) => ({
      checkpoint: c.label,
      key: g.key,
      value: Number.isFinite(g[metric]) ? g[metric] : null,
    }))
  );
  const lengths = linePanel(
    report,
    values,
    titles,
    `${report.task}: ${titles.y.toLowerCase()} by ${report.keyName}`,
    (l) => `train length ${l}`,
  );
  const head = { $schema: "https://vega.github.io/schema/vega-lite/v6.json", background: "white" };
  const placed = report.checkpoints.filter((c) => c.places);
  if (placed.length === 0) return { ...head, ...lengths } as vl.TopLevelSpec;
  const placeValues = placed.flatMap((c) =>
    c.places!.perPlace.filter((p) => p.tokens > 0).map((p) => ({
      checkpoint: c.label,
      key: p.place,
      value: Number.isFinite(p.digitAccuracy) ? p.digitAccuracy : null,
    }))
  );
  const places = linePanel(
    report,
    placeValues,
    PLACE_PLOT_TITLES,
    `${report.task}: digit accuracy by place value over every test sum (places >= L: none in training)`,
    (l) => `L=${l}`,
  );
  return { ...head, vconcat: [lengths, places], resolve: { scale: { color: "shared" } } } as vl.TopLevelSpec;
}

/** Render the plot to an SVG document. */
export async function plotSvg(report: EvalReport, metric: PlotMetric = "digitAccuracy"): Promise<string> {
  const compiled = vl.compile(plotSpec(report, metric)).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
