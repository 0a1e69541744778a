/**
 * `falcon inspect FILE_OR_DIR [--json]`: format, version, config, parameter count, tensors with
 * dtype and shape, and total size of a checkpoint (native file or hf directory, detected). Exits
 * 2 when the file cannot be read, or when its weights are ones `falcon convert` would refuse.
 *
 * @module
 */

import { Command } from "@commander-js/extra-typings";
import { formatInspect, inspectCheckpoint } from "../../src/convert/inspect.ts";
import { InputError } from "../../src/errors.ts";

/** Build the `inspect` subcommand. */
export function inspectCommand() {
  return new Command("inspect")
    .description("show what a checkpoint holds: format, version, config, parameters, tensors, size")
    .argument("<path>", "a native .safetensors checkpoint or an hf export directory")
    .option("--json", "print JSON")
    .action(async (path, options) => {
      const report = await inspectCheckpoint(path);
      console.log(options.json ? JSON.stringify(report, null, 2) : formatInspect(report));
      if (report.problems.length > 0) {
        // the same refusal `falcon convert` gives: bad input, exit code 2
        throw new InputError(`${path}: ${report.problems.length} problem(s): ${report.problems.join("; ")}`);
      }
    });
}
