/**
 * The property the single executable depends on: the CLI runs with read and write access to its own
 * inputs and outputs only (no env, net, run, ffi or sys, and no read of the project directory), so
 * every asset it needs (WASM bytes, shaders, fonts, the built-in corpus) comes from the module
 * graph. Each subcommand runs in a fresh process whose working directory is a temporary directory
 * outside the repository.
 *
 * @module
 */

import assert from "node:assert/strict";
import { buildProgram } from "../cli/main.ts";
import { accessOf, parseInvocation, permissionFlags } from "../cli/permissions.ts";

const REPO = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const MAIN = `${REPO}/cli/main.ts`;
const VECTORS = ["falcon3a__prefix__default.json", "deltanet__same-step__default.json"];
const decoder = new TextDecoder();

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run `falcon <args>` in `cwd` with exactly `--allow-read=<read> --allow-write=<write>`. */
function falcon(cwd: string, read: string, write: string, args: string[]): Promise<Run> {
  return falconWith(cwd, ["--no-prompt", `--allow-read=${read}`, `--allow-write=${write}`], args);
}

/** Run `falcon <args>` in `cwd` with the permission flags `flags` and no others. */
async function falconWith(cwd: string, flags: string[], args: string[]): Promise<Run> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", `--config=${REPO}/deno.json`, ...flags, MAIN, ...args],
    cwd,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

