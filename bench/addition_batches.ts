/**
 * Writes the training batches of a preset's addition run to one file, so that a peer in another
 * language (bench/fla_train_peer.py) trains on exactly the batches `falcon train` would use: the
 * trainer's data stream (`deriveSeed(seed, "train")`, packed rows of `seqLen` tokens).
 *
 * File layout: a first line of JSON `{ "B", "T", "batches", "model": {...}, "train": {...} }`, then per
 * batch `ids` (int32 `[B*T]`), `targets` (int32 `[B*T]`), `weights` (float32 `[B*T]`), `starts` (uint8
 * `[B*T]`), little-endian, no padding.
 *
 * ```
 * deno run --allow-write bench/addition_batches.ts --preset addition --batches 64 --out batches.bin
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { modelConfig } from "../src/model/config.ts";
import { ADDITION_VOCAB_SIZE, additionConfig, createTask, packBatch } from "../src/tasks/mod.ts";
import { DataRng, deriveSeed } from "../src/tasks/rng.ts";
import { trainConfig } from "../src/train/config.ts";
import { preset } from "../src/train/presets.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    preset: { type: "string", default: "addition" },
    batches: { type: "string", default: "64" },
    seed: { type: "string", default: "0" },
    out: { type: "string", default: "batches.bin" },
  },
});

const p = preset(values.preset);
const tc = trainConfig({ ...p.train, seed: Number(values.seed) });
const model = modelConfig({ ...p.model, vocabSize: ADDITION_VOCAB_SIZE, mixer: "falcon1" });
const task = createTask(additionConfig(p.addition));
const rng = new DataRng(deriveSeed(tc.seed, "train"));
const count = Number(values.batches);
const header = JSON.stringify({ B: tc.batchSize, T: tc.seqLen, batches: count, model, train: tc }) + "\n";
const n = tc.batchSize * tc.seqLen;
const body = new Uint8Array(count * n * 13);
for (let i = 0; i < count; i++) {
  const batch = packBatch(() => task.sample(rng, "train"), tc.batchSize, tc.seqLen, task.padId);
  const base = i * n * 13;
  body.set(new Uint8Array(batch.ids.buffer, batch.ids.byteOffset, 4 * n), base);
  body.set(new Uint8Array(batch.targets.buffer, batch.targets.byteOffset, 4 * n), base + 4 * n);
  body.set(new Uint8Array(batch.weights.buffer, batch.weights.byteOffset, 4 * n), base + 8 * n);
  body.set(batch.starts, base + 12 * n);
}
const headerBytes = new TextEncoder().encode(header);
const file = new Uint8Array(headerBytes.length + body.length);
file.set(headerBytes);
file.set(body, headerBytes.length);
await Deno.writeFile(values.out, file);
console.error(`wrote ${count} batches of ${tc.batchSize} x ${tc.seqLen} to ${values.out}`);
