import { assertEquals, assertThrows } from "../../src/eval/_assert.ts";
import { runFingerprint } from "./one_run.ts";
import {
  describeVariant,
  FULL_VARIANTS,
  makePlan,
  runName,
  TRANSFORMER,
  TRANSFORMER_PLAIN,
  variantName,
  windowVariant,
} from "./plan.ts";

Deno.test("makePlan('full') trains 14 variants x 3 seeds of one size on 32 digits and evaluates 1..48", () => {
  const plan = makePlan("full");
  assertEquals(plan.variants.length, 14);
  assertEquals(plan.seeds, [0, 1, 2]);
  assertEquals(plan.maxDigits, 32);
  assertEquals(plan.lengths, Array.from({ length: 48 }, (_, i) => i + 1));
  // the budget's size: the lab model on rows long enough for a 32-digit sample
  assertEquals([plan.model.dModel, plan.model.layers, plan.train.steps, plan.train.seqLen], [
    64,
    2,
    800,
    128,
  ]);
  const paper = makePlan("paper");
  assertEquals([paper.model.dModel, paper.train.steps, paper.maxDigits, paper.lengths.length], [
    256,
    20000,
    32,
    48,
  ]);
  const names = FULL_VARIANTS.map((v) => runName(v, 0));
  assertEquals(new Set(names).size, 14);
  for (const rule of ["falcon1", "falcon1a", "falcon3a", "falcon3"]) {
    assertEquals(names.includes(`${rule}-prefix-s0`) && names.includes(`${rule}-same-step-s0`), true);
  }
  for (const rule of ["deltanet", "gated_deltanet", "mamba2", "retnet", "linear"]) {
    assertEquals(names.includes(`${rule}-same-step-s0`), true);
  }
  assertEquals(names.includes("transformer-s0"), true);
});

Deno.test("makePlan() applies --steps/--seeds/--samples, caps warmup at a tenth of the steps, rejects 0", () => {
  const plan = makePlan("full", { steps: 100, seeds: 2, samples: 5 });
  assertEquals([plan.train.steps, plan.train.warmupSteps, plan.seeds.length, plan.samples], [100, 10, 2, 5]);
  const smoke = makePlan("smoke");
  assertEquals(smoke.variants.map((v) => runName(v, 0)), ["falcon1a-prefix-s0", "transformer-s0"]);
  assertEquals([smoke.seeds.length, smoke.model.dModel, smoke.maxDigits], [1, 32, 3]);
  assertThrows(() => makePlan("full", { seeds: 0 }), RangeError, "--seeds must be an integer >= 1, got 0");
});

Deno.test("the plans' Transformer runs with short conv and QK RMS-norm; the plain one is a variant away", () => {
  for (const name of ["full", "lab", "smoke"] as const) {
    const transformers = makePlan(name).variants.filter((v) => v.mixer === "transformer");
    assertEquals(transformers, [TRANSFORMER]);
  }
  assertEquals(TRANSFORMER.model, { shortConv: true, qkNorm: "rms" });
  assertEquals(TRANSFORMER_PLAIN.model, { shortConv: false, qkNorm: "none" });
  assertEquals([runName(TRANSFORMER, 1), runName(TRANSFORMER_PLAIN, 0)], [
    "transformer-s1",
    "transformer-plain-s0",
  ]);
  assertEquals(variantName({ mixer: "falcon3", alignment: "same-step" }), "falcon3-same-step");
  assertEquals(
    describeVariant(TRANSFORMER),
    "transformer: RoPE softmax attention with the short convolution (width 4, SiLU) on q, k, v and QK RMS-norm " +
      "(shortConv true, qkNorm rms)",
  );
  assertEquals(
    describeVariant(TRANSFORMER_PLAIN),
    "transformer-plain: RoPE softmax attention with no short convolution and no QK norm (the plain Transformer) " +
      "(shortConv false, qkNorm none)",
  );
  assertEquals(describeVariant(FULL_VARIANTS[0]), null);
  // a stored result of one Transformer is never reused for the other
  const plan = makePlan("lab");
  assertEquals(runFingerprint(plan, TRANSFORMER, 0) === runFingerprint(plan, TRANSFORMER_PLAIN, 0), false);
});

Deno.test("every plan trains on the default addition format until a plan sets one", () => {
  for (const name of ["full", "paper", "lab", "smoke"] as const) assertEquals(makePlan(name).task, {});
});

Deno.test("the gpu plan runs Falcon-3A at a window of 2 (named for it), every other variant as the full list", () => {
  const gpu = makePlan("gpu");
  const names = gpu.variants.map((v) => variantName(v));
  assertEquals(names.filter((n) => n.startsWith("falcon3a")), [
    "falcon3a-prefix-w2",
    "falcon3a-same-step-w2",
  ]);
  for (const v of gpu.variants) {
    if (v.mixer === "falcon3a") assertEquals(v.model, { window: 2 });
    else assertEquals(FULL_VARIANTS.includes(v), true);
  }
  assertEquals(gpu.variants.length, FULL_VARIANTS.length);
  // the probe of variant_probe.ts --window 2 is the same variant: its stored result is the plan run's
  const base = FULL_VARIANTS.find((v) => v.mixer === "falcon3a" && v.alignment === "prefix")!;
  assertEquals(
    runFingerprint(gpu, windowVariant(base, 2), 0),
    runFingerprint(gpu, gpu.variants.find((v) => v.name === "falcon3a-prefix-w2")!, 0),
  );
});
