import assert from "node:assert/strict";
import { MIXERS } from "../model/config.ts";
import { parameterSpecs } from "../model/params.ts";
import { tinyConfig } from "./_test_checkpoints.ts";
import { hfPlacement, hfShape, nativePlacement, nativeShape, transposeBytes } from "./hf_layout.ts";

Deno.test("every native parameter of every mixer maps to a distinct hf name and back", () => {
  for (const mixer of MIXERS) {
    for (const overrides of [{}, { parameterisation: "const" as const, tieEmbeddings: false }]) {
      const specs = parameterSpecs(tinyConfig({ mixer, ...overrides }));
      const names = new Set<string>();
      for (const spec of specs) {
        const hf = hfPlacement(spec.name);
        assert.ok(!names.has(hf.name), `${mixer}: ${hf.name} used twice`);
        names.add(hf.name);
        assert.equal(nativePlacement(hf.name).name, spec.name);
        assert.deepEqual(nativeShape(hfShape(spec.shape, hf.change), hf.change), [...spec.shape]);
        if (spec.shape.length === 2 && !spec.name.endsWith("_conv") && spec.name !== "embed") {
          assert.equal(hf.change, "transpose", `${spec.name} is a matrix stored [in, out]`);
        }
      }
    }
  }
});

Deno.test("hf names follow the flash-linear-attention layout", () => {
  const cases: [string, string][] = [
    ["embed", "model.embeddings.weight"],
    ["layers.3.attn_norm", "model.layers.3.attn_norm.weight"],
    ["layers.0.mixer.k_proj", "model.layers.0.attn.k_proj.weight"],
    ["layers.1.mixer.v_conv", "model.layers.1.attn.v_conv1d.weight"],
    ["layers.0.mixer.beta_proj", "model.layers.0.attn.b_proj.weight"],
    ["layers.0.mixer.beta_bias", "model.layers.0.attn.b_proj.bias"],
    ["layers.0.mixer.lambda_proj", "model.layers.0.attn.l_proj.weight"],
    ["layers.0.mixer.lambda_bias", "model.layers.0.attn.l_proj.bias"],
    ["layers.0.mixer.o_norm", "model.layers.0.attn.o_norm.weight"],
    ["layers.0.mixer.gate_proj", "model.layers.0.attn.g_proj.weight"],
    ["layers.0.mixer.out_proj", "model.layers.0.attn.o_proj.weight"],
    ["layers.12.mlp_norm", "model.layers.12.mlp_norm.weight"],
    ["layers.2.mlp.down_proj", "model.layers.2.mlp.down_proj.weight"],
    ["final_norm", "model.norm.weight"],
    ["lm_head", "lm_head.weight"],
  ];
  for (const [native, hf] of cases) assert.equal(hfPlacement(native).name, hf);
  assert.deepEqual(hfShape([8, 4], "conv"), [8, 1, 4]);
  assert.throws(() => hfPlacement("layers.0.mixer.unknown"), /no hf name for native parameter/);
  assert.throws(() => nativePlacement("model.layers.0.attn.q_proj.bias"), /unknown hf tensor/);
  assert.throws(() => nativeShape([8, 2, 4], "conv"), /\[C, 1, W\]/);
});

Deno.test("transposeBytes() moves whole elements and is its own inverse", () => {
  const m = new Float64Array([1, 2, 3, 4, 5, 6]); // [2, 3]
  const t = transposeBytes(new Uint8Array(m.buffer), 2, 3, 8);
  assert.deepEqual(Array.from(new Float64Array(t.buffer)), [1, 4, 2, 5, 3, 6]);
  assert.deepEqual(transposeBytes(t, 3, 2, 8), new Uint8Array(m.buffer));
  assert.throws(() => transposeBytes(new Uint8Array(10), 2, 3, 2), /10 bytes is not 2 x 3 x 2/);
});
