/**
 * `falcon convert IN OUT --to native|hf [--dtype f32|f16|bf16] [--drop-optimizer] [--allow-nonfinite]`:
 * convert a checkpoint between the native format and an hf export (format of IN detected).
 *
 * @module
 */

import { Command, Option } from "@commander-js/extra-typings";
import { convertCheckpoint } from "../../src/convert/convert.ts";
import { CONVERT_DTYPES } from "../../src/convert/dtype.ts";
import { FORMATS } from "../../src/convert/load.ts";

/** Build the `convert` subcommand. */
export function convertCommand() {
  return new Command("convert")
    .description(
      "convert a checkpoint: a native .safetensors file <-> an hf directory (config.json + model.safetensors)",
    )
    .argument("<in>", "input checkpoint: a native .safetensors file or an hf directory")
    .argument(
      "<out>",
      "output path (written to a temporary name, renamed when complete); an existing one is refused without --force",
    )
    .addOption(new Option("--to <format>", "output format").choices(FORMATS).makeOptionMandatory())
    .addOption(
      new Option("--dtype <dtype>", "weight dtype of the output (default: keep)").choices(CONVERT_DTYPES),
    )
    .option("--drop-optimizer", "leave the optimizer state out of a native output")
    .option("--allow-nonfinite", "convert weights holding NaN or infinity instead of refusing them")
    .option(
      "--force",
      "replace an existing output file, or an existing hf export directory (never a directory with other files)",
    )
    .option("--json", "print the report as JSON")
    .action(async (input, output, options) => {
      const report = await convertCheckpoint(input, output, {
        to: options.to,
        dtype: options.dtype,
        dropOptimizer: options.dropOptimizer ?? false,
        allowNonfinite: options.allowNonfinite ?? false,
        force: options.force ?? false,
      });
      if (options.json) {
        console.log(JSON.stringify({ input, output, ...report }, null, 2));
        return;
      }
      for (const note of report.notes) console.log(`note: ${note}`);
      console.log(
        `${input} (${report.from}) -> ${output} (${report.to}): ${report.tensors} weight tensors, ` +
          `dtype ${
            report.dtypes.join("/")
          }, ${report.optimizerTensors} optimizer tensors, ${report.bytes} bytes`,
      );
      console.log(`largest relative change of a weight: ${report.maxRelativeChange.toExponential(3)}`);
    });
}
