/**
 * The chunk-parallel kernel of the WASM backend (assembly/fw_chunk.ts) for every rule (the
 * scalar-coefficient rules, the per-column falcon2/falcon2a, the window rules falcon3/falcon3a), under
 * both alignments: against the float64 reference and against the WASM recurrent form, forward (o, the
 * whole carry, window pairs included) at relative L2 1e-5 and gradients (dq, dk, dv, dbeta,
 * dlambdabar, ds0, dCarryState) at 1e-4. Cases: chunk sizes 1, 5 and 64, odd T not a multiple of C,
 * packed starts mid-chunk (two in a row, one on a chunk boundary), a non-zero S0, a carry, head sizes
 * that are not multiples of 4 (dk != dv), the decay clamp active at every step, and for the window
 * rules windows B = 1, 2, 4 and B > C, and a carry holding fewer than B - 1 pairs.
 */

import { type Backend, type Carry, type FastWeightInputs, gradOf, type Tensor } from "../rules/backend.ts";
import {
  ALIGNMENTS,
  type Form,
  isPerColumnRule,
  isWindowRule,
  type QkNorm,
  type RuleConfig,
  ruleConfig,
  type RuleName,
  RULES,
} from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertRelL2, Rng } from "../testing/compare.ts";
import { createWasmBackend } from "./backend.ts";
import type { WasmFlavour } from "./module.ts";
import { usesChunkKernel } from "./fast_weight.ts";

const FWD = 1e-5;
const BWD = 1e-4;
const CHUNK_RULES: readonly RuleName[] = RULES;
const GRADS = ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const;

interface Case {
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly dk: number;
  readonly dv: number;
  readonly chunkSize: number;
  readonly s0: boolean;
  readonly clamp: boolean;
  readonly starts?: (b: number, t: number) => boolean;
}

interface HostData {
  readonly c: Case;
  readonly perColumn: boolean;
  readonly q: Float64Array;
  readonly k: Float64Array;
  readonly v: Float64Array;
  readonly beta: Float64Array;
  readonly lambdabar: Float64Array;
  readonly s0?: Float64Array;
  readonly starts?: Uint8Array;
  readonly dO: Float64Array;
}

function makeData(config: RuleConfig, c: Case, seed: number): HostData {
  const rng = new Rng(seed);
  const n = c.B * c.T * c.H;
  const nb = isPerColumnRule(config.rule) ? n * c.dv : n;
  const lambdabar = c.clamp ? rng.uniforms(n, 1e3, 1e4) : rng.uniforms(n, 0.01, 0.8);
  const beta = config.rule === "mamba2"
    ? rng.uniforms(n, 0.05, 0.8)
    : config.rule === "deltanet" || config.rule === "gated_deltanet"
    ? rng.uniforms(n, 0.1, 0.9)
    : rng.uniforms(nb, 0.2, 1.8);
  let starts: Uint8Array | undefined;
  if (c.starts) {
    starts = new Uint8Array(c.B * c.T);
    for (let b = 0; b < c.B; b++) for (let t = 0; t < c.T; t++) starts[b * c.T + t] = c.starts(b, t) ? 1 : 0;
  }
  return {
    c,
    perColumn: isPerColumnRule(config.rule),
    q: rng.normals(n * c.dk),
    k: rng.normals(n * c.dk),
    v: rng.normals(n * c.dv),
    beta,
    lambdabar,
    s0: c.s0 ? rng.normals(c.B * c.H * c.dk * c.dv, 0.3) : undefined,
    starts,
    dO: rng.normals(n * c.dv),
  };
}

function upload(be: Backend, d: HostData, carry?: Carry): FastWeightInputs {
  const { B, T, H, dk, dv } = d.c;
  return {
    q: be.fromArray(d.q, [B, T, H, dk]),
    k: be.fromArray(d.k, [B, T, H, dk]),
    v: be.fromArray(d.v, [B, T, H, dv]),
    beta: be.fromArray(d.beta, d.perColumn ? [B, T, H, dv] : [B, T, H]),
    lambdabar: be.fromArray(d.lambdabar, [B, T, H]),
    ...(d.s0 ? { s0: be.fromArray(d.s0, [B, H, dk, dv]) } : {}),
    ...(d.starts ? { starts: d.starts } : {}),
    ...(carry ? { carry } : {}),
  };
}

