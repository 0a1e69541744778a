/**
 * The WASM backend against the float64 reference backend (createRefBackend) on batched multi-head
 * calls that stress the edges: odd T, head sizes that are not multiples of 4, packed sequence starts
 * (including two starts in a row), a given S0, continuation from a carry, and the decay clamp active
 * at every step. Forward at relative L2 1e-5 (o and the whole carry), gradients at 1e-4.
 */

import { type Backend, type Carry, type FastWeightInputs, gradOf, type Tensor } from "../rules/backend.ts";
import { isPerColumnRule, type RuleConfig, ruleConfig, RULES } from "../rules/config.ts";
import { ALIGNMENTS } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertRelL2, Rng } from "../testing/compare.ts";
import { createWasmBackend, type WasmBackend } from "./backend.ts";

const FWD = 1e-5;
const BWD = 1e-4;

interface HostInputs {
  shape: { B: number; T: number; H: number; dk: number; dv: number };
  q: Float64Array;
  k: Float64Array;
  v: Float64Array;
  beta: Float64Array;
  lambdabar: Float64Array;
  s0?: Float64Array;
  starts?: Uint8Array;
  dO: Float64Array;
}

interface Case {
  B: number;
  T: number;
  H: number;
  dk: number;
  dv: number;
  clamp: boolean;
  starts?: (b: number, t: number) => boolean;
  s0: boolean;
}

function makeInputs(config: RuleConfig, c: Case, seed: number): HostInputs {
  const rng = new Rng(seed);
  const { B, T, H, dk, dv } = c;
  const n = B * T * H;
  const bw = isPerColumnRule(config.rule) ? dv : 1;
  let beta: Float64Array;
  let lambdabar: Float64Array;
  if (c.clamp) {
    beta = rng.uniforms(n * bw, 1.5, 1.95);
    lambdabar = rng.uniforms(n, 20, 60);
  } else if (config.rule === "mamba2") {
    beta = rng.uniforms(n * bw, 0.05, 0.8);
    lambdabar = rng.uniforms(n, 0, 1);
  } else if (config.rule === "deltanet" || config.rule === "gated_deltanet") {
    beta = rng.uniforms(n * bw, 0.1, 0.9);
    lambdabar = rng.uniforms(n, 0.01, 0.5);
  } else {
    beta = rng.uniforms(n * bw, 0.2, 1.8);
    lambdabar = rng.uniforms(n, 0, 0.5);
  }
  const starts = c.starts ? new Uint8Array(B * T) : undefined;
  if (starts) {
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) {
        starts[b * T + t] = c.starts!(b, t) ? 1 : 0;
      }
    }
  }
  return {
    shape: { B, T, H, dk, dv },
    q: rng.normals(n * dk),
    k: rng.normals(n * dk),
    v: rng.normals(n * dv),
    beta,
    lambdabar,
    s0: c.s0 ? rng.normals(B * H * dk * dv, 0.3) : undefined,
    starts,
    dO: rng.normals(n * dv),
  };
}

function toBackend(be: Backend, config: RuleConfig, h: HostInputs, carry?: Carry): FastWeightInputs {
  const { B, T, H, dk, dv } = h.shape;
  return {
    q: be.fromArray(h.q, [B, T, H, dk]),
    k: be.fromArray(h.k, [B, T, H, dk]),
    v: be.fromArray(h.v, [B, T, H, dv]),
    beta: be.fromArray(h.beta, isPerColumnRule(config.rule) ? [B, T, H, dv] : [B, T, H]),
    lambdabar: be.fromArray(h.lambdabar, [B, T, H]),
    ...(h.s0 ? { s0: be.fromArray(h.s0, [B, H, dk, dv]) } : {}),
    ...(h.starts ? { starts: h.starts } : {}),
    ...(carry ? { carry } : {}),
  };
}

/** Copy a carry of one backend into another. */
async function moveCarry(from: Backend, to: Backend, c: Carry): Promise<Carry> {
  const t = async (x: Tensor) => to.fromArray(await from.read(x), x.shape);
  return {
    state: await t(c.state),
    lastKey: await t(c.lastKey),
    windowX: await t(c.windowX),
    windowY: await t(c.windowY),
    windowCount: Int32Array.from(c.windowCount),
  };
}

