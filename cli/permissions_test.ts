import assert from "node:assert/strict";
import { buildProgram } from "./main.ts";
import { type Access, accessOf, COMMAND_ACCESS, parseInvocation, permissionFlags } from "./permissions.ts";

async function accessFor(argv: string[]): Promise<Access> {
  return accessOf(await parseInvocation(buildProgram(), argv));
}

Deno.test("COMMAND_ACCESS declares every registered subcommand and nothing else", () => {
  const registered = buildProgram().commands.map((c) => c.name()).sort();
  assert.deepStrictEqual(Object.keys(COMMAND_ACCESS).sort(), registered);
});

Deno.test("every option and argument COMMAND_ACCESS names exists on its subcommand", () => {
  for (const command of buildProgram().commands) {
    const declared = COMMAND_ACCESS[command.name()];
    const options = new Set(command.options.map((o) => o.attributeName()));
    const args = command.registeredArguments.length;
    for (const ref of [...declared.reads, ...declared.writes]) {
      if ("option" in ref && !options.has(ref.option)) {
        throw new Error(
          `${command.name()}: COMMAND_ACCESS names option "${ref.option}", which it does not have`,
        );
      }
      if ("argument" in ref && ref.argument >= args) {
        throw new Error(`${command.name()}: COMMAND_ACCESS names argument ${ref.argument}, it has ${args}`);
      }
    }
  }
});

Deno.test("accessOf() resolves options, variadic arguments, fallbacks and parent directories", async () => {
  assert.deepStrictEqual(await accessFor(["info"]), { read: [], write: [] });
  assert.deepStrictEqual(await accessFor(["verify", "--vectors", "v"]), { read: ["v"], write: [] });
  assert.deepStrictEqual(await accessFor(["train", "--preset", "tiny"]), { read: ["runs"], write: ["runs"] });
  assert.deepStrictEqual(
    await accessFor(["train", "--out", "r/a", "--corpus", "c.txt"]),
    { read: ["c.txt", "r/a"], write: ["r/a"] },
  );
  assert.deepStrictEqual(
    await accessFor(["eval", "a.safetensors", "b.safetensors", "--plot", "p.png", "--json", "r.json"]),
    { read: ["a.safetensors", "b.safetensors"], write: ["r.json", "p.png"] },
  );
  assert.deepStrictEqual(await accessFor(["convert", "in.safetensors", "out/hf", "--to", "hf"]), {
    read: ["in.safetensors", "out"],
    write: ["out"],
  });
  assert.deepStrictEqual(await accessFor(["predict", "c.safetensors", "--prompt", "1+2="]), {
    read: ["c.safetensors"],
    write: [],
  });
});

Deno.test("accessOf() refuses a subcommand without a declaration, naming it", () => {
  assert.throws(() => accessOf({ command: "serve", options: {}, args: [] }), {
    name: "RangeError",
    message: /subcommand "serve" declares no file access; add it to COMMAND_ACCESS/,
  });
});

Deno.test("permissionFlags() refuses a path with a comma", () => {
  assert.throws(() => permissionFlags({ read: ["a,b"], write: [] }), {
    name: "RangeError",
    message: /"a,b"/,
  });
});

/** Split a task line into words, honouring single and double quotes. */
function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

function normal(path: string): string {
  return path.replace(/^\.\//, "").replace(/\/+$/, "") || ".";
}

function covers(granted: string, path: string): boolean {
  const g = normal(granted);
  const p = normal(path);
  return g === "." || p === g || p.startsWith(`${g}/`);
}

/**
 * Problems with the permission flags of one `deno run ... cli/main.ts <argv>` step: a grant of
 * anything but scoped file access, a needed path left out, or a grant no declared path needs.
 */
async function flagProblems(flags: string[], argv: string[]): Promise<string[]> {
  const problems: string[] = [];
  const granted: Record<"read" | "write", string[]> = { read: [], write: [] };
  for (const flag of flags) {
    const m = flag.match(/^--allow-(read|write)=(.+)$/);
    if (m) granted[m[1] as "read" | "write"].push(...m[2].split(","));
    else if (flag !== "--no-prompt") problems.push(`${flag} grants more than the declared file access`);
  }
  const needed = accessOf(await parseInvocation(buildProgram(), argv));
  for (const kind of ["read", "write"] as const) {
    for (const path of needed[kind]) {
      if (!granted[kind].some((g) => covers(g, path))) problems.push(`${kind} of ${path} is not granted`);
    }
    for (const g of granted[kind]) {
      if (!needed[kind].some((path) => covers(g, path))) {
        problems.push(`${kind} of ${g} is granted but not needed`);
      }
    }
  }
  return problems;
}

Deno.test("deno.json tasks run a CLI subcommand with scoped access to the paths it declares, nothing else", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../deno.json", import.meta.url)));
  let checked = 0;
  for (const [name, task] of Object.entries(config.tasks as Record<string, string>)) {
    for (const step of task.split(/&&|;|\|\|/)) {
      const w = words(step.trim());
      const main = w.indexOf("cli/main.ts");
      if (w[0] !== "deno" || w[1] !== "run" || main < 0) continue;
      const flags = w.slice(2, main);
      const argv = w.slice(main + 1);
      if (argv.length === 0) {
        // the generic entry (`deno task falcon <anything>`): files only, no env/net/run/ffi/sys
        assert.deepStrictEqual(flags.filter((f) => f !== "--no-prompt"), ["--allow-read", "--allow-write"]);
      } else {
        assert.deepStrictEqual(await flagProblems(flags, argv), [], `task ${name}: ${step.trim()}`);
      }
      checked++;
    }
  }
  assert.ok(checked >= 2, `expected the falcon and demo tasks to run cli/main.ts, found ${checked}`);
});

Deno.test("the task permission check refuses unscoped, missing and unneeded grants", async () => {
  const argv = ["train", "--out", "runs/demo"];
  assert.deepStrictEqual(await flagProblems(["--allow-read=runs", "--allow-write=runs/demo"], argv), []);
  assert.deepStrictEqual(await flagProblems(["--allow-read", "--allow-write=runs", "--allow-env"], argv), [
    "--allow-read grants more than the declared file access",
    "--allow-env grants more than the declared file access",
    "read of runs/demo is not granted",
  ]);
  assert.deepStrictEqual(await flagProblems(["--allow-read=runs,fixtures", "--allow-write=runs"], argv), [
    "read of fixtures is granted but not needed",
  ]);
});
