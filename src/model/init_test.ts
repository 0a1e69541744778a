import { createRefBackend } from "../rules/reference/backend.ts";
import { assertClose } from "../testing/compare.ts";
import { modelConfig } from "./config.ts";
import { modelRuleConfig } from "./fast_weight_mixer.ts";
import { createParameters, initialValues, paramSeed } from "./init.ts";
import { parameterSpecs } from "./params.ts";

Deno.test("initialValues() draws each parameter from its own stream: other parameters do not shift it", () => {
  const specs = parameterSpecs(
    modelConfig({ mixer: "falcon1", dModel: 8, heads: 2, layers: 2, vocabSize: 5 }),
  );
  const withGate = new Map(specs.map((s) => [s.name, initialValues(s, 7)]));
  const noGate = parameterSpecs(
    modelConfig({ mixer: "falcon1", dModel: 8, heads: 2, layers: 2, vocabSize: 5, outputGate: false }),
  );
  for (const s of noGate) {
    assertClose(s.name, initialValues(s, 7), withGate.get(s.name)!, { rtol: 0, atol: 0 });
  }
  if (paramSeed(7, "embed") === paramSeed(8, "embed")) throw new Error("seed does not reach the stream");
  if (paramSeed(7, "layers.0.mixer.q_proj") === paramSeed(7, "layers.0.mixer.k_proj")) {
    throw new Error("names do not reach the stream");
  }
});

Deno.test("initialValues() follows the spec: constants exactly, normals near their standard deviation", () => {
  const specs = parameterSpecs(
    modelConfig({ mixer: "falcon1", dModel: 64, heads: 4, layers: 1, vocabSize: 50 }),
  );
  const byName = new Map(specs.map((s) => [s.name, s]));
  const bias = initialValues(byName.get("layers.0.mixer.lambda_bias")!, 1);
  assertClose("lambda_bias", bias, new Float64Array(4).fill(-4), { rtol: 0, atol: 0 });
  const q = initialValues(byName.get("layers.0.mixer.q_proj")!, 1);
  const rms = Math.sqrt(q.reduce((a, x) => a + x * x, 0) / q.length);
  assertClose("q_proj RMS ~ 1/sqrt(64)", [rms], [1 / 8], { rtol: 0.05, atol: 0 });
  const conv = initialValues(byName.get("layers.0.mixer.q_conv")!, 1);
  if (conv.some((x) => Math.abs(x) > 0.5)) throw new Error("q_conv outside its uniform bound 1/sqrt(4)");
});

Deno.test("createParameters() allocates values and zero gradients with the decay flags of the specs", async () => {
  const be = createRefBackend();
  const specs = parameterSpecs(
    modelConfig({ mixer: "falcon2a", dModel: 8, heads: 2, layers: 1, vocabSize: 5 }),
  );
  const params = createParameters(be, specs, 3);
  for (const [i, p] of params.entries()) {
    if (p.name !== specs[i].name || p.decay !== specs[i].decay) {
      throw new Error(`param ${i} does not match its spec`);
    }
    if ((await be.read(p.grad)).some((x) => x !== 0)) throw new Error(`${p.name} gradient is not zero`);
  }
  if (params.find((p) => p.name.endsWith("attn_norm"))!.decay) throw new Error("norms must not decay");
});

Deno.test("modelRuleConfig() passes the model's alignment, window, qkNorm and the coupling switch", () => {
  const c = modelConfig({ mixer: "falcon3", alignment: "same-step", window: 2, qkNorm: "l2" });
  const rc = modelRuleConfig(c, false);
  if (
    rc.rule !== "falcon3" || rc.alignment !== "same-step" || rc.window !== 2 || rc.qkNorm !== "l2" ||
    rc.coupling
  ) {
    throw new Error(`unexpected rule config ${JSON.stringify(rc)}`);
  }
  if (!modelRuleConfig(c, true).coupling) throw new Error("coupling not passed");
});
