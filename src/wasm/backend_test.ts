/**
 * Tests of the WASM backend as a whole: storage ops, the thread pool (results do not depend on the
 * number of threads), every form accepted, errors that name the offending thing, close(), and a backward
 * without dS0 (`s0Grad: false`).
 */

import { FORMS, ruleConfig, RULES } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertRelL2, Rng } from "../testing/compare.ts";
import { assertS0GradOptOut } from "../testing/s0_grad.ts";
import { createWasmBackend } from "./backend.ts";

function equalArrays(name: string, a: ArrayLike<number>, b: ArrayLike<number>) {
  if (a.length !== b.length) throw new Error(`${name}: length ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) throw new Error(`${name}: differs at ${i}: ${a[i]} vs ${b[i]}`);
  }
}

Deno.test("zeros, fromArray, read, copy and dispose round-trip float32 data", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const a = be.fromArray([1.5, -2, 3.25], [3]);
    const z = be.zeros([3]);
    equalArrays("zeros", await be.read(z), [0, 0, 0]);
    be.copy(z, a);
    equalArrays("copy", await be.read(z), [1.5, -2, 3.25]);
    be.dispose(a);
    let threw = false;
    try {
      await be.read(a);
    } catch (e) {
      threw = e instanceof TypeError && /disposed/.test(String(e));
    }
    if (!threw) throw new Error("reading a disposed tensor did not throw a TypeError");
    const foreign = createRefBackend().zeros([3]);
    threw = false;
    try {
      be.copy(z, foreign);
    } catch (e) {
      threw = e instanceof TypeError && /another backend/.test(String(e));
    }
    if (!threw) throw new Error("a reference tensor was accepted");
  } finally {
    be.close();
  }
});

Deno.test("fast-weight results are bit-identical on 1 and 2 threads and for both chunked forms, and the chunked kernel matches the recurrent one", async () => {
  const one = await createWasmBackend({ threads: 1 });
  const two = await createWasmBackend({ threads: 2 });
  try {
    const [B, T, H, dk, dv] = [2, 19, 3, 8, 6];
    const rng = new Rng(5);
    const data = {
      q: rng.normals(B * T * H * dk),
      k: rng.normals(B * T * H * dk),
      v: rng.normals(B * T * H * dv),
      beta: rng.uniforms(B * T * H, 0.2, 1.8),
      lambdabar: rng.uniforms(B * T * H, 0, 1),
      dO: rng.normals(B * T * H * dv),
    };
    const config = ruleConfig("falcon3");
    const results = [];
    for (
      const [be, form] of [
        [one, "recurrent"],
        [two, "recurrent"],
        [one, "chunk"],
        [two, "chunk"],
        [two, "parallel"],
      ] as const
    ) {
      const inputs = {
        q: be.fromArray(data.q, [B, T, H, dk]),
        k: be.fromArray(data.k, [B, T, H, dk]),
        v: be.fromArray(data.v, [B, T, H, dv]),
        beta: be.fromArray(data.beta, [B, T, H]),
        lambdabar: be.fromArray(data.lambdabar, [B, T, H]),
      };
      const { o } = be.fastWeightForward(config, inputs, { form });
      const g = be.fastWeightBackward(config, inputs, be.fromArray(data.dO, [B, T, H, dv]), { form });
      results.push([await be.read(o), await be.read(g.dk), await be.read(g.dbeta)]);
    }
    // recurrent on 1 and 2 threads; the chunked kernel on 1 and 2 threads, under both of its forms
    for (const [r, base] of [[1, 0], [3, 2], [4, 2]]) {
      for (let i = 0; i < 3; i++) equalArrays(`result ${r} array ${i}`, results[r][i], results[base][i]);
    }
    for (let i = 0; i < 3; i++) {
      assertRelL2(`chunk vs recurrent array ${i}`, results[2][i], results[0][i], i === 0 ? 1e-5 : 1e-4);
    }
  } finally {
    one.close();
    two.close();
  }
});

Deno.test("fastWeightForward names a wrong shape and an unknown form", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const inputs = {
      q: be.zeros([1, 4, 1, 3]),
      k: be.zeros([1, 4, 1, 3]),
      v: be.zeros([1, 4, 1, 2]),
      beta: be.zeros([1, 4, 1, 2]),
      lambdabar: be.zeros([1, 4, 1]),
    };
    let msg = "";
    try {
      be.fastWeightForward(ruleConfig("falcon1"), inputs);
    } catch (e) {
      msg = String(e);
    }
    if (!/beta has shape \[1,4,1,2\]/.test(msg)) throw new Error(`unexpected error: ${msg}`);
    msg = "";
    try {
      // deno-lint-ignore no-explicit-any
      be.fastWeightForward(ruleConfig("falcon2"), inputs, { form: "bogus" as any });
    } catch (e) {
      msg = String(e);
    }
    if (!/unknown form "bogus"/.test(msg)) throw new Error(`unexpected error: ${msg}`);
  } finally {
    be.close();
  }
});

Deno.test("after close() the backend refuses work", async () => {
  const be = await createWasmBackend({ threads: 2 });
  be.close();
  let msg = "";
  try {
    be.matmul(be.zeros([64, 64]), be.zeros([64, 64]), be.zeros([64, 64]));
  } catch (e) {
    msg = String(e);
  }
  if (!/closed/.test(msg)) throw new Error(`expected a closed-backend error, got "${msg}"`);
});

Deno.test("a backward leaves earlier outputs untouched and fresh worker instances stay correct (every rule, 2 threads, 4 backends)", async () => {
  const [B, T, H, dk, dv] = [2, 37, 3, 7, 5];
  const starts = new Uint8Array(B * T);
  starts[11] = starts[12] = starts[T + 30] = 1;
  for (let rep = 0; rep < 4; rep++) {
    const be = await createWasmBackend({ threads: 2, poison: true });
    try {
      let seed = 1;
      for (const rule of ["falcon1", "falcon2", "falcon3", "mamba2", "gated_deltanet"] as const) {
        const rng = new Rng(seed++);
        const n = B * T * H;
        const bw = rule === "falcon2" ? dv : 1;
        const config = ruleConfig(rule, { window: 3 });
        const inputs = {
          q: be.fromArray(rng.normals(n * dk), [B, T, H, dk]),
          k: be.fromArray(rng.normals(n * dk), [B, T, H, dk]),
          v: be.fromArray(rng.normals(n * dv), [B, T, H, dv]),
          beta: be.fromArray(rng.uniforms(n * bw, 0.05, 0.8), bw === 1 ? [B, T, H] : [B, T, H, dv]),
          lambdabar: be.fromArray(rng.uniforms(n, 0, 1), [B, T, H]),
          starts,
        };
        const { o } = be.fastWeightForward(config, inputs);
        const before = await be.read(o);
        if (!before.every(Number.isFinite)) throw new Error(`rep ${rep} ${rule}: o is not finite`);
        const g = be.fastWeightBackward(config, inputs, be.fromArray(rng.normals(n * dv), [B, T, H, dv]), {
          chunkSize: 8,
        });
        equalArrays(`rep ${rep} ${rule}: o after the backward`, await be.read(o), before);
        for (const [name, t] of Object.entries(g)) {
          if (!(await be.read(t)).every(Number.isFinite)) {
            throw new Error(`rep ${rep} ${rule}: ${name} not finite`);
          }
        }
      }
    } finally {
      be.close();
    }
  }
});

Deno.test("a backward without dS0 returns no ds0 and every other gradient identical (every rule and form)", async () => {
  const be = await createWasmBackend({ threads: 2, poison: true });
  try {
    for (const rule of RULES) {
      for (const form of FORMS) await assertS0GradOptOut(be, ruleConfig(rule), { form, chunkSize: 3 });
    }
  } finally {
    be.close();
  }
});
