import { assertEquals, assertThrows } from "./_assert.ts";
import { fixtureReport, placedFixtureReport } from "./_fixture_report.ts";
import { checkpointLabel, mergeReports, reportJson, textResult, uniqueLabels } from "./report.ts";
import { formatTable } from "./table.ts";
import { CSV_COLUMNS, csvField, reportCsv } from "./csv.ts";

const META = { path: "x", mixer: "falcon3", alignment: "prefix", seed: 2, trainLength: 32 };

Deno.test("checkpointLabel() names rule, alignment and seed; uniqueLabels() suffixes repeats", () => {
  assertEquals(checkpointLabel(META), "falcon3 prefix s2");
  assertEquals(checkpointLabel({ ...META, seed: null }), "falcon3 prefix s?");
  assertEquals(checkpointLabel({ ...META, mixer: "transformer" }), "transformer s2");
  assertEquals(uniqueLabels([META, { ...META, seed: 3 }, META]), [
    "falcon3 prefix s2",
    "falcon3 prefix s3",
    "falcon3 prefix s2 #2",
  ]);
});

Deno.test("accuracyResult() splits the means at the training length (hand-computed fixture)", () => {
  const [a, b] = fixtureReport().checkpoints;
  // a: digit 8/8, 9/12, 8/16, 5/20 -> in (1 + 0.75)/2, out (0.5 + 0.25)/2; exact 4/4, 2/4 | 1/4, 0/4
  assertEquals(a.inDistribution, { from: 1, to: 2, groups: 2, digitAccuracy: 0.875, exactMatch: 0.75 });
  assertEquals(a.extrapolation, { from: 3, to: 4, groups: 2, digitAccuracy: 0.375, exactMatch: 0.125 });
  // b: digit 6/8, 6/12, 4/16, 2/20 -> in (0.75 + 0.5)/2, out (0.25 + 0.1)/2
  assertEquals(b.inDistribution?.digitAccuracy, 0.625);
  assertEquals(b.extrapolation?.digitAccuracy, 0.175);
});

Deno.test("formatTable() has one column per checkpoint, a row per length and the two means", () => {
  const lines = formatTable(fixtureReport()).trimEnd().split("\n");
  assertEquals(lines[1].split(/\s{2,}/), ["length", "falcon1a prefix s0", "transformer s1"]);
  assertEquals(lines[3].trim().split(/\s{2,}/), ["1", "100.0 / 100.0", "75.0 / 50.0"]);
  assertEquals(lines[6].trim().split(/\s{2,}/), ["4", "25.0 / 0.0", "10.0 / 0.0"]);
  assertEquals(lines[7].trim().split(/\s{2,}/), ["avg 1-2", "87.5 / 75.0", "62.5 / 37.5"]);
  assertEquals(lines[8].trim().split(/\s{2,}/), ["avg 3-4", "37.5 / 12.5", "17.5 / 0.0"]);
  assertEquals(lines.length, 9);
});

Deno.test("formatTable() shows bits per byte and perplexity for the text task", () => {
  const c = textResult({ ...META, trainLength: null }, "falcon3 prefix s2", { bits: 30, tokens: 20 });
  const report = {
    ...fixtureReport(),
    task: "text" as const,
    keyName: "file" as const,
    keys: [0],
    checkpoints: [c],
  };
  const lines = formatTable(report).trimEnd().split("\n").map((l) => l.trim().split(/\s{2,}/));
  assertEquals(lines[1], ["file", "falcon3 prefix s2"]);
  assertEquals(lines[3], ["bits/byte", "1.5000"]);
  assertEquals(lines[4], ["perplexity", Math.pow(2, 1.5).toFixed(3)]);
  assertEquals(lines[5], ["bytes", "20"]);
});

Deno.test("reportCsv() writes a header, one row per checkpoint and length, and the range means", () => {
  const lines = reportCsv(fixtureReport()).trimEnd().split("\n");
  assertEquals(lines[0], CSV_COLUMNS.join(","));
  assertEquals(lines.length, 1 + 2 * (4 + 2));
  assertEquals(
    lines[2],
    "falcon1a prefix s0,a.safetensors,falcon1a,prefix,0,2,addition,group,2,12,4,0.75,0.5,,",
  );
  assertEquals(
    lines[5],
    "falcon1a prefix s0,a.safetensors,falcon1a,prefix,0,2,addition,in_distribution,1-2,,2,0.875,0.75,,",
  );
  assertEquals(csvField('a "b", c'), '"a ""b"", c"');
  assertEquals(csvField(NaN), "");
});

Deno.test("reportJson() round-trips the report and writes NaN as null", () => {
  const report = fixtureReport();
  const parsed = JSON.parse(reportJson(report));
  assertEquals(parsed.checkpoints[1].groups[3].digitAccuracy, 0.1);
  assertEquals(parsed.keys, [1, 2, 3, 4]);
  const nan = {
    ...report,
    checkpoints: [{
      ...report.checkpoints[0],
      groups: [{ ...report.checkpoints[0].groups[0], digitAccuracy: NaN }],
    }],
  };
  assertEquals(JSON.parse(reportJson(nan)).checkpoints[0].groups[0].digitAccuracy, null);
});

