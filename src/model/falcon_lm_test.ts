import assert from "node:assert/strict";
import { RULES } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertClose, TOLERANCE } from "../testing/compare.ts";
import { checkModelGradients, hostLoss, packedBatch, tinyConfig } from "./_gradient_check.ts";
import { createModel } from "./falcon_lm.ts";
import { parameterCount } from "./params.ts";
import type { MixerName, ModelConfig } from "./types.ts";

const MIXERS: MixerName[] = [...RULES, "transformer"];

async function gradientCheck(config: ModelConfig, seed: number): Promise<void> {
  const model = createModel(createRefBackend(), config, seed, { coupling: false });
  const samples = await checkModelGradients(model, packedBatch(seed + 100, config.vocabSize), {
    seed,
    perParam: 3,
  });
  // the check must have compared real, non-vanishing gradients
  const nonzero = samples.filter((s) => Math.abs(s.numeric) > 1e-6).length;
  if (nonzero < samples.length / 2) {
    throw new Error(`only ${nonzero} of ${samples.length} gradients are non-zero`);
  }
}

for (const mixer of MIXERS) {
  Deno.test(`FalconLM(${mixer}) gradients match central finite differences on a packed batch`, async () => {
    await gradientCheck(tinyConfig(mixer), 11);
  });
}

const VARIANTS: [string, MixerName, Partial<ModelConfig>][] = [
  ["falcon2, const, same-step, untied, no conv, no gate", "falcon2", {
    parameterisation: "const",
    alignment: "same-step",
    tieEmbeddings: false,
    shortConv: false,
    outputGate: false,
    layers: 1,
  }],
  ["falcon3a, const", "falcon3a", { parameterisation: "const", layers: 1 }],
  ["mamba2, const", "mamba2", { parameterisation: "const", layers: 1 }],
  ["gated_deltanet, same-step", "gated_deltanet", { alignment: "same-step", layers: 1 }],
  ["transformer, untied", "transformer", { tieEmbeddings: false, layers: 1 }],
  ["transformer, plain (no conv, no QK norm)", "transformer", { shortConv: false, qkNorm: "none" }],
  ["transformer, short conv only", "transformer", { qkNorm: "none", layers: 1 }],
  ["transformer, QK RMS-norm only", "transformer", { shortConv: false, layers: 1 }],
];

for (const [label, mixer, overrides] of VARIANTS) {
  Deno.test(`FalconLM gradients match finite differences for ${label}`, async () => {
    await gradientCheck(tinyConfig(mixer, overrides), 23);
  });
}

Deno.test("FalconLM logits of a packed row equal the logits of its sequences run separately", async () => {
  for (const mixer of MIXERS) {
    const config = tinyConfig(mixer);
    const model = createModel(createRefBackend(), config, 5);
    const V = config.vocabSize;
    const ids = Int32Array.from([3, 1, 4, 1, 5, 2, 6]);
    const packedStarts = Uint8Array.from([1, 0, 0, 1, 0, 0, 0]);
    const packed = await model.logits({ B: 1, T: 7, ids, starts: packedStarts });
    for (const [from, len] of [[0, 3], [3, 4]]) {
      const starts = new Uint8Array(len);
      starts[0] = 1;
      const alone = await model.logits({ B: 1, T: len, ids: ids.slice(from, from + len), starts });
      assertClose(
        `${mixer} sequence at ${from}`,
        packed.slice(from * V, (from + len) * V),
        alone,
        TOLERANCE.f64,
      );
    }
  }
});

Deno.test("FalconLM chunked training form gives the recurrent form's logits and gradients", async () => {
  for (const mixer of RULES) {
    const config = tinyConfig(mixer, { layers: 1 });
    const batch = packedBatch(3, config.vocabSize, 2, 7);
    const grads: Float64Array[][] = [];
    const logits: (Float32Array | Float64Array)[] = [];
    for (const form of ["chunk", "recurrent"] as const) {
      const model = createModel(createRefBackend(), config, 9, { form });
      await model.forwardBackward(batch);
      logits.push(await model.logits(batch));
      const g: Float64Array[] = [];
      for (const p of model.parameters()) g.push(Float64Array.from(await model.backend.read(p.grad)));
      grads.push(g);
    }
    assertClose(`${mixer} logits`, logits[0], logits[1], TOLERANCE.f64);
    grads[0].forEach((g, i) =>
      assertClose(`${mixer} grad ${i}`, g, grads[1][i], { rtol: 1e-8, atol: 1e-10 })
    );
  }
});

