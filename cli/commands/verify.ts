/**
 * `falcon verify --vectors DIR`: run test vectors through a backend and report the errors.
 *
 * @module
 */

import { Command, Option } from "@commander-js/extra-typings";
import { FORMS } from "../../src/rules/config.ts";
import { allPassed, type FileResult, verifyDirectory } from "../../src/verify/verify_dir.ts";
import { BACKEND_CHOICES, releaseBackend, selectBackend } from "../../backend_select.ts";
import { parseThreads, threadsOption } from "../threads_option.ts";

function formatResult(r: FileResult): string {
  if ("error" in r) return `ERROR ${r.file}: ${r.error}`;
  const worst = (prefix: string) => {
    const arrays = r.check.arrays.filter((a) =>
      prefix === "d" ? a.name.startsWith("d") : !a.name.startsWith("d")
    );
    return arrays.reduce((w, a) => (a.relL2 > w.relL2 || Number.isNaN(a.relL2) ? a : w));
  };
  const fwd = worst("");
  const bwd = worst("d");
  const lines = [
    `${r.check.ok ? "ok  " : "FAIL"} ${r.file}  forward max|diff| ${fwd.maxAbs.toExponential(2)} rel ${
      fwd.relL2.toExponential(2)
    } (${fwd.name})  backward max|diff| ${bwd.maxAbs.toExponential(2)} rel ${
      bwd.relL2.toExponential(2)
    } (${bwd.name})`,
  ];
  for (const a of r.check.arrays) {
    if (!a.ok) lines.push(`       ${a.name}: rel L2 ${a.relL2} > ${a.tolerance} (max |diff| ${a.maxAbs})`);
  }
  return lines.join("\n");
}

/** Build the `verify` subcommand. */
export function verifyCommand() {
  return new Command("verify")
    .description("check a backend against a directory of float64 test vectors (fixtures/vectors format)")
    .requiredOption("--vectors <dir>", "directory of vector .json files")
    .addOption(
      new Option("--backend <name>", "backend to check").choices(BACKEND_CHOICES).default("ref" as const),
    )
    .addOption(threadsOption())
    .addOption(new Option("--form <form>", "form to run").choices(FORMS).default("recurrent" as const))
    .option("--chunk-size <n>", "chunk size of the chunked form", (v) => Number.parseInt(v, 10), 64)
    .option("--json", "print one JSON report instead of text")
    .action(async (options) => {
      const backend = await selectBackend(options.backend, { threads: parseThreads(options.threads) });
      // progress per vector on stderr (also with --json): one vector can take minutes on a software GPU
      const results = await verifyDirectory(
        backend,
        options.vectors,
        { form: options.form, chunkSize: options.chunkSize },
        (r, seconds) => {
          if (!options.json) console.log(formatResult(r));
          console.error(`  ${r.file}: ${seconds.toFixed(1)} s`);
        },
        (p) => console.error(`[${p.index}/${p.total}] ${p.file} ...`),
      );
      releaseBackend(backend);
      const passed = allPassed(results);
      if (options.json) {
        console.log(JSON.stringify({ backend: backend.name, form: options.form, passed, results }, null, 2));
      } else {
        const bad = results.filter((r) => !("check" in r && r.check.ok)).length;
        console.log(
          `${results.length - bad} passed, ${bad} failed (backend ${backend.name}, form ${options.form})`,
        );
      }
      if (!passed) Deno.exitCode = 1;
    });
}
