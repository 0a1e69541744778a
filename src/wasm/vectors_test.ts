/**
 * The WASM backend's fast-weight kernels against the float64 test vectors of fixtures/vectors/
 * (an independent implementation): every rule x alignment, forward (o, final state) at relative L2
 * 1e-5 and every gradient at 1e-4, each per-head vector run as a `[1, T, 1, D]` call.
 */

import type { Form } from "../rules/config.ts";
import { assertMatchesVector, fixtureVectors } from "../testing/vector_fixtures.ts";
import type { VectorCase } from "../vectors/load.ts";
import { createWasmBackend, type WasmBackend } from "./backend.ts";

/** Run one vector on the backend (in form `form`) and check outputs and gradients. */
async function checkVector(
  be: WasmBackend,
  vec: VectorCase,
  chunkSize: number,
  form: Form = "recurrent",
) {
  await assertMatchesVector(be, vec, { form, chunkSize }, `${form}, chunk ${chunkSize}`);
}

Deno.test("fastWeightForward/Backward match the float64 vectors for every rule and alignment", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const vectors = fixtureVectors(); // a catalog rule without its files fails here, naming the rule
    if (vectors.length < 22) throw new Error(`expected 22 vectors, found ${vectors.length}`);
    for (const vector of vectors) await checkVector(be, vector, 64);
  } finally {
    be.close();
  }
});

Deno.test("the chunk form matches the float64 vectors too (every rule and alignment; chunk 64, 5, 1)", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    for (const vector of fixtureVectors()) {
      for (const chunk of [64, 5, 1]) await checkVector(be, vector, chunk, "chunk");
    }
  } finally {
    be.close();
  }
});

Deno.test("the backward's checkpoint interval does not change the gradients (chunk 5, 1)", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    for (const vector of fixtureVectors()) {
      await checkVector(be, vector, 5);
      if (vector.rule === "falcon3") await checkVector(be, vector, 1);
    }
  } finally {
    be.close();
  }
});

Deno.test("with every allocation poisoned with NaN the vectors still match (no uninitialised reads)", async () => {
  const be = await createWasmBackend({ threads: 2, poison: true });
  try {
    for (const vector of fixtureVectors()) await checkVector(be, vector, 7);
  } finally {
    be.close();
  }
});

Deno.test("the plain-SIMD build matches the float64 vectors too (every rule and alignment, 2 threads)", async () => {
  const be = await createWasmBackend({ threads: 2, flavour: "simd" });
  try {
    if (be.flavour !== "simd") throw new Error(`expected the plain build, got ${be.flavour}`);
    for (const vector of fixtureVectors()) await checkVector(be, vector, 16);
  } finally {
    be.close();
  }
});
