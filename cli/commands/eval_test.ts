import { runCli } from "../_run_in_process.ts";
import { writeTinyCheckpoint } from "../../src/eval/_tiny_checkpoint.ts";
import { ADDITION_VOCAB_SIZE, additionConfig, mqarConfig, textConfig } from "../../src/tasks/mod.ts";

const run = runCli;

function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Error(message);
}

/** A temp dir with two tiny addition checkpoints (falcon1a prefix seed 0, transformer seed 1), trained length 2. */
async function fixture(): Promise<{ dir: string; a: string; b: string }> {
  const dir = await Deno.makeTempDir();
  const a = `${dir}/a.safetensors`;
  const b = `${dir}/b.safetensors`;
  await writeTinyCheckpoint(
    a,
    additionConfig({ maxDigits: 2 }),
    ADDITION_VOCAB_SIZE,
    { mixer: "falcon1a" },
    0,
  );
  await writeTinyCheckpoint(b, additionConfig({ maxDigits: 2 }), ADDITION_VOCAB_SIZE, {
    mixer: "transformer",
  }, 1);
  return { dir, a, b };
}

Deno.test("falcon eval compares two checkpoints and writes the table, JSON, CSV and SVG plot", async () => {
  const { dir, a, b } = await fixture();
  try {
    const args = [
      "eval",
      a,
      b,
      "--task",
      "addition",
      "--lengths",
      "1-3",
      "--samples",
      "3",
      "--batch-size",
      "2",
    ];
    const files = [
      "--json",
      `${dir}/r.json`,
      "--csv",
      `${dir}/r.csv`,
      "--plot",
      `${dir}/r.svg`,
      "--backend",
      "ref",
    ];
    const { code, out, err } = await run([...args, ...files]);
    assert(code === 0, `exit code ${code}\n${out}\n${err}`);
    const header = out.split("\n")[1].split(/\s{2,}/);
    // both checkpoints were trained on 2 digits: one no-extrapolation reference column, L = 2
    assert(header.join("|") === "length|falcon1a prefix s0|transformer s1|ref L=2", `header: ${header}`);
    // a range of one length reads "only 3", not "avg 3-3" (issue 18)
    assert(
      /avg 1-2 /.test(out) && /only 3 /.test(out) && !/avg 3-3/.test(out),
      `range rows missing:\n${out}`,
    );
    assert(
      /per place value/.test(out) && /places 0-1 /.test(out) && /places >= 2 /.test(out),
      `place rows:\n${out}`,
    );
    const report = JSON.parse(await Deno.readTextFile(`${dir}/r.json`));
    assert(report.keys.join(",") === "1,2,3" && report.checkpoints.length === 2, "json keys / checkpoints");
    assert(
      report.checkpoints[0].groups.every((g: { sequences: number }) => g.sequences === 3),
      "3 samples per length",
    );
    const places = report.checkpoints[0].places;
    assert(
      places.trainLength === 2 && places.extrapolation.from === 2,
      `json places: ${JSON.stringify(places)}`,
    );
    assert(report.checkpoints[1].reference.extrapolation.from === 3, "json reference");
    const csv = (await Deno.readTextFile(`${dir}/r.csv`)).trim().split("\n");
    // per checkpoint: 3 lengths + 2 means, the places + 2 pooled, 3 reference lengths + 2 reference means
    const expected = 1 + 2 * (3 + 2 + places.perPlace.length + 2 + 3 + 2);
    assert(csv.length === expected, `csv has ${csv.length} lines, expected ${expected}`);
    const svg = await Deno.readTextFile(`${dir}/r.svg`);
    assert(svg.includes("Operand length (digits)") && svg.includes("train length 2"), "svg titles");
    assert(svg.includes("Place value of the answer digit (0 = units)"), "svg per-place panel");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("falcon eval prints the same table twice for the same seed", async () => {
  const { dir, a } = await fixture();
  try {
    const args = ["eval", a, "--lengths", "2-3", "--samples", "4", "--backend", "ref"];
    const first = await run([...args, "--seed", "5"]);
    const again = await run([...args, "--seed", "5"]);
    assert(first.code === 0 && first.out === again.out, `not reproducible:\n${first.out}\n${again.out}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("falcon eval exits 2 with a clear message on bad input", async () => {
  const { dir, a } = await fixture();
  try {
    await Deno.writeTextFile(`${dir}/junk.safetensors`, "not a checkpoint");
    const hinted = `${dir}/hinted.safetensors`;
    const hintedTask = additionConfig({ maxDigits: 2, operandOrder: "lsd", indexHints: 6 });
    await writeTinyCheckpoint(hinted, hintedTask, ADDITION_VOCAB_SIZE + 6, { mixer: "falcon1a" }, 0);
    const cases: [string[], RegExp][] = [
      [["eval", `${dir}/junk.safetensors`], /junk\.safetensors is not a falcon checkpoint/],
      [["eval", `${dir}/none.safetensors`], /none\.safetensors does not exist/],
      [["eval", a, "--lengths", "0-5"], /--lengths 0-5: length range "0-5" starts at 0/],
      [["eval", a, "--lengths", "9-3"], /--lengths 9-3: length range "9-3" runs backwards/],
      [["eval", a, "--task", "mqar"], /was trained on the addition task, not mqar/],
      [["eval", a, "--task", "poetry"], /poetry/],
      [["eval", a, "--samples", "0"], /--samples must be an integer >= 1, got "0"/],
      [["eval", a, "--plot", `${dir}/x.pdf`], /must end in \.svg or \.png/],
      [["eval", a, "--task", "addition", "--text", `${dir}/t.txt`], /--text applies to the text task only/],
      [["eval", a, "--hint-offset", "-1"], /--hint-offset/],
      [
        ["eval", a, "--hint-offset", "1"],
        /a\.safetensors: addition: hint offset 1 given but the task has no index hints/,
      ],
      [
        ["eval", hinted, "--lengths", "3", "--hint-offset", "3"],
        /from hint id 3; the task has indexHints = 6/,
      ],
    ];
    for (const [args, pattern] of cases) {
      const { code, err } = await run([...args, "--backend", "ref"]);
      assert(code === 2, `${args.join(" ")}: exit code ${code}, expected 2\n${err}`);
      assert(
        pattern.test(err),
        `${args.join(" ")}: message ${JSON.stringify(err)} does not match ${pattern}`,
      );
    }
    // in range, the offset is applied and named in the table's legend
    const shifted = await run(["eval", hinted, "--lengths", "1-2", "--hint-offset", "3", "--backend", "ref"]);
    assert(shifted.code === 0, `--hint-offset 3: exit ${shifted.code}\n${shifted.err}`);
    assert(/seed 0, hints from id 3/.test(shifted.out), `legend without the offset: ${shifted.out}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("falcon eval scores mqar by number of pairs and text in bits per byte", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const mqar = mqarConfig({ pairs: 2, queries: 2, keys: 4, values: 4 });
    await writeTinyCheckpoint(`${dir}/m.safetensors`, mqar, 9, { mixer: "deltanet" });
    const m = await run(["eval", `${dir}/m.safetensors`, "--samples", "2", "--backend", "ref"]);
    assert(m.code === 0, `mqar exit ${m.code}\n${m.err}`);
    assert(m.out.split("\n")[1].startsWith("pairs "), `mqar header:\n${m.out}`);
    assert(/avg 1-2 /.test(m.out) && /avg 3-4 /.test(m.out), `mqar default pairs 1-4 split at 2:\n${m.out}`);
    // titled by its metric, recall (issue 18)
    assert(
      /^mqar: teacher-forced recall % \(per query\)/.test(m.out) && !/digit accuracy/.test(m.out),
      m.out,
    );
    const tooMany = await run(["eval", `${dir}/m.safetensors`, "--lengths", "5", "--backend", "ref"]);
    assert(tooMany.code === 2 && /5 pairs need 5 distinct keys/.test(tooMany.err), tooMany.err);

    const corpus = new TextEncoder().encode("abcdefghij".repeat(20));
    await Deno.writeFile(`${dir}/c.txt`, corpus);
    await writeTinyCheckpoint(`${dir}/t.safetensors`, textConfig(corpus, "c.txt", 8), 256, {
      mixer: "retnet",
    });
    const t = await run([
      "eval",
      `${dir}/t.safetensors`,
      "--text",
      `${dir}/c.txt`,
      "--json",
      `${dir}/t.json`,
      "--backend",
      "ref",
    ]);
    assert(t.code === 0, `text exit ${t.code}\n${t.err}`);
    assert(/^bits\/byte\s+\d+\.\d{4}$/m.test(t.out), `text table:\n${t.out}`);
    assert(t.err.includes("eval split (last 10%)"), t.err);
    const report = JSON.parse(await Deno.readTextFile(`${dir}/t.json`));
    assert(report.checkpoints[0].text.bytes === 19, `bytes ${report.checkpoints[0].text.bytes}`);
    const plot = await run([
      "eval",
      `${dir}/t.safetensors`,
      "--text",
      `${dir}/c.txt`,
      "--plot",
      `${dir}/p.svg`,
    ]);
    assert(plot.code === 2 && /text task has one number/.test(plot.err), plot.err);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("falcon eval --plot FILE.png writes a PNG", async () => {
  const { dir, a } = await fixture();
  try {
    const { code, err } = await run([
      "eval",
      a,
      "--lengths",
      "1-3",
      "--samples",
      "2",
      "--plot",
      `${dir}/p.png`,
    ]);
    assert(code === 0, `exit ${code}\n${err}`);
    const png = await Deno.readFile(`${dir}/p.png`);
    assert([...png.subarray(1, 4)].map((c) => String.fromCharCode(c)).join("") === "PNG", "PNG signature");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("progressBar() redraws one line with done/total and clears it at the end", async () => {
  const { progressBar } = await import("./eval.ts");
  const written: string[] = [];
  const bar = progressBar("eval addition", (t) => written.push(t));
  bar.update({ done: 1, total: 4, key: 7 });
  bar.update({ done: 1, total: 4, key: 7 });
  bar.update({ done: 4, total: 4, key: 8 });
  bar.done();
  assert(written.length === 3, `writes: ${JSON.stringify(written)}`);
  assert(
    written[0] === `\reval addition [${"#".repeat(8)}${".".repeat(22)}] 1/4 (7)`,
    JSON.stringify(written[0]),
  );
  assert(written[1].includes(`[${"#".repeat(30)}] 4/4 (8)`), JSON.stringify(written[1]));
  assert(written[2].trim() === "" && written[2].startsWith("\r"), "cleared");
});