async function compareCall(
  wasm: WasmBackend,
  ref: Backend,
  config: RuleConfig,
  h: HostInputs,
  tag: string,
  carries?: { wasm: Carry; ref: Carry },
): Promise<{ wasm: Carry; ref: Carry }> {
  const { B, T, H, dv } = h.shape;
  const wi = toBackend(wasm, config, h, carries?.wasm);
  const ri = toBackend(ref, config, h, carries?.ref);
  const wo = wasm.fastWeightForward(config, wi, { form: "recurrent", chunkSize: 8 });
  const ro = ref.fastWeightForward(config, ri, { form: "recurrent" });
  assertRelL2(`${tag} o`, await wasm.read(wo.o), await ref.read(ro.o), FWD);
  assertRelL2(`${tag} carry.state`, await wasm.read(wo.carry.state), await ref.read(ro.carry.state), FWD);
  assertRelL2(
    `${tag} carry.lastKey`,
    await wasm.read(wo.carry.lastKey),
    await ref.read(ro.carry.lastKey),
    FWD,
  );
  if (config.rule === "falcon3" || config.rule === "falcon3a") {
    if (String(wo.carry.windowCount) !== String(ro.carry.windowCount)) {
      throw new Error(`${tag} windowCount ${wo.carry.windowCount} != ${ro.carry.windowCount}`);
    }
    const wx = await ref.read(ro.carry.windowX);
    if (wx.some((x) => x !== 0)) assertRelL2(`${tag} windowX`, await wasm.read(wo.carry.windowX), wx, FWD);
    const wy = await ref.read(ro.carry.windowY);
    if (wy.some((x) => x !== 0)) assertRelL2(`${tag} windowY`, await wasm.read(wo.carry.windowY), wy, FWD);
  }
  const wg = wasm.fastWeightBackward(config, wi, wasm.fromArray(h.dO, [B, T, H, dv]), { chunkSize: 8 });
  const rg = ref.fastWeightBackward(config, ri, ref.fromArray(h.dO, [B, T, H, dv]), { form: "recurrent" });
  for (const name of ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const) {
    const expected = await ref.read(gradOf(rg, name));
    const actual = await wasm.read(gradOf(wg, name));
    if (expected.every((x) => x === 0)) {
      const bad = actual.findIndex((x) => x !== 0);
      if (bad >= 0) throw new Error(`${tag} ${name}: expected zeros, got ${actual[bad]} at ${bad}`);
    } else {
      assertRelL2(`${tag} ${name}`, actual, expected, BWD);
    }
  }
  return { wasm: wo.carry, ref: ro.carry };
}

const PACKED: Case = {
  B: 2,
  T: 37,
  H: 3,
  dk: 7,
  dv: 5,
  clamp: false,
  s0: true,
  starts: (b, t) => (b === 0 ? t === 11 || t === 12 || t === 20 : t === 30 || t === 31),
};

Deno.test("fastWeight matches the reference with packed starts, S0, odd T and head sizes (every rule; NaN-poisoned heap)", async () => {
  const wasm = await createWasmBackend({ threads: 2, poison: true });
  const ref = createRefBackend();
  try {
    let seed = 1;
    for (const rule of RULES) {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment, window: 3 });
        await compareCall(
          wasm,
          ref,
          config,
          makeInputs(config, PACKED, seed++),
          `${rule}/${alignment} packed`,
        );
      }
    }
  } finally {
    wasm.close();
  }
});

Deno.test("fastWeight matches the reference with the clamp active at every step (Falcon rules)", async () => {
  const wasm = await createWasmBackend({ threads: 2 });
  const ref = createRefBackend();
  try {
    let seed = 100;
    for (const rule of RULES.filter((r) => r.startsWith("falcon"))) {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment });
        const c: Case = { ...PACKED, clamp: true, T: 29 };
        await compareCall(wasm, ref, config, makeInputs(config, c, seed++), `${rule}/${alignment} clamp`);
      }
    }
  } finally {
    wasm.close();
  }
});

Deno.test("fastWeight continues from a carry exactly as the reference does (every rule)", async () => {
  const wasm = await createWasmBackend({ threads: 2 });
  const ref = createRefBackend();
  try {
    let seed = 200;
    for (const rule of RULES) {
      for (const alignment of ALIGNMENTS) {
        // window 5: with T1 = 3 the carried window is only partly full
        const config = ruleConfig(rule, { alignment, window: 5 });
        const first: Case = { B: 2, T: 3, H: 2, dk: 6, dv: 3, clamp: false, s0: false };
        const second: Case = { ...first, T: 13, starts: (b, t) => b === 1 && t === 6 };
        const tag = `${rule}/${alignment}`;
        const carries = await compareCall(
          wasm,
          ref,
          config,
          makeInputs(config, first, seed++),
          `${tag} part 1`,
        );
        const moved = { wasm: carries.wasm, ref: await moveCarry(wasm, ref, carries.wasm) };
        await compareCall(wasm, ref, config, makeInputs(config, second, seed++), `${tag} part 2`, moved);
      }
    }
  } finally {
    wasm.close();
  }
});
