/**
 * Fingerprint of a short training run: the first 16 hex digits of the SHA-256 of its per-step losses
 * (float64 bytes), of its final checkpoint file and of that file's tensor bytes alone (`weights`: the
 * file's header holds the run's elapsed time, so only `weights` repeats from run to run), for each preset
 * and thread count asked for. Run it in two trees (before and after a change) to check that training is
 * bit-identical, and across thread counts to check that the thread count changes nothing. Prints one JSON line per run.
 *
 * ```
 * deno run --allow-read --allow-write bench/train_fingerprint.ts --presets tiny,lab,addition \
 *   --steps 20,10,2 --threads 1,2 [--backend wasm] [--rule falcon1]
 * ```
 *
 * `--steps` gives one count for every preset or one per preset.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { type BackendChoice, releaseBackend, selectBackend } from "../backend_select.ts";
import { modelConfig } from "../src/model/config.ts";
import type { MixerName } from "../src/model/types.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../src/tasks/mod.ts";
import { trainConfig } from "../src/train/config.ts";
import { preset } from "../src/train/presets.ts";
import { train } from "../src/train/trainer.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    presets: { type: "string", default: "tiny,lab" },
    steps: { type: "string", default: "20" },
    threads: { type: "string", default: "1,2" },
    backend: { type: "string", default: "wasm" },
    rule: { type: "string", default: "falcon1" },
  },
});

/** A comma-separated list of positive integers, named in the error when it is not one. */
function counts(flag: string, text: string): number[] {
  const out = text.split(",").map(Number);
  if (out.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new RangeError(`--${flag} must be positive integers separated by commas, got "${text}"`);
  }
  return out;
}

/** The tensor bytes of a safetensors file: what follows its 8-byte length and JSON header. */
function tensorBytes(file: Uint8Array): Uint8Array {
  const headerBytes = Number(new DataView(file.buffer, file.byteOffset, 8).getBigUint64(0, true));
  return file.subarray(8 + headerBytes);
}

/** First 16 hex digits of the SHA-256 of `bytes`. */
async function digest(bytes: BufferSource): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(hash.slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

const presets = values.presets.split(",");
const steps = counts("steps", values.steps);
if (steps.length !== 1 && steps.length !== presets.length) {
  throw new RangeError(`--steps gives ${steps.length} counts for ${presets.length} presets`);
}
for (const threads of counts("threads", values.threads)) {
  const backend = await selectBackend(values.backend as BackendChoice, { threads });
  try {
    for (const [i, presetName] of presets.entries()) {
      const p = preset(presetName);
      const runDir = await Deno.makeTempDir({ prefix: "falcon_fingerprint_" });
      try {
        const result = await train({
          backend,
          model: modelConfig({ ...p.model, vocabSize: ADDITION_VOCAB_SIZE, mixer: values.rule as MixerName }),
          task: additionConfig(p.addition),
          train: trainConfig({ ...p.train, steps: steps[steps.length === 1 ? 0 : i], checkpointEvery: 0 }),
          runDir,
        });
        const checkpoint = await Deno.readFile(result.checkpointPath);
        console.log(JSON.stringify({
          backend: backend.name,
          preset: presetName,
          threads,
          steps: result.step,
          losses: await digest(new Float64Array(result.losses)),
          checkpoint: await digest(checkpoint),
          weights: await digest(tensorBytes(checkpoint)),
          lastLoss: result.losses.at(-1),
        }));
      } finally {
        await Deno.remove(runDir, { recursive: true });
      }
    }
  } finally {
    releaseBackend(backend);
  }
}
