import {
  ADDITION_VOCAB_SIZE,
  additionConfig,
  createModel,
  createRefBackend,
  modelConfig,
  ruleConfig,
  train,
  trainConfig,
} from "@falcon/falcon";

// One rule, two forms: the chunk-parallel form computes what the recurrent form computes.
const backend = createRefBackend(); // float64, the oracle every fast backend is judged by
const [B, T, H, D] = [2, 12, 2, 4];
const wave = (n: number, phase: number) => Array.from({ length: n }, (_, i) => Math.sin(0.7 * i + phase));
const inputs = {
  q: backend.fromArray(wave(B * T * H * D, 0), [B, T, H, D]),
  k: backend.fromArray(wave(B * T * H * D, 1), [B, T, H, D]),
  v: backend.fromArray(wave(B * T * H * D, 2), [B, T, H, D]),
  beta: backend.fromArray(wave(B * T * H, 3).map((x) => 1 + 0.5 * x), [B, T, H]),
  lambdabar: backend.fromArray(new Array(B * T * H).fill(0.1), [B, T, H]),
};
const rule = ruleConfig("falcon3a");
const recurrent = await backend.read(backend.fastWeightForward(rule, inputs, { form: "recurrent" }).o);
const chunked = await backend.read(
  backend.fastWeightForward(rule, inputs, { form: "chunk", chunkSize: 4 }).o,
);
const maxDiff = Math.max(...Array.from(recurrent, (x, i) => Math.abs(x - chunked[i])));
console.log(
  `falcon3a recurrent vs chunk (C=4): ${recurrent.length} outputs, max |diff| ${maxDiff.toExponential(2)}`,
);
if (!(maxDiff < 1e-12)) throw new Error(`the forms disagree: max |diff| ${maxDiff}`);

// Train a small Falcon-1 language model on 1-2 digit addition for a few steps.
const runDir = await Deno.makeTempDir({ prefix: "falcon_example_" }); // checkpoint.safetensors, metrics.jsonl
const result = await train({
  backend,
  model: modelConfig({ mixer: "falcon1", vocabSize: ADDITION_VOCAB_SIZE, dModel: 16, heads: 2, layers: 1 }),
  task: additionConfig({ maxDigits: 2 }),
  train: trainConfig({ steps: 4, batchSize: 4, seqLen: 32, warmupSteps: 1, checkpointEvery: 0 }),
  runDir,
  // the model factory: here the recurrent form instead of the default chunked one
  createModel: (backend, config, seed) => createModel(backend, config, seed, { form: "recurrent" }),
});
const losses = result.losses.map((l) => l.toFixed(3)).join(", ");
console.log(`${result.status} ${result.step} steps of ${result.parameterCount} parameters, losses ${losses}`);
console.log(`checkpoint ${result.checkpointPath}`);
await Deno.remove(runDir, { recursive: true });
