/**
 * PyTorch parity: a tiny FalconLM per mixer, trained a few AdamW steps (so norms, biases and
 * constants leave their initial values), saved as a native checkpoint, converted with
 * `convertCheckpoint(..., { to: "hf", dtype: "f32" })`, and run by interop/torch/falcon_torch.py
 * (recurrent form, float32) on a packed prompt; its logits must match the model's own (reference
 * backend, chunked form) to a max abs difference of 1e-4.
 *
 * Needs `--allow-run` (to start python3), `--allow-read`, `--allow-write` (a temporary directory)
 * and `--allow-env` (FALCON_REQUIRE_TORCH, FALCON_PYTHON). Without run permission, python3 or
 * torch the test is ignored, with a name that says why, unless FALCON_REQUIRE_TORCH=1 (CI sets it
 * after installing Debian's python3-torch): then it fails.
 */

import { ok } from "node:assert/strict";
import { encodeCheckpoint, type FloatTensor } from "../checkpoint/checkpoint.ts";
import { modelConfig } from "../model/config.ts";
import { createModel } from "../model/falcon_lm.ts";
import type { LanguageModel, MixerName, ModelConfig } from "../model/types.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { additionConfig } from "../tasks/addition.ts";
import { createTask } from "../tasks/mod.ts";
import { main } from "../../cli/main.ts";
import { maxAbsDiff, Rng } from "../testing/compare.ts";
import { convertCheckpoint } from "./convert.ts";
import { torchTest } from "../testing/torch_python.ts";
import { roundParametersToF32 } from "./from_model.ts";

const SCRIPT = new URL("../../interop/torch/falcon_torch.py", import.meta.url).pathname;
/** Torch in float32 against the float64 reference model (the bound). */
const TOLERANCE = 1e-4;
/** Torch in float64 with the same (f32-valued) weights: the two implementations agree to rounding. */
const TOLERANCE_F64 = 1e-9;

/**
 * Tiny models: every mixer, both alignments and parameterisations, tied and untied heads, and the
 * Transformer with and without its short convolution and QK norm.
 */
const CASES: Partial<ModelConfig>[] = [
  { mixer: "falcon1" },
  { mixer: "falcon2", alignment: "same-step" },
  { mixer: "falcon3", tieEmbeddings: false },
  { mixer: "falcon1a", parameterisation: "const" },
  { mixer: "falcon2a", qkNorm: "l2", outputGate: false, parameterisation: "const" },
  { mixer: "falcon3a", window: 3, shortConv: false },
  { mixer: "linear", alignment: "same-step", qkNorm: "l2" },
  { mixer: "retnet", qkNorm: "l2" },
  { mixer: "mamba2", alignment: "same-step", qkNorm: "l2" },
  { mixer: "deltanet", alignment: "same-step" },
  { mixer: "gated_deltanet", parameterisation: "const" },
  { mixer: "transformer" }, // short conv and QK RMS-norm (the defaults)
  { mixer: "transformer", shortConv: false, qkNorm: "none" }, // the plain Transformer
  { mixer: "transformer", qkNorm: "none", tieEmbeddings: false }, // short conv only
];
const IDS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7];
const STARTS = [9]; // a second sequence starts at position 9

/** A few AdamW steps on random next-token data, so every parameter moves off its initial value. */
async function train(model: LanguageModel, seed: number): Promise<void> {
  const be = model.backend;
  const rng = new Rng(seed);
  const B = 2;
  const T = 12;
  const V = model.config.vocabSize;
  const moments = model.parameters().map((p) => ({ m: be.zeros(p.value.shape), v: be.zeros(p.value.shape) }));
  for (let step = 1; step <= 3; step++) {
    const ids = Int32Array.from({ length: B * T }, () => Math.floor(rng.uniforms(1, 0, V)[0]) % V);
    const targets = Int32Array.from(ids, (_, i) => ids[(i + 1) % ids.length]);
    const starts = new Uint8Array(B * T);
    starts[5] = 1;
    await model.forwardBackward({ B, T, ids, targets, weights: new Float32Array(B * T).fill(1), starts });
    const params = { lr: 0.02, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.01, step, gradScale: 1 };
    model.parameters().forEach((p, i) =>
      be.adamw(p.value, p.grad, moments[i].m, moments[i].v, params, p.decay)
    );
  }
}

const ADDITION = additionConfig({ maxDigits: 3 });

/** Save `model` as a native addition checkpoint at `path` (parameters as the reference backend holds them, F64). */
async function saveNative(model: LanguageModel, path: string): Promise<void> {
  const params: Record<string, FloatTensor> = {};
  for (const p of model.parameters()) {
    params[p.name] = { shape: p.value.shape, data: Float64Array.from(await model.backend.read(p.value)) };
  }
  const task = ADDITION;
  const bytes = encodeCheckpoint({
    step: 3,
    rngState: 1,
    model: model.config,
    task,
    train: {},
    params,
    adamM: {},
    adamV: {},
  });
  await Deno.writeFile(path, bytes);
}

function caseName(c: Partial<ModelConfig>): string {
  return Object.entries(c).map(([k, v]) => `${k}=${v}`).join(",");
}

