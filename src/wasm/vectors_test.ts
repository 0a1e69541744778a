/**
 * The WASM backend's fast-weight kernels against the float64 test vectors of fixtures/vectors/
 * (an independent implementation): every rule x alignment, forward (o, final state) at relative L2
 * 1e-5 and every gradient at 1e-4, each per-head vector run as a `[1, T, 1, D]` call.
 */

import { type Form, ruleConfig, type RuleName } from "../rules/config.ts";
import { assertRelL2 } from "../testing/compare.ts";
import { createWasmBackend, type WasmBackend } from "./backend.ts";

interface Vector {
  rule: RuleName;
  alignment: "prefix" | "same-step";
  shape: { T: number; d_k: number; d_v: number };
  params: {
    eps_rms: number;
    qk_norm: "rms" | "l2" | "none";
    eps?: number;
    eps_gamma?: number;
    coupling?: boolean;
    B?: number;
    retnet_head?: number;
    mamba_A?: number;
  };
  inputs: Record<string, number[] | number[][] | boolean[]>;
  outputs: { o: number[][]; S_final: number[][] };
  grads: Record<string, number[] | number[][]>;
}

const DIR = new URL("../../fixtures/vectors/", import.meta.url);

function flat(a: number[] | number[][] | boolean[]): number[] {
  return (a as unknown[]).flat().map(Number);
}

async function loadVectors(): Promise<{ file: string; vector: Vector }[]> {
  const index = JSON.parse(await Deno.readTextFile(new URL("index.json", DIR))) as { file: string }[];
  const out = [];
  for (const { file } of index) {
    out.push({ file, vector: JSON.parse(await Deno.readTextFile(new URL(file, DIR))) as Vector });
  }
  return out;
}

/** Run one vector on the backend (in form `form`) and check outputs and gradients. */
async function checkVector(
  be: WasmBackend,
  file: string,
  vec: Vector,
  chunkSize: number,
  form: Form = "recurrent",
) {
  const { T, d_k: dk, d_v: dv } = vec.shape;
  const p = vec.params;
  const config = ruleConfig(vec.rule, {
    alignment: vec.alignment,
    qkNorm: p.qk_norm,
    epsRms: p.eps_rms,
    ...(p.eps !== undefined ? { eps: p.eps } : {}),
    ...(p.eps_gamma !== undefined ? { epsGamma: p.eps_gamma } : {}),
    ...(p.coupling !== undefined ? { coupling: p.coupling } : {}),
    ...(p.B !== undefined ? { window: p.B } : {}),
    ...(p.mamba_A !== undefined ? { mambaA: [p.mamba_A] } : {}),
    ...(p.retnet_head !== undefined ? { retnetHeads: [p.retnet_head] } : {}),
  });
  const perCol = vec.rule === "falcon2" || vec.rule === "falcon2a";
  const I = vec.inputs;
  const inputs = {
    q: be.fromArray(flat(I.q), [1, T, 1, dk]),
    k: be.fromArray(flat(I.k), [1, T, 1, dk]),
    v: be.fromArray(flat(I.v), [1, T, 1, dv]),
    beta: be.fromArray(flat(I.beta), perCol ? [1, T, 1, dv] : [1, T, 1]),
    lambdabar: be.fromArray(flat(I.lambdabar), [1, T, 1]),
    ...(I.S0 ? { s0: be.fromArray(flat(I.S0), [1, 1, dk, dv]) } : {}),
    ...(I.starts ? { starts: Uint8Array.from(flat(I.starts)) } : {}),
  };
  const { o, carry } = be.fastWeightForward(config, inputs, { form, chunkSize });
  const tag = `${file} (${form}, chunk ${chunkSize})`;
  assertRelL2(`${tag} o`, await be.read(o), flat(vec.outputs.o), 1e-5);
  assertRelL2(`${tag} S_final`, await be.read(carry.state), flat(vec.outputs.S_final), 1e-5);
  const dO = be.fromArray(flat(I.G), [1, T, 1, dv]);
  const g = be.fastWeightBackward(config, inputs, dO, { form, chunkSize });
  const pairs: [string, typeof g.dq][] = [
    ["q", g.dq],
    ["k", g.dk],
    ["v", g.dv],
    ["beta", g.dbeta],
    ["lambdabar", g.dlambdabar],
    ["S0", g.ds0],
  ];
  for (const [name, t] of pairs) {
    const expected = flat(vec.grads[name]);
    const actual = await be.read(t);
    if (expected.every((x) => x === 0)) {
      if (actual.some((x) => x !== 0)) throw new Error(`${tag} d${name}: expected all zeros`);
    } else {
      assertRelL2(`${tag} d${name}`, actual, expected, 1e-4);
    }
  }
}

Deno.test("fastWeightForward/Backward match the float64 vectors for every rule and alignment", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const vectors = await loadVectors();
    if (vectors.length < 22) throw new Error(`expected 22 vectors, found ${vectors.length}`);
    for (const { file, vector } of vectors) await checkVector(be, file, vector, 64);
  } finally {
    be.close();
  }
});

Deno.test("the chunk form matches the float64 vectors too (every rule and alignment; chunk 64, 5, 1)", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    for (const { file, vector } of await loadVectors()) {
      for (const chunk of [64, 5, 1]) await checkVector(be, file, vector, chunk, "chunk");
    }
  } finally {
    be.close();
  }
});

Deno.test("the backward's checkpoint interval does not change the gradients (chunk 5, 1)", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    for (const { file, vector } of await loadVectors()) {
      await checkVector(be, file, vector, 5);
      if (vector.rule === "falcon3") await checkVector(be, file, vector, 1);
    }
  } finally {
    be.close();
  }
});

Deno.test("with every allocation poisoned with NaN the vectors still match (no uninitialised reads)", async () => {
  const be = await createWasmBackend({ threads: 2, poison: true });
  try {
    for (const { file, vector } of await loadVectors()) await checkVector(be, file, vector, 7);
  } finally {
    be.close();
  }
});

Deno.test("the plain-SIMD build matches the float64 vectors too (every rule and alignment, 2 threads)", async () => {
  const be = await createWasmBackend({ threads: 2, flavour: "simd" });
  try {
    if (be.flavour !== "simd") throw new Error(`expected the plain build, got ${be.flavour}`);
    for (const { file, vector } of await loadVectors()) await checkVector(be, file, vector, 16);
  } finally {
    be.close();
  }
});