/** Every compared array of one call, read back to the host, plus the carry to continue from. */
interface Run {
  readonly arrays: Map<string, Float64Array>;
  readonly carry: Carry;
}

async function run(be: Backend, config: RuleConfig, d: HostData, form: Form, carry?: Carry): Promise<Run> {
  const { B, T, H, dv } = d.c;
  const inputs = upload(be, d, carry);
  const options = { form, chunkSize: d.c.chunkSize };
  const out = be.fastWeightForward(config, inputs, options);
  const grads = be.fastWeightBackward(config, inputs, be.fromArray(d.dO, [B, T, H, dv]), options);
  const arrays = new Map<string, Float64Array>();
  const read = async (name: string, t: Tensor) => arrays.set(name, Float64Array.from(await be.read(t)));
  await read("o", out.o);
  await read("carry.state", out.carry.state);
  await read("carry.lastKey", out.carry.lastKey);
  if (isWindowRule(config.rule)) {
    await read("carry.windowX", out.carry.windowX);
    await read("carry.windowY", out.carry.windowY);
    arrays.set("carry.windowCount", Float64Array.from(out.carry.windowCount));
  }
  for (const g of GRADS) await read(g, gradOf(grads, g));
  return { arrays, carry: out.carry };
}

/** `actual` against `expected`, array by array (exact zeros where the expected array is all zero). */
function assertRun(tag: string, actual: Run, expected: Run): void {
  for (const [name, e] of expected.arrays) {
    const a = actual.arrays.get(name)!;
    const bad = a.findIndex((x) => !Number.isFinite(x));
    if (bad >= 0) throw new Error(`${tag} ${name}: non-finite ${a[bad]} at ${bad}`);
    if (e.every((x) => x === 0)) {
      const nz = a.findIndex((x) => x !== 0);
      if (nz >= 0) throw new Error(`${tag} ${name}: expected zeros, got ${a[nz]} at ${nz}`);
    } else {
      assertRelL2(`${tag} ${name}`, a, e, name === "o" || name.startsWith("carry") ? FWD : BWD);
    }
  }
}

/** Copy a carry between backends. */
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

interface Carries {
  readonly chunk: Carry;
  readonly recurrent: Carry;
  readonly ref: Carry;
}

/** Run one case on the three paths and compare; returns the carries of each path. */
async function check(
  wasm: Backend,
  ref: Backend,
  config: RuleConfig,
  d: HostData,
  tag: string,
  from?: Carries,
): Promise<Carries> {
  const chunk = await run(wasm, config, d, "chunk", from?.chunk);
  const recurrent = await run(wasm, config, d, "recurrent", from?.recurrent);
  const oracle = await run(
    ref,
    config,
    d,
    "recurrent",
    from ? await moveCarry(wasm, ref, from.chunk) : undefined,
  );
  assertRun(`${tag} chunk vs reference`, chunk, oracle);
  assertRun(`${tag} chunk vs wasm recurrent`, chunk, recurrent);
  return { chunk: chunk.carry, recurrent: recurrent.carry, ref: oracle.carry };
}

/**
 * Run `body` for every chunked rule and alignment on a fresh pair of backends (`poison`:
 * every WASM allocation starts as NaN, so an uninitialised read shows; `flavour`: the WASM build).
 */
async function everyRule(
  body: (wasm: Backend, ref: Backend, config: RuleConfig, seed: number) => Promise<void>,
  { poison = false, flavour, qkNorm }: { poison?: boolean; flavour?: WasmFlavour; qkNorm?: QkNorm } = {},
) {
  const wasm = await createWasmBackend({ threads: 2, poison, flavour });
  if (flavour && wasm.flavour !== flavour) {
    throw new Error(`expected the ${flavour} build, got ${wasm.flavour}`);
  }
  const ref = createRefBackend();
  try {
    let seed = 1;
    for (const rule of CHUNK_RULES) {
      for (const alignment of ALIGNMENTS) {
        await body(wasm, ref, ruleConfig(rule, { alignment, ...(qkNorm ? { qkNorm } : {}) }), seed++);
      }
    }
  } finally {
    wasm.close();
  }
}

const PACKED: Case = {
  B: 2,
  T: 37,
  H: 2,
  dk: 7,
  dv: 5,
  chunkSize: 5,
  s0: true,
  clamp: false,
  // mid-chunk starts, two in a row, one on a chunk boundary (t = 20)
  starts: (b, t) => (b === 0 ? t === 3 || t === 4 || t === 12 : t === 20 || t === 28),
};

