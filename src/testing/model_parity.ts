/**
 * The model half of the parity suite: a whole {@linkcode FalconLM} on a fast backend against the
 * same model on the float64 reference, with the same (f32-valued) weights on a packed batch: the
 * logits, the loss and every parameter gradient. It covers the compositions of ops the model
 * makes (the Transformer's short convolution and QK norm around attention, a fast-weight mixer),
 * which the per-op suites do not.
 *
 * @module
 */

import { roundParametersToF32 } from "../convert/from_model.ts";
import { modelConfig } from "../model/config.ts";
import { createModel } from "../model/falcon_lm.ts";
import type { Batch, ModelConfig } from "../model/types.ts";
import type { Backend } from "../rules/backend.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { relativeL2, Rng } from "./compare.ts";

/** Relative L2 of float32 logits and loss against float64. */
export const MODEL_FORWARD_TOLERANCE = 1e-5;
/** Relative L2 of each float32 parameter gradient against float64. */
export const MODEL_GRADIENT_TOLERANCE = 1e-4;

/** The models compared: the Transformer with and without its convolution and QK norm, and a fast-weight mixer. */
export const MODEL_PARITY_CASES: readonly { readonly name: string; readonly config: Partial<ModelConfig> }[] =
  [
    { name: "transformer (short conv, QK RMS-norm)", config: { mixer: "transformer" } },
    { name: "transformer plain", config: { mixer: "transformer", shortConv: false, qkNorm: "none" } },
    { name: "transformer, QK RMS-norm only", config: { mixer: "transformer", shortConv: false } },
    { name: "falcon1 (short conv)", config: { mixer: "falcon1" } },
  ];

/** A packed batch: `B = 2` rows of `T = 11`, row 0 holding two sequences. */
function batch(vocab: number, seed: number): Batch {
  const B = 2;
  const T = 11;
  const rng = new Rng(seed);
  const ids = Int32Array.from({ length: B * T }, () => Math.floor(rng.uniform() * vocab));
  const targets = Int32Array.from({ length: B * T }, () => Math.floor(rng.uniform() * vocab));
  const weights = Float32Array.from({ length: B * T }, (_, i) => (i % 4 === 1 ? 0 : 1));
  const starts = new Uint8Array(B * T);
  starts[0] = starts[5] = starts[T] = 1;
  return { B, T, ids, targets, weights, starts };
}

/** Forward and backward of one case on `backend`: logits, loss and every gradient by name. */
async function runModel(backend: Backend, config: ModelConfig, data: Batch) {
  const model = createModel(backend, config, 17);
  await roundParametersToF32(model);
  const { loss } = await model.forwardBackward(data);
  const grads = new Map<string, Float32Array | Float64Array>();
  for (const p of model.parameters()) grads.set(p.name, await backend.read(p.grad));
  return { loss, logits: await model.logits(data), grads };
}

/** Compare one case on `backend` with the reference; returns a line per failed comparison. */
export async function modelParityFailures(
  backend: Backend,
  overrides: Partial<ModelConfig>,
  ref: Backend = createRefBackend(),
): Promise<string[]> {
  const config = modelConfig({
    vocabSize: 11,
    dModel: 16,
    heads: 2,
    layers: 2,
    ffnHidden: 32,
    chunkSize: 4,
    ...overrides,
  });
  const data = batch(config.vocabSize, 5);
  const fast = await runModel(backend, config, data);
  const slow = await runModel(ref, config, data);
  const failures: string[] = [];
  const check = (what: string, error: number, tolerance: number) => {
    if (!(error <= tolerance)) failures.push(`${what}: rel L2 ${error.toExponential(2)} > ${tolerance}`);
  };
  check("logits", relativeL2(fast.logits, slow.logits), MODEL_FORWARD_TOLERANCE);
  check("loss", Math.abs(fast.loss - slow.loss) / Math.abs(slow.loss), MODEL_FORWARD_TOLERANCE);
  for (const [name, want] of slow.grads) {
    check(`grad ${name}`, relativeL2(fast.grads.get(name)!, want), MODEL_GRADIENT_TOLERANCE);
  }
  return failures;
}

/** Register the model half of the suite with `Deno.test` (see `registerDenseParity`). */
export async function registerModelParity(
  name: string,
  makeBackend: () => Promise<Backend | null>,
  close: (backend: Backend) => void | Promise<void> = () => {},
): Promise<void> {
  const backend = await makeBackend();
  if (!backend) {
    Deno.test({ name: `${name}: model parity (SKIPPED: backend unavailable here)`, ignore: true, fn() {} });
    return;
  }
  Deno.test({
    name:
      `${name}: FalconLM logits, loss and gradients match the float64 reference (Transformer variants, falcon1)`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      try {
        for (const c of MODEL_PARITY_CASES) {
          await t.step(c.name, async () => {
            const failures = await modelParityFailures(backend, c.config);
            if (failures.length > 0) throw new Error(failures.join("; "));
          });
        }
      } finally {
        await close(backend);
      }
    },
  });
}
