/**
 * The Transformer mixer honours `shortConv` and `qkNorm`: the convolutions exist exactly when
 * `shortConv` is on and change the logits; the `rms` QK norm makes attention blind to the scale of
 * the q and k projections, the plain Transformer is not.
 */

import assert from "node:assert/strict";
import { createRefBackend } from "../rules/reference/backend.ts";
import { refData } from "../rules/reference/tensor.ts";
import { assertClose, maxAbsDiff, relativeL2, TOLERANCE } from "../testing/compare.ts";
import { packedBatch, tinyConfig } from "./_gradient_check.ts";
import { createModel } from "./falcon_lm.ts";
import type { LanguageModel, ModelConfig } from "./types.ts";

const BATCH = packedBatch(31, 7, 2, 8);

function param(model: LanguageModel, name: string): Float64Array {
  const p = model.parameters().find((q) => q.name === name);
  if (!p) throw new Error(`no parameter ${name}`);
  return refData(p.value, name);
}

/** Logits of `config`'s model (seed 4) after `edit` changed its parameters in place. */
async function logitsAfter(
  config: ModelConfig,
  edit: (model: LanguageModel) => void = () => {},
): Promise<Float32Array | Float64Array> {
  const model = createModel(createRefBackend(), config, 4);
  edit(model);
  return await model.logits(BATCH);
}

Deno.test("the Transformer with shortConv has q/k/v_conv in every layer, and changing q_conv changes the logits", async () => {
  const config = tinyConfig("transformer");
  assert.equal(config.shortConv, true);
  const model = createModel(createRefBackend(), config, 4);
  const names = model.parameters().map((p) => p.name);
  for (const layer of [0, 1]) {
    for (const p of ["q", "k", "v"]) {
      assert.ok(names.includes(`layers.${layer}.mixer.${p}_conv`), names.join());
    }
  }
  const base = await logitsAfter(config);
  for (const p of ["q", "k", "v"]) {
    const changed = await logitsAfter(config, (m) => {
      param(m, `layers.0.mixer.${p}_conv`)[3] += 0.5; // the current-position tap of channel 0
    });
    assert.ok(maxAbsDiff(changed, base).value > 1e-4, `${p}_conv does not reach the logits`);
  }
});

Deno.test("the Transformer with shortConv false has no conv parameters and runs its projections directly", async () => {
  const plain = tinyConfig("transformer", { shortConv: false, qkNorm: "none" });
  const model = createModel(createRefBackend(), plain, 4);
  assert.equal(model.parameters().some((p) => p.name.includes("conv")), false);
  // the shared projections draw the same initial values: only the convolution separates the two models
  const withConv = await logitsAfter(tinyConfig("transformer", { qkNorm: "none" }));
  assert.ok(maxAbsDiff(await model.logits(BATCH), withConv).value > 1e-4);
});

Deno.test("qkNorm rms makes the Transformer's logits invariant to the scale of q_proj and k_proj; none does not", async () => {
  const scale = (m: LanguageModel) => {
    for (const layer of [0, 1]) {
      for (const p of ["q", "k"]) {
        const w = param(m, `layers.${layer}.mixer.${p}_proj`);
        for (let i = 0; i < w.length; i++) w[i] *= 3;
      }
    }
  };
  // without the convolution q and k are linear in their projections, so the norm undoes the scaling
  // up to eps_rms (1e-6 against mean squares near 1: a relative change near 1e-6)
  const rms = tinyConfig("transformer", { shortConv: false, qkNorm: "rms" });
  const rmsChange = relativeL2(await logitsAfter(rms, scale), await logitsAfter(rms));
  assert.ok(rmsChange < 1e-5, `rms: the logits moved by relative L2 ${rmsChange}`);
  const none = tinyConfig("transformer", { shortConv: false, qkNorm: "none" });
  const noneChange = relativeL2(await logitsAfter(none, scale), await logitsAfter(none));
  assert.ok(noneChange > 1e-2, `none: the logits moved by relative L2 ${noneChange} only`);
  // and the norm is really applied: rms and none differ on the same weights
  assert.ok(maxAbsDiff(await logitsAfter(rms), await logitsAfter(none)).value > 1e-4);
});

Deno.test("the Transformer's packed-row logits equal its sequences run alone, with and without conv and QK norm", async () => {
  for (const overrides of [{}, { shortConv: false, qkNorm: "none" as const }]) {
    const config = tinyConfig("transformer", overrides);
    const model = createModel(createRefBackend(), config, 5);
    const V = config.vocabSize;
    const ids = Int32Array.from([3, 1, 4, 1, 5, 2, 6]);
    const packed = await model.logits({ B: 1, T: 7, ids, starts: Uint8Array.from([1, 0, 0, 1, 0, 0, 0]) });
    const alone = await model.logits({
      B: 1,
      T: 4,
      ids: ids.slice(3),
      starts: Uint8Array.from([1, 0, 0, 0]),
    });
    assertClose(`${JSON.stringify(overrides)} second sequence`, packed.slice(3 * V), alone, TOLERANCE.f64);
  }
});