function assertSucceeded(run: Run, what: string): void {
  assert.equal(run.code, 0, `${what} exited ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
}

async function fileSize(path: string): Promise<number> {
  return (await Deno.stat(path)).size;
}

Deno.test("every subcommand runs with read and write access to a temporary directory only", async (t) => {
  const tmp = await Deno.makeTempDir({ prefix: "falcon_permissions_" });
  try {
    assert.ok(!tmp.startsWith(`${REPO}/`), `the temporary directory ${tmp} must lie outside ${REPO}`);
    const run = (args: string[]) => falcon(tmp, tmp, tmp, args);
    const checkpoint = `${tmp}/run/checkpoint.safetensors`;

    await t.step("train --preset tiny writes a checkpoint and a metrics log", async () => {
      const r = await run(["train", "--preset", "tiny", "--steps", "3", "--out", `${tmp}/run`]);
      assertSucceeded(r, "train");
      assert.match(r.stdout, /completed at step 3\/3/);
      assert.ok(await fileSize(checkpoint) > 0);
      const log = (await Deno.readTextFile(`${tmp}/run/metrics.jsonl`)).trim().split("\n");
      assert.ok(log.length >= 3, `expected a metrics line per step, got ${log.length}`);
    });

    await t.step("eval writes JSON and an SVG plot (Vega, from the module graph)", async () => {
      const r = await run([
        "eval",
        checkpoint,
        "--lengths",
        "1-2",
        "--samples",
        "4",
        "--json",
        `${tmp}/r.json`,
        "--plot",
        `${tmp}/p.svg`,
      ]);
      assertSucceeded(r, "eval --plot p.svg");
      const report = JSON.parse(await Deno.readTextFile(`${tmp}/r.json`));
      assert.equal(report.checkpoints.length, 1);
      assert.match(await Deno.readTextFile(`${tmp}/p.svg`), /^<svg/);
    });

    await t.step(
      "eval writes a PNG plot (resvg WASM and the Inter font, from the module graph)",
      async () => {
        const r = await run([
          "eval",
          checkpoint,
          "--lengths",
          "1-2",
          "--samples",
          "4",
          "--plot",
          `${tmp}/p.png`,
        ]);
        assertSucceeded(r, "eval --plot p.png");
        const png = await Deno.readFile(`${tmp}/p.png`);
        assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "PNG signature");
      },
    );

    await t.step("predict continues a prompt", async () => {
      const r = await run(["predict", checkpoint, "--prompt", "12+34=", "--json"]);
      assertSucceeded(r, "predict");
      assert.equal(JSON.parse(r.stdout).prompt, "12+34=");
    });

    await t.step("inspect reports the checkpoint", async () => {
      const r = await run(["inspect", checkpoint, "--json"]);
      assertSucceeded(r, "inspect");
      assert.equal(JSON.parse(r.stdout).format, "native");
    });

    await t.step("convert writes an hf directory beside the checkpoint", async () => {
      const r = await run(["convert", checkpoint, `${tmp}/hf`, "--to", "hf"]);
      assertSucceeded(r, "convert");
      assert.ok(await fileSize(`${tmp}/hf/config.json`) > 0);
    });

    await t.step("info probes WASM and WebGPU", async () => {
      const r = await run(["info", "--json"]);
      assertSucceeded(r, "info");
      assert.equal(typeof JSON.parse(r.stdout).wasm.simd, "boolean");
    });

    await t.step("verify checks a copy of the test vectors", async () => {
      await Deno.mkdir(`${tmp}/vectors`);
      for (const name of VECTORS) {
        await Deno.copyFile(`${REPO}/fixtures/vectors/${name}`, `${tmp}/vectors/${name}`);
      }
      const r = await run(["verify", "--vectors", `${tmp}/vectors`, "--json"]);
      assertSucceeded(r, "verify");
      const report = JSON.parse(r.stdout);
      assert.equal(report.passed, true);
      assert.equal(report.results.length, VECTORS.length);
    });
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("train asked to write outside its granted directory exits 3 naming the path, creating nothing", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "falcon_permissions_" });
  try {
    await Deno.mkdir(`${tmp}/out`);
    const elsewhere = `${tmp}/elsewhere`;
    const r = await falcon(tmp, tmp, `${tmp}/out`, [
      "train",
      "--preset",
      "tiny",
      "--steps",
      "3",
      "--out",
      elsewhere,
    ]);
    assert.equal(r.code, 3, `expected exit 3 (EXIT_PERMISSION), got ${r.code}\nstderr:\n${r.stderr}`);
    assert.match(r.stderr, /falcon: not permitted: .*write access to "[^"]*\/elsewhere"/);
    await assert.rejects(Deno.stat(elsewhere), Deno.errors.NotFound, `${elsewhere} must not exist`);
    assert.deepEqual([...Deno.readDirSync(tmp)].map((e) => e.name), ["out"]);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("each subcommand succeeds with exactly the access cli/permissions.ts declares for it", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "falcon_permissions_" });
  try {
    await Deno.mkdir(`${tmp}/vectors`);
    await Deno.mkdir(`${tmp}/exports`);
    await Deno.copyFile(`${REPO}/fixtures/vectors/${VECTORS[0]}`, `${tmp}/vectors/${VECTORS[0]}`);
    // relative paths, resolved against the temporary working directory
    const invocations = [
      ["train", "--preset", "tiny", "--steps", "2", "--out", "run"],
      [
        "eval",
        "run/checkpoint.safetensors",
        "--lengths",
        "1",
        "--samples",
        "2",
        "--json",
        "r.json",
        "--plot",
        "p.svg",
      ],
      ["predict", "run/checkpoint.safetensors", "--prompt", "1+2="],
      ["inspect", "run/checkpoint.safetensors"],
      ["convert", "run/checkpoint.safetensors", "exports/hf", "--to", "hf"],
      ["verify", "--vectors", "vectors"],
      ["info"],
    ];
    for (const argv of invocations) {
      const flags = permissionFlags(accessOf(await parseInvocation(buildProgram(), argv)));
      assertSucceeded(await falconWith(tmp, flags, argv), `${argv.join(" ")} with ${flags.join(" ")}`);
    }
    for (const made of ["run/checkpoint.safetensors", "r.json", "p.svg", "exports/hf/config.json"]) {
      assert.ok(await fileSize(`${tmp}/${made}`) > 0, `${made} was not written`);
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
