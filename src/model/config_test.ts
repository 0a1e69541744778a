import { assertClose } from "../testing/compare.ts";
import { modelConfig } from "./config.ts";
import { coefficientPlan } from "./coefficients.ts";
import { parameterCount, parameterSpecs } from "./params.ts";

function expectRangeError(f: () => unknown, pattern: RegExp): void {
  try {
    f();
  } catch (e) {
    if (e instanceof RangeError && pattern.test(e.message)) return;
    throw new Error(`threw ${e}, expected a RangeError matching ${pattern}`);
  }
  throw new Error(`did not throw (expected ${pattern})`);
}

Deno.test("modelConfig() fills SPEC defaults and picks l2 q/k norm for the DeltaNets", () => {
  const c = modelConfig();
  const expected = {
    mixer: "falcon1",
    alignment: "prefix",
    qkNorm: "rms",
    betaMax: 2,
    window: 4,
    chunkSize: 64,
    tieEmbeddings: true,
    shortConv: true,
    outputGate: true,
    parameterisation: "token",
    ffnHidden: 344,
  };
  for (const [key, value] of Object.entries(expected)) {
    if (c[key as keyof typeof c] !== value) {
      throw new Error(`${key} is ${c[key as keyof typeof c]}, expected ${value}`);
    }
  }
  if (modelConfig({ mixer: "gated_deltanet" }).qkNorm !== "l2") {
    throw new Error("gated_deltanet should default to l2");
  }
  if (modelConfig({ mixer: "deltanet", qkNorm: "rms" }).qkNorm !== "rms") throw new Error("override ignored");
});

Deno.test("modelConfig() rejects invalid fields with messages that name them", () => {
  expectRangeError(() => modelConfig({ dModel: 10, heads: 4 }), /dModel 10 is not divisible by heads 4/);
  expectRangeError(() => modelConfig({ layers: 0 }), /layers must be an integer >= 1, got 0/);
  expectRangeError(() => modelConfig({ mixer: "gpt" as "linear" }), /unknown mixer "gpt"/);
  expectRangeError(() => modelConfig({ mixer: "transformer", dModel: 6, heads: 2 }), /even head size/);
  expectRangeError(
    () => modelConfig({ mixer: "transformer", qkNorm: "l2" }),
    /the transformer takes qkNorm "rms" or "none", got "l2"/,
  );
  expectRangeError(() => modelConfig({ betaMax: 0 }), /betaMax/);
});

Deno.test("parameterSpecs() names every parameter stably and omits slots a rule does not use", () => {
  const names = (mixer: "falcon2" | "linear" | "mamba2" | "transformer", extra = {}) =>
    parameterSpecs(modelConfig({ mixer, dModel: 8, heads: 2, layers: 1, vocabSize: 5, ...extra })).map((s) =>
      `${s.name}:${s.shape.join("x")}`
    );
  const f2 = names("falcon2");
  for (
    const n of [
      "embed:5x8",
      "layers.0.attn_norm:8",
      "layers.0.mixer.q_proj:8x8",
      "layers.0.mixer.q_conv:8x4",
      "layers.0.mixer.beta_proj:8x8",
      "layers.0.mixer.lambda_proj:8x2",
      "layers.0.mixer.lambda_bias:2",
      "layers.0.mixer.o_norm:4",
      "layers.0.mixer.gate_proj:8x8",
      "layers.0.mixer.out_proj:8x8",
      "layers.0.mlp.down_proj:24x8",
      "final_norm:8",
    ]
  ) {
    if (!f2.includes(n)) throw new Error(`falcon2 lacks ${n}: ${f2}`);
  }
  if (names("linear").some((n) => n.includes("beta") || n.includes("lambda"))) {
    throw new Error("linear has beta/lambda");
  }
  const m2 = names("mamba2", { parameterisation: "const" });
  if (!m2.includes("layers.0.mixer.beta_const:2") || m2.some((n) => n.includes("lambda"))) {
    throw new Error(`mamba2 const: ${m2}`);
  }
  const tr = names("transformer", { tieEmbeddings: false });
  if (
    !["q", "k", "v"].every((p) => tr.includes(`layers.0.mixer.${p}_conv:8x4`)) ||
    tr.some((n) => n.includes("o_norm") || n.startsWith("layers.0.mixer.gate_proj")) ||
    !tr.includes("lm_head:8x5")
  ) {
    throw new Error(`transformer: ${tr}`);
  }
  const plain = names("transformer", { shortConv: false, qkNorm: "none" });
  if (plain.some((n) => n.includes("conv")) || !plain.includes("layers.0.mixer.out_proj:8x8")) {
    throw new Error(`plain transformer: ${plain}`);
  }
});

Deno.test("parameterCount() adds up the parameter shapes", () => {
  const c = modelConfig({ mixer: "falcon1", dModel: 8, heads: 2, layers: 1, vocabSize: 5, ffnHidden: 24 });
  // embed 40; attn_norm 8; q,k,v 192; convs 96; beta 16; lambda 16+2; o_norm 4; gate 64; out 64;
  // mlp_norm 8; mlp 3*192; final_norm 8
  const expected = 40 + 8 + 192 + 96 + 16 + 18 + 4 + 64 + 64 + 8 + 576 + 8;
  assertClose("count", [parameterCount(c)], [expected], { rtol: 0, atol: 0 });
});

Deno.test("coefficientPlan() follows SPEC 6/7: betaMax*sigmoid for Falcon, softplus dt, sigmoid b", () => {
  const f2 = coefficientPlan("falcon2", 2);
  if (f2.beta?.activation !== "sigmoid" || f2.beta.scale !== 2 || !f2.beta.perColumn) {
    throw new Error("falcon2 beta");
  }
  if (f2.lambda?.activation !== "softplus") throw new Error("falcon2 lambda");
  const m = coefficientPlan("mamba2", 2);
  if (m.beta?.activation !== "softplus" || m.beta.scale !== 1 || m.lambda !== null) throw new Error("mamba2");
  const d = coefficientPlan("deltanet", 2);
  if (d.beta?.activation !== "sigmoid" || d.beta.scale !== 1 || d.lambda !== null) {
    throw new Error("deltanet");
  }
  if (coefficientPlan("gated_deltanet", 2).lambda?.activation !== "softplus") {
    throw new Error("gated_deltanet");
  }
  const r = coefficientPlan("retnet", 2);
  if (r.beta !== null || r.lambda !== null) throw new Error("retnet");
});