Deno.test("mergeReports() joins columns in order, relabels repeats and names a mismatched field", () => {
  const report = fixtureReport();
  const [a, b] = report.checkpoints;
  const merged = mergeReports([{ ...report, checkpoints: [a] }, { ...report, checkpoints: [b, a] }]);
  assertEquals(merged.checkpoints.map((c) => c.label), [
    "falcon1a prefix s0",
    "transformer s1",
    "falcon1a prefix s0 #2",
  ]);
  assertEquals(merged.checkpoints[1].groups, b.groups);
  assertEquals([merged.keys, merged.samples, merged.seed], [report.keys, report.samples, report.seed]);
  assertThrows(() => mergeReports([report, { ...report, seed: 8 }]), RangeError, "report 1 has seed 8");
  assertThrows(
    () => mergeReports([report, { ...report, keys: [1, 2] }]),
    RangeError,
    "report 1 has keys [1,2]",
  );
  assertThrows(() => mergeReports([]), RangeError, "no report");
});

/** The table's lines as cells (split at runs of two or more spaces). */
function cells(text: string): string[][] {
  return text.trimEnd().split("\n").map((l) => l.trim().split(/\s{2,}/));
}

Deno.test("formatTable() gives each checkpoint summary rows at its own training length (avg 1-2 for a 2-digit model)", () => {
  const all = cells(formatTable(placedFixtureReport()));
  const rows = all.slice(0, all.findIndex((r) => r[0] === "place")); // the length table
  assertEquals(rows[1], ["length", "falcon1a prefix s0", "falcon3a prefix s0", "ref L=2", "ref L=3"]);
  const byLabel = new Map(rows.map((r) => [r[0], r.slice(1)]));
  // A (L = 2): (1 + 5/6) / 2 digit, (1 + 0.5) / 2 exact; B (L = 3): (1 + 1 + 5/6) / 3, (1 + 1 + 0.5) / 3
  assertEquals(byLabel.get("avg 1-2")?.slice(0, 2), ["91.7 / 75.0", "-"]);
  assertEquals(byLabel.get("avg 1-3")?.slice(0, 2), ["-", "94.4 / 83.3"]);
  assertEquals(byLabel.get("avg 3-4")?.slice(0, 2), ["37.5 / 0.0", "-"]);
  // one length beyond L = 3: labelled as the single length it is, not "avg 4-4" (issue 18)
  assertEquals(byLabel.get("only 4")?.slice(0, 2), ["-", "50.0 / 0.0"]);
  assertEquals(byLabel.has("avg 4-4"), false);
  // the reference columns fill the rows of their own training length only
  assertEquals(byLabel.get("avg 1-2")?.slice(2, 4).map((c) => c === "-"), [false, true]);
  assertEquals(byLabel.get("only 4")?.slice(2, 4).map((c) => c === "-"), [true, false]);
  assertEquals(byLabel.get("1")?.slice(2), ["100.0 / 100.0", "100.0 / 100.0"]);
});

Deno.test("formatTable() prints accuracy per place with places >= L marked and the extrapolation pooled", () => {
  const rows = cells(formatTable(placedFixtureReport()));
  const start = rows.findIndex((r) => r[0] === "place");
  assertEquals(rows[start], ["place", "digits", "falcon1a prefix s0", "falcon3a prefix s0"]);
  assertEquals(rows.slice(start + 2, start + 6), [
    ["0", "8", "87.5", "100.0"],
    ["1", "8", "75.0", "87.5"],
    ["2", "6", "16.7*", "66.7"],
    ["3", "2", "0.0*", "0.0*"],
  ]);
  const byLabel = new Map(rows.slice(start).map((r) => [r[0], r.slice(1)]));
  // A: places 0-1 13 of 16, places 2-3 1 of 8; B: places 0-2 19 of 22, place 3 0 of 2
  assertEquals(byLabel.get("places 0-1"), ["81.3", "-"]);
  assertEquals(byLabel.get("places 0-2"), ["-", "86.4"]);
  assertEquals(byLabel.get("places >= 2"), ["12.5", "-"]);
  assertEquals(byLabel.get("places >= 3"), ["-", "0.0"]);
  // a report without per-place results (mqar, old reports) has no place table
  assertEquals(formatTable(fixtureReport()).includes("per place value"), false);
});

Deno.test("reportCsv() adds place, pooled-place and reference rows; reportJson() the places and reference fields", () => {
  const report = placedFixtureReport();
  const lines = reportCsv(report).trimEnd().split("\n");
  const rowsOf = (kind: string) => lines.filter((l) => l.split(",")[7] === kind);
  // 4 lengths + 2 means + 4 places + 2 pooled + 4 reference lengths + 2 reference means, per checkpoint
  assertEquals(lines.length, 1 + 2 * (4 + 2 + 4 + 2 + 4 + 2));
  assertEquals(
    rowsOf("place")[2],
    "falcon1a prefix s0,a.safetensors,falcon1a,prefix,0,2,addition,place,2,6,,0.16666666666666666,,,",
  );
  assertEquals(rowsOf("places_extrapolation")[0].split(",").slice(7, 12), [
    "places_extrapolation",
    "2-3",
    "8",
    "",
    "0.125",
  ]);
  assertEquals(rowsOf("reference_extrapolation")[1].split(",").slice(7, 9), [
    "reference_extrapolation",
    "4-4",
  ]);
  const json = JSON.parse(reportJson(report));
  const a = json.checkpoints[0];
  assertEquals(a.places.extrapolation, { from: 2, to: 3, tokens: 8, digitAccuracy: 0.125 });
  assertEquals(a.places.perPlace[0], { place: 0, tokens: 8, correctTokens: 7, digitAccuracy: 0.875 });
  assertEquals(a.reference.trainLength, 2);
  assertEquals(a.reference.perLength.map((g: { key: number }) => g.key), [1, 2, 3, 4]);
  assertEquals(a.extrapolation.digitAccuracy, 0.375); // the per-length means stay
});