Deno.test("usesChunkKernel() picks the chunked kernel for the chunked forms of every rule", () => {
  const expect = (got: boolean, want: boolean, what: string) => {
    if (got !== want) throw new Error(`${what}: expected ${want}, got ${got}`);
  };
  for (const rule of RULES) {
    const chunked = CHUNK_RULES.includes(rule);
    expect(usesChunkKernel(ruleConfig(rule), "chunk"), chunked, `${rule} chunk`);
    expect(usesChunkKernel(ruleConfig(rule), "parallel"), chunked, `${rule} parallel`);
    expect(usesChunkKernel(ruleConfig(rule), "recurrent"), false, `${rule} recurrent`);
  }
});

/**
 * Run `body` for falcon3 and falcon3a under both alignments with each window size of `windows`, with
 * the default RMS q/k norm and with none (then falcon3a's statistic's gradient reaches the keys:
 * RMS-normalised keys have a constant norm, so it vanishes there).
 */
async function everyWindow(
  windows: readonly number[],
  body: (wasm: Backend, ref: Backend, config: RuleConfig, seed: number) => Promise<void>,
) {
  const wasm = await createWasmBackend({ threads: 2, poison: true });
  const ref = createRefBackend();
  try {
    let seed = 500;
    for (const window of windows) {
      for (const alignment of ALIGNMENTS) {
        for (const qkNorm of ["rms", "none"] as const) {
          for (const rule of ["falcon3", "falcon3a"] as const) {
            await body(wasm, ref, ruleConfig(rule, { alignment, window, qkNorm }), seed++);
          }
        }
      }
    }
  } finally {
    wasm.close();
  }
}

Deno.test("window rules' chunk form matches with windows B = 1, 2, 4 and B > C (window over several chunks), packed starts, S0", async () => {
  await everyWindow([1, 2, 4, 9], async (wasm, ref, config, seed) => {
    const tag = `${config.rule} B=${config.window}/${config.alignment}/${config.qkNorm}`;
    await check(wasm, ref, config, makeData(config, PACKED, seed), `${tag} packed C=5`);
    const one: Case = { ...PACKED, B: 1, T: 13, chunkSize: 1, starts: (_b, t) => t === 6 };
    await check(wasm, ref, config, makeData(config, one, seed + 20), `${tag} C=1`);
    const big: Case = {
      ...PACKED,
      B: 1,
      T: 67,
      H: 1,
      dk: 9,
      dv: 6,
      chunkSize: 64,
      starts: (_b, t) => t === 40,
    };
    await check(wasm, ref, config, makeData(config, big, seed + 40), `${tag} C=64`);
    const clamp: Case = { ...PACKED, B: 1, T: 33, clamp: true };
    await check(wasm, ref, config, makeData(config, clamp, seed + 60), `${tag} clamp`);
  });
});

Deno.test("window rules' chunk form continues from a carry holding fewer than B - 1 pairs, and from a full one", async () => {
  await everyWindow([6], async (wasm, ref, config, seed) => {
    const tag = `${config.rule} B=${config.window}/${config.alignment}/${config.qkNorm}`;
    // 3 positions: the carry holds 2 (prefix) or 3 (current) of the 5 slots
    const first: Case = { B: 2, T: 3, H: 2, dk: 6, dv: 3, chunkSize: 2, s0: true, clamp: false };
    const c1 = await check(wasm, ref, config, makeData(config, first, seed), `${tag} part 1`);
    const counts = Array.from(c1.chunk.windowCount);
    if (counts.some((c) => c <= 0 || c >= config.window - 1)) {
      throw new Error(`${tag}: expected a partly filled carry, got counts ${counts}`);
    }
    // row 0 continues over chunks of 2 (windows reach into the carry), row 1 restarts mid-way
    const second: Case = { ...first, T: 11, starts: (b, t) => b === 1 && t === 7 };
    const c2 = await check(wasm, ref, config, makeData(config, second, seed + 1), `${tag} part 2`, c1);
    const third: Case = { ...first, T: 4, chunkSize: 3 };
    await check(wasm, ref, config, makeData(config, third, seed + 2), `${tag} part 3 (full carry)`, c2);
  });
});