torchTest(
  "falcon_torch.py logits match FalconLM logits for every mixer (max abs < 1e-4 in f32, < 1e-9 in f64)",
  async (python) => {
    const root = await Deno.makeTempDir({ prefix: "falcon_parity_" });
    try {
      const expected = new Map<string, Float32Array | Float64Array>();
      for (const [i, c] of CASES.entries()) {
        const config = modelConfig({ vocabSize: 10, dModel: 8, heads: 2, layers: 2, ffnHidden: 16, ...c });
        const model = createModel(createRefBackend(), config, 100 + i);
        await train(model, 200 + i);
        // the f32 export then holds exactly the weights the model computes with
        await roundParametersToF32(model);
        const native = `${root}/${i}-${c.mixer as MixerName}.safetensors`;
        await saveNative(model, native);
        const dir = `${root}/${i}-${c.mixer as MixerName}`;
        const report = await convertCheckpoint(native, dir, { to: "hf", dtype: "f32" });
        ok(report.maxRelativeChange === 0, `${caseName(c)}: f32 rounding was not exact`);
        const starts = new Uint8Array(IDS.length);
        for (const s of STARTS) starts[s] = 1;
        const logits = await model.logits({ B: 1, T: IDS.length, ids: Int32Array.from(IDS), starts });
        ok(
          maxAbsDiff(logits, new Float64Array(logits.length)).value > 0.01,
          `${caseName(c)}: logits are all ~0`,
        );
        expected.set(dir, logits);
      }
      for (const [dtype, tolerance] of [["float32", TOLERANCE], ["float64", TOLERANCE_F64]] as const) {
        const out = await new Deno.Command(python, {
          args: [
            SCRIPT,
            ...expected.keys(),
            "--ids",
            IDS.join(","),
            "--starts",
            STARTS.join(","),
            "--dtype",
            dtype,
            "--json",
          ],
        }).output();
        const stderr = new TextDecoder().decode(out.stderr);
        ok(out.success, `falcon_torch.py exited ${out.code}: ${stderr}`);
        const got = JSON.parse(new TextDecoder().decode(out.stdout)) as Record<string, number[][]>;
        const failures: string[] = [];
        let worst = 0;
        for (const [i, [dir, want]] of [...expected.entries()].entries()) {
          const flat = got[dir].flat();
          ok(flat.length === want.length, `${dir}: ${flat.length} logits, expected ${want.length}`);
          const d = maxAbsDiff(flat, want);
          worst = Math.max(worst, d.value);
          if (!(d.value < tolerance)) {
            failures.push(`${caseName(CASES[i])}: max abs diff ${d.value} at index ${d.index}`);
          }
        }
        ok(
          failures.length === 0,
          `${dtype} logits differ by more than ${tolerance}:\n${failures.join("\n")}`,
        );
        console.log(`${dtype}: largest abs difference over ${CASES.length} models ${worst.toExponential(2)}`);
      }
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
);

/** Run the CLI in-process, capturing stdout. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => out.push(a.join(" "));
  console.error = (...a: unknown[]) => err.push(a.join(" "));
  try {
    return { code: await main(args), out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
    Deno.exitCode = 0;
  }
}

torchTest(
  "falcon convert --to hf, then falcon_torch.py, reproduces falcon predict --json prompt logits (max abs < 1e-4)",
  async (python) => {
    const root = await Deno.makeTempDir({ prefix: "falcon_predict_parity_" });
    try {
      const config = modelConfig({
        vocabSize: 14,
        dModel: 8,
        heads: 2,
        layers: 2,
        ffnHidden: 16,
        mixer: "falcon3a",
      });
      const model = createModel(createRefBackend(), config, 42);
      await train(model, 43);
      await roundParametersToF32(model);
      const native = `${root}/addition.safetensors`;
      await saveNative(model, native);
      const prompt = "123+45=";
      const predicted = await cli(["predict", native, "--prompt", prompt, "--backend", "ref", "--json"]);
      ok(predicted.code === 0, `falcon predict failed: ${predicted.err}`);
      const want = (JSON.parse(predicted.out) as { promptLogits: number[][] }).promptLogits.flat();
      const converted = await cli(["convert", native, `${root}/hf`, "--to", "hf", "--dtype", "f32"]);
      ok(converted.code === 0, `falcon convert failed: ${converted.err}`);
      const ids = Array.from(createTask(ADDITION).encode(prompt));
      const out = await new Deno.Command(python, {
        args: [SCRIPT, `${root}/hf`, "--ids", ids.join(","), "--json"],
      }).output();
      ok(out.success, `falcon_torch.py exited ${out.code}: ${new TextDecoder().decode(out.stderr)}`);
      const got =
        (JSON.parse(new TextDecoder().decode(out.stdout)) as Record<string, number[][]>)[`${root}/hf`].flat();
      ok(
        got.length === want.length && want.length === ids.length * 14,
        `${got.length} vs ${want.length} logits`,
      );
      const d = maxAbsDiff(got, want);
      ok(d.value < TOLERANCE, `max abs diff ${d.value} at index ${d.index}`);
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
);

const PY_TESTS = [
  "test_rules.py",
  "test_safetensors.py",
  "test_load.py",
  "test_forms.py",
  "test_train_inputs.py",
];

torchTest(
  `interop/torch/${
    PY_TESTS.join(", ")
  } pass (rules vs fixtures/vectors, hostile files, loader, fast forms vs recurrent, train_ddp inputs)`,
  async (python) => {
    for (const test of PY_TESTS) {
      const path = new URL(`../../interop/torch/${test}`, import.meta.url).pathname;
      const out = await new Deno.Command(python, { args: [path] }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      ok(out.success, `${test} exited ${out.code}:\n${text}`);
      ok(/^\d+ passed, 0 failed$/m.test(text), `${test}: no summary line:\n${text}`);
    }
  },
);
