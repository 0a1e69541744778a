/**
 * The `falcon` command line. It only parses, shows progress and prints; the work is done by plain
 * functions in `src/`.
 *
 * @module
 */

import { Command } from "@commander-js/extra-typings";
import { VERSION } from "./version.ts";
import { EXIT_USAGE, InputError, UsageError } from "./errors.ts";
import { verifyCommand } from "./commands/verify.ts";
import { infoCommand } from "./commands/info.ts";
import { evalCommand } from "./commands/eval.ts";
import { convertCommand } from "./commands/convert.ts";
import { inspectCommand } from "./commands/inspect.ts";
import { trainCommand } from "./commands/train.ts";
import { predictCommand } from "./commands/predict.ts";

export { EXIT_USAGE, UsageError };

/** Exit code when the runtime refuses an access the command needed (a path outside its permissions). */
export const EXIT_PERMISSION = 3;

/** Build the `falcon` program with every subcommand. */
export function buildProgram(): Command {
  const program = new Command("falcon")
    .description("Falcon fast-weight attention: kernels, training, evaluation and checkpoints")
    .version(VERSION, "-V, --version")
    .showHelpAfterError()
    .exitOverride()
    // print through console (tests capture it) and never consult the environment for colours,
    // so the CLI needs no --allow-env
    .configureOutput({
      writeOut: (text) => console.log(text.replace(/\n$/, "")),
      writeErr: (text) => console.error(text.replace(/\n$/, "")),
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    });
  for (
    const command of [
      verifyCommand(),
      infoCommand(),
      evalCommand(),
      convertCommand(),
      inspectCommand(),
      trainCommand(),
      predictCommand(),
    ]
  ) {
    // addCommand does not pass exitOverride / help settings down; copy them so usage errors exit 2
    program.addCommand(command.copyInheritedSettings(program));
  }
  return program;
}

/** Run the CLI on an argument list; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const program = buildProgram();
  try {
    Deno.exitCode = 0;
    await program.parseAsync(args, { from: "user" });
    return Deno.exitCode;
  } catch (err) {
    // commander throws CommanderError on --help / --version (exit 0) and on usage errors
    if (err && typeof err === "object" && "exitCode" in err && "code" in err) {
      const code = (err as { exitCode: number }).exitCode;
      return code === 0 ? 0 : EXIT_USAGE;
    }
    if (err instanceof Deno.errors.NotCapable || err instanceof Deno.errors.PermissionDenied) {
      console.error(`falcon: not permitted: ${err.message}`);
      return EXIT_PERMISSION;
    }
    if (err instanceof InputError) {
      console.error(`falcon: ${err.message}`);
      return EXIT_USAGE;
    }
    throw err;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