Deno.test("FalconLM.forwardBackward() returns the weighted loss sum and the weight sum", async () => {
  const config = tinyConfig("falcon1a");
  const model = createModel(createRefBackend(), config, 2);
  const batch = packedBatch(4, config.vocabSize);
  const { loss, weight } = await model.forwardBackward(batch);
  assertClose("loss", [loss], [await hostLoss(model, batch)], TOLERANCE.f64);
  assertClose("weight", [weight], [batch.weights.reduce((a, b) => a + b, 0)], TOLERANCE.f64);
  // zeroes the gradients first: a second call gives the same gradients, not twice them
  const first = Float64Array.from(await model.backend.read(model.parameters()[0].grad));
  await model.forwardBackward(batch);
  assertClose(
    "embed grad after a second call",
    await model.backend.read(model.parameters()[0].grad),
    first,
    TOLERANCE.f64,
  );
});

Deno.test("createModel() is deterministic in its seed and parameters() matches parameterCount()", async () => {
  const config = tinyConfig("falcon3");
  const a = createModel(createRefBackend(), config, 42);
  const b = createModel(createRefBackend(), config, 42);
  const c = createModel(createRefBackend(), config, 43);
  const total = a.parameters().reduce((n, p) => n + p.value.size, 0);
  assertClose("parameter count", [total], [parameterCount(config)], TOLERANCE.f64);
  const names = a.parameters().map((p) => p.name);
  if (new Set(names).size !== names.length) throw new Error(`duplicate parameter names: ${names}`);
  const embedA = await a.backend.read(a.parameters()[0].value);
  assertClose("same seed", await b.backend.read(b.parameters()[0].value), embedA, { rtol: 0, atol: 0 });
  const embedC = await c.backend.read(c.parameters()[0].value);
  if (embedC.every((x, i) => x === embedA[i])) throw new Error("different seeds gave the same embedding");
});

Deno.test("FalconLM rejects a batch whose arrays do not match B*T or hold out-of-range ids", async () => {
  const config = tinyConfig("transformer", { layers: 1 });
  const model = createModel(createRefBackend(), config, 1);
  const expectError = async (f: () => Promise<unknown>, pattern: RegExp) => {
    try {
      await f();
    } catch (e) {
      if (e instanceof RangeError && pattern.test(e.message)) return;
      throw e;
    }
    throw new Error(`expected a RangeError matching ${pattern}`);
  };
  await expectError(
    () => model.logits({ B: 1, T: 3, ids: Int32Array.from([1, 2]), starts: new Uint8Array(3) }),
    /ids has length 2/,
  );
  await expectError(
    () => model.logits({ B: 1, T: 2, ids: Int32Array.from([1, 7]), starts: new Uint8Array(2) }),
    /token id 7/,
  );
});

Deno.test("FalconLM.forwardBackward() issues every gradient op before it first waits", async () => {
  const config = tinyConfig("falcon1");
  const model = createModel(createRefBackend(), config, 3);
  const batch = packedBatch(5, config.vocabSize);
  const be = model.backend;
  // the reference backend runs ops as they are issued: the gradients are complete when the call returns
  const pending = model.forwardBackward(batch);
  const early = await Promise.all(model.parameters().map((p) => be.sumSquares(p.grad)));
  await pending;
  const late = await Promise.all(model.parameters().map((p) => be.sumSquares(p.grad)));
  assert(late.some((x) => x > 0), "non-zero gradients");
  assertClose("gradient sums of squares before vs after the loss read", early, late, TOLERANCE.f64);
});
