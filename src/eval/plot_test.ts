import { assertEquals, assertThrows } from "./_assert.ts";
import { fixtureReport, placedFixtureReport } from "./_fixture_report.ts";
import { PLACE_PLOT_TITLES, plotSpec, plotSvg, plotTitles } from "./plot.ts";
import { svgToPng } from "./png.ts";

/** The `<path>` elements inside Vega's line-mark groups: one per series. */
function linePaths(svg: string): string[] {
  const groups = [...svg.matchAll(/<g class="mark-line role-mark[^"]*"[^>]*>(.*?)<\/g>/gs)].map((m) => m[1]);
  return groups.flatMap((g) => [...g.matchAll(/<path\b[^>]*>/g)].map((m) => m[0]));
}

Deno.test("plotSvg() has both axis titles, one line path per checkpoint and the training-length label", async () => {
  const report = fixtureReport();
  const svg = await plotSvg(report);
  const titles = plotTitles(report);
  assertEquals(titles, { x: "Operand length (digits)", y: "Digit accuracy (teacher-forced)" });
  assertEquals(svg.startsWith("<svg"), true);
  assertEquals(svg.includes(`>${titles.x}</text>`), true);
  assertEquals(svg.includes(`>${titles.y}</text>`), true);
  assertEquals(linePaths(svg).length, report.checkpoints.length);
  assertEquals(svg.includes("train length 2"), true);
  for (const c of report.checkpoints) assertEquals(svg.includes(c.label), true);
});

Deno.test("plotSvg() draws one more line when a third checkpoint is added", async () => {
  const report = fixtureReport();
  const third = { ...report.checkpoints[0], label: "falcon3a prefix s2" };
  const svg = await plotSvg({ ...report, checkpoints: [...report.checkpoints, third] });
  assertEquals(linePaths(svg).length, 3);
});

Deno.test("plotSvg() adds a per-place panel below when the checkpoints have per-place results", async () => {
  const report = placedFixtureReport();
  const svg = await plotSvg(report);
  // one line per checkpoint in each panel; the place panel's axes and its rules at L = 2 and 3
  assertEquals(linePaths(svg).length, 2 * report.checkpoints.length);
  assertEquals(svg.includes(`>${PLACE_PLOT_TITLES.x}</text>`), true);
  assertEquals(svg.includes(`>${PLACE_PLOT_TITLES.y}</text>`), true);
  assertEquals(svg.includes(">L=2</text>") && svg.includes(">L=3</text>"), true);
  assertEquals(svg.includes(`>${plotTitles(report).x}</text>`), true);
  // a report without places keeps the single panel
  assertEquals("vconcat" in plotSpec(fixtureReport()), false);
});

Deno.test("plotSpec() refuses the text task", () => {
  assertThrows(
    () => plotSpec({ ...fixtureReport(), task: "text", keyName: "file" }),
    RangeError,
    "text task",
  );
});

Deno.test("svgToPng() renders the plot to a PNG of twice the SVG size", async () => {
  const svg = await plotSvg(fixtureReport());
  const png = await svgToPng(svg);
  assertEquals([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const view = new DataView(png.buffer, png.byteOffset);
  const svgWidth = Number(/<svg[^>]*width="(\d+(?:\.\d+)?)"/.exec(svg)![1]);
  assertEquals(view.getUint32(16), Math.ceil(svgWidth * 2));
});

/** The stroke colours of the elements of one Vega mark class (`mark-line`, `mark-rule`). */
function strokes(svg: string, mark: string): string[] {
  const groups = [...svg.matchAll(new RegExp(`<g class="${mark} role-mark[^"]*"[^>]*>(.*?)</g>`, "gs"))]
    .map((m) => m[1]);
  return groups.flatMap((g) => [...g.matchAll(/stroke="(#[0-9a-fA-F]{6})"/g)].map((m) => m[1].toLowerCase()));
}

Deno.test("plotSvg() draws each checkpoint's training-length rule in that checkpoint's line colour", async () => {
  const report = placedFixtureReport(); // two checkpoints trained on 2 and 3 digits
  const svg = await plotSvg(report);
  const lines = [...new Set(strokes(svg, "mark-line"))].sort();
  const rules = [...new Set(strokes(svg, "mark-rule"))].sort();
  assertEquals(lines.length, report.checkpoints.length);
  assertEquals(rules, lines);
  assertEquals(svg.includes("#555"), false);
});