Deno.test("chunk form matches the reference and the recurrent form with packed starts mid-chunk and S0 (C = 5; NaN-poisoned heap)", async () => {
  await everyRule(async (wasm, ref, config, seed) => {
    const tag = `${config.rule}/${config.alignment} packed C=5`;
    await check(wasm, ref, config, makeData(config, PACKED, seed), tag);
  }, { poison: true });
});

Deno.test("chunk form matches without q/k norm (the gradient of each step's key statistic reaches the keys)", async () => {
  await everyRule(async (wasm, ref, config, seed) => {
    const tag = `${config.rule}/${config.alignment} qkNorm none`;
    await check(wasm, ref, config, makeData(config, PACKED, seed + 700), tag);
  }, { qkNorm: "none" });
});

Deno.test("chunk form of the plain-SIMD build (no relaxed madd) matches too (packed starts, S0, C = 5)", async () => {
  await everyRule(async (wasm, ref, config, seed) => {
    const tag = `${config.rule}/${config.alignment} packed C=5 plain SIMD`;
    await check(wasm, ref, config, makeData(config, PACKED, seed + 300), tag);
  }, { flavour: "simd" });
});

Deno.test("chunk form matches with chunk size 1, with C = 64 over T = 67 (not a multiple of C) and with C far above T", async () => {
  await everyRule(async (wasm, ref, config, seed) => {
    const one: Case = { ...PACKED, B: 1, T: 13, chunkSize: 1, starts: (_b, t) => t === 6 };
    await check(wasm, ref, config, makeData(config, one, seed), `${config.rule}/${config.alignment} C=1`);
    const big: Case = {
      ...PACKED,
      B: 1,
      T: 67,
      H: 1,
      dk: 9,
      dv: 6,
      chunkSize: 64,
      starts: (_b, t) => t === 40,
    };
    await check(
      wasm,
      ref,
      config,
      makeData(config, big, seed + 50),
      `${config.rule}/${config.alignment} C=64`,
    );
    // the work area is C x C: a chunk size far above T runs as one chunk of T
    const huge: Case = { ...one, chunkSize: 1_000_000 };
    await check(
      wasm,
      ref,
      config,
      makeData(config, huge, seed + 90),
      `${config.rule}/${config.alignment} C=1e6`,
    );
  });
});

Deno.test("chunk form continues from a carry exactly as the reference does", async () => {
  await everyRule(async (wasm, ref, config, seed) => {
    const tag = `${config.rule}/${config.alignment}`;
    const first: Case = { B: 2, T: 9, H: 2, dk: 6, dv: 3, chunkSize: 5, s0: false, clamp: false };
    const carries = await check(wasm, ref, config, makeData(config, first, seed), `${tag} part 1`);
    // row 0 restarts at once (the carry is cut off), row 1 continues it and restarts mid-chunk
    const second: Case = { ...first, T: 23, s0: true, starts: (b, t) => t === (b === 0 ? 0 : 13) };
    await check(
      wasm,
      ref,
      config,
      makeData(config, second, seed + 50),
      `${tag} part 2 (from carry)`,
      carries,
    );
  });
});

Deno.test("chunk form stays finite and matches with the decay clamp active at every step (huge lambdabar)", async () => {
  await everyRule(async (wasm, ref, config, seed) => {
    const clamp: Case = { ...PACKED, B: 1, T: 33, chunkSize: 5, clamp: true };
    await check(wasm, ref, config, makeData(config, clamp, seed), `${config.rule}/${config.alignment} clamp`);
  });
});

Deno.test("chunk form results are bit-identical on 1 and 2 threads (heads are independent tasks)", async () => {
  const one = await createWasmBackend({ threads: 1 });
  const two = await createWasmBackend({ threads: 2 });
  try {
    const config = ruleConfig("falcon1");
    const data = makeData(config, { ...PACKED, H: 3 }, 7);
    const a = await run(one, config, data, "chunk");
    const b = await run(two, config, data, "chunk");
    for (const [name, x] of a.arrays) {
      const y = b.arrays.get(name)!;
      const bad = x.findIndex((v, i) => !Object.is(v, y[i]));
      if (bad >= 0) {
        throw new Error(`${name} differs at ${bad}: ${x[bad]} (1 thread) vs ${y[bad]} (2 threads)`);
      }
    }
  } finally {
    one.close();
    two.close();
  }
});
