/**
 * `deno task compile`: build the single executable `dist/falcon` with `deno compile`, and when that
 * fails say why in a few lines instead of Deno's error chain and backtrace. `deno compile` needs
 * `denort` (the runtime without the toolchain) of the same Deno version: it downloads it, or takes
 * the file `DENORT_BIN` names. Without network access the download fails with a DNS error; the
 * task then says how to point `DENORT_BIN` at a runtime. A `dist/` the failed build created and
 * left empty is removed.
 *
 * Usage: `deno run --allow-run --allow-read --allow-write --allow-env scripts/compile.ts [--output PATH]`
 * (default `dist/falcon`).
 *
 * @module
 */

/** The executable's path (relative to the repository). */
export const DEFAULT_OUTPUT = "dist/falcon";

/** The `deno compile` arguments, the output path last but one (the CLI with file access only). */
export function compileArgs(output: string = DEFAULT_OUTPUT): string[] {
  return ["compile", "--no-prompt", "--allow-read", "--allow-write", "--output", output, "cli/main.ts"];
}

/** The Deno version whose `denort` the build needs (this runtime's). */
export const DENO_VERSION = Deno.version.deno;

/**
 * Why a failed `deno compile` failed, in a few lines: its `error:` line and causes without the
 * backtrace, then what to do about a missing runtime (`DENORT_BIN`).
 */
export function explainFailure(stderr: string, denortBin: string | undefined): string[] {
  const text = stderr.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), ""); // colours
  const body = text.split(/\n\s*Stack backtrace:/)[0];
  const lines = body.split("\n").map((l) => l.trimEnd()).filter((l) => l.trim() !== "");
  const start = lines.findIndex((l) => l.startsWith("error:"));
  const error = start >= 0 ? lines.slice(start) : lines.slice(-4);
  const out = ["deno task compile failed:", ...error.map((l) => `  ${l.trim()}`)];
  const platform = `${Deno.build.arch}-${
    Deno.build.os === "darwin"
      ? "apple-darwin"
      : Deno.build.os === "windows"
      ? "pc-windows-msvc"
      : "unknown-linux-gnu"
  }`;
  const help = [
    `deno compile needs denort, the Deno ${DENO_VERSION} runtime without the toolchain. Get ` +
    `denort-${platform}.zip of Deno ${DENO_VERSION} from https://github.com/denoland/deno/releases ` +
    "(on a machine with network access), unzip it, and run:",
    `  DENORT_BIN=/path/to/denort deno task compile`,
    "(the full deno binary cannot stand in for denort: the result would start a REPL)",
  ];
  if (denortBin !== undefined && /denort/i.test(text)) {
    out.push(`DENORT_BIN is ${JSON.stringify(denortBin)}, which does not name a usable denort.`, ...help);
  } else if (/dns error|error sending request|failed to lookup address|dl\.deno\.land|denort/i.test(text)) {
    out.push("Downloading denort failed (no network access?).", ...help);
  }
  return out;
}

async function isEmptyDirectory(path: string): Promise<boolean> {
  try {
    for await (const _ of Deno.readDir(path)) return false;
    return true;
  } catch {
    return false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--output");
  const output = i >= 0 ? Deno.args[i + 1] : DEFAULT_OUTPUT;
  if (!output) {
    console.error("--output needs a path");
    Deno.exit(2);
  }
  // the directories the build would create (dist/, or more for a deeper --output), deepest first
  const created: string[] = [];
  for (let dir = output; dir.lastIndexOf("/") > 0;) {
    dir = dir.slice(0, dir.lastIndexOf("/"));
    if (await exists(dir)) break;
    created.push(dir);
  }
  const result = await new Deno.Command(Deno.execPath(), {
    args: compileArgs(output),
    stdout: "inherit",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(result.stderr);
  if (result.success) {
    await Deno.stderr.write(result.stderr);
    Deno.exit(0);
  }
  for (const dir of created) if (await isEmptyDirectory(dir)) await Deno.remove(dir);
  for (const line of explainFailure(stderr, Deno.env.get("DENORT_BIN"))) console.error(line);
  Deno.exit(result.code || 1);
}
