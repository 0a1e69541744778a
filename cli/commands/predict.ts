/**
 * `falcon predict`: greedy continuation of a prompt by a trained checkpoint. For addition it
 * prints the decoded number and whether it is right; `--json` adds the per-position logits of the
 * prompt. An addition prompt `a+b=` is rebuilt in the checkpoint's format (the printed line shows the
 * tokens the model saw, hints included). The work is `loadForPrediction` and `predict` in
 * `src/train/predict.ts`.
 *
 * @module
 */

import { Command, Option } from "@commander-js/extra-typings";
import { BACKEND_CHOICES, selectBackend } from "../../backend_select.ts";
import { TASKS } from "../../src/tasks/types.ts";
import { loadForPrediction, predict } from "../../src/train/predict.ts";
import { parseThreads, threadsOption } from "../threads_option.ts";
import { gpuMatmulOption } from "../gpu_matmul_option.ts";
import { UsageError } from "../errors.ts";

/** Build the `predict` subcommand. */
export function predictCommand() {
  return new Command("predict")
    .description("greedy prediction from a checkpoint (addition: the decoded sum and whether it is right)")
    .argument("<checkpoint>", "a falcon checkpoint (.safetensors file or hf export directory)")
    .requiredOption("--prompt <text>", 'prompt, e.g. "12345+678=" (mqar: "k1 v2 k1"; text: any text)')
    .option(
      "--max-tokens <n>",
      "most tokens to generate (default: addition the longest answer + EOS, mqar 1, text 64)",
    )
    .addOption(
      new Option("--task <task>", "expected task; a checkpoint of another task is an error").choices(TASKS),
    )
    .addOption(
      new Option("--backend <name>", "compute backend").choices(BACKEND_CHOICES).default("auto" as const),
    )
    .addOption(threadsOption())
    .addOption(gpuMatmulOption())
    .option("--json", "print JSON, with the per-position logits of the prompt", false)
    .action(async (path, o) => {
      let maxTokens: number | undefined;
      if (o.maxTokens !== undefined) {
        maxTokens = Number(o.maxTokens);
        if (!/^\d+$/.test(o.maxTokens) || maxTokens < 1) {
          throw new UsageError(`--max-tokens must be an integer >= 1, got "${o.maxTokens}"`);
        }
      }
      const backend = await selectBackend(o.backend, {
        threads: parseThreads(o.threads),
        gpuMatmul: o.gpuMatmul,
        // says which backend auto chose, and that --gpu-matmul f16 was not applied when it is not webgpu
        onNote: (note) => console.error(note),
      }).catch((err) => {
        throw new UsageError(`--backend ${o.backend}: ${err.message}`);
      });
      const { model, task, state } = await loadForPrediction(path, backend);
      if (o.task && o.task !== task.config.task) {
        throw new UsageError(`${path} is a checkpoint of task ${task.config.task}, not ${o.task}`);
      }
      const p = await predict(model, task, o.prompt, maxTokens);
      if (o.json) {
        console.log(JSON.stringify({ checkpoint: path, step: state.step, task: task.config.task, ...p }));
        return;
      }
      console.log(`${p.promptText}${p.completion}`);
      if (p.addition) {
        const verdict = p.addition.correct ? "right" : `wrong (expected ${p.addition.expected})`;
        console.log(`answer ${p.addition.answer || "(none)"}: ${verdict}`);
      } else if (!p.stoppedAtEos && task.eosId !== undefined) {
        console.log(`(no end of sequence within ${p.tokens.length} tokens)`);
      }
    });
}
