/**
 * The parity suite, written once and run on every fast backend: each kernel of the backend
 * against the float64 reference at the SPEC section 4 tolerances (relative L2 per array: 1e-5
 * forward, 1e-4 gradients), over odd `T`, head sizes that are not multiples of 4, chunk
 * boundaries, packed sequences, carries and the clamp active at every step.
 *
 * @module
 */

import { type Backend, type FastWeightInputs, gradOf, type Tensor } from "../rules/backend.ts";
import {
  type Alignment,
  type Form,
  isPerColumnRule,
  ruleConfig,
  type RuleName,
  RULES,
} from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { relativeL2, Rng } from "./compare.ts";
import { type TestLevel, testLevelFromEnv } from "./level.ts";
import { SMALL_CHUNK, SMALL_HEADS } from "./shapes.ts";

/** One fast-weight parity case. */
export interface FastWeightCase {
  /** Rule. */
  readonly rule: RuleName;
  /** Alignment. */
  readonly alignment: Alignment;
  /** Form the fast backend runs (the reference always runs the recurrent oracle). */
  readonly form: Form;
  /** Chunk size of the chunked form. */
  readonly chunkSize: number;
  /** Batch rows. */
  readonly B: number;
  /** Positions. */
  readonly T: number;
  /** Heads. */
  readonly H: number;
  /** Key size. */
  readonly dk: number;
  /** Value size. */
  readonly dv: number;
  /** Pack a second sequence into each row (a start flag mid-row). */
  readonly packed: boolean;
  /** Non-zero S0. */
  readonly s0: boolean;
  /** Run the first half, then continue from its carry (checks carry and continuation). */
  readonly split: boolean;
  /** Huge lambdabar so the positive-decay clamp binds at every step. */
  readonly clampEveryStep: boolean;
  /** Data seed. */
  readonly seed: number;
}

/** Tolerances of a float32 backend against the float64 reference (SPEC section 4). */
export const PARITY_TOLERANCE = { forward: 1e-5, backward: 1e-4 } as const;

/**
 * The cases of the suite, three per rule, alignment and form (packed starts with S0, a split call with
 * a carry, the clamp at every step). `small` keeps shapes tiny: varied head and chunk sizes (chunk
 * sizes 8 and 16, `d_k` / `d_v` from 3 to 9) or, with `oneKernelShape` (a backend whose kernels are
 * compiled per head size and chunk size, slowly, on a software adapter), the shared small sizes
 * ({@linkcode SMALL_HEADS}, chunk size {@linkcode SMALL_CHUNK}) for all three, the kernels that the
 * other WebGPU tests compile too. `full` runs the varied sizes, the shared small sizes and the SPEC
 * section 4 shape (`T = 1024`, `d_k = d_v = 64`, chunk size 64).
 */
export function fastWeightCases(
  level: TestLevel = "small",
  forms: readonly Form[] = ["chunk"],
  oneKernelShape = false,
): FastWeightCase[] {
  const uniform = oneKernelShape && level === "small";
  const cases: FastWeightCase[] = [];
  let seed = 1;
  for (const rule of RULES) {
    for (const alignment of ["prefix", "same-step"] as const) {
      for (const form of forms) {
        const base = {
          rule,
          alignment,
          form,
          H: 2,
          packed: false,
          s0: false,
          split: false,
          clampEveryStep: false,
        };
        if (oneKernelShape || level === "full") {
          const small = { ...base, ...SMALL_HEADS, chunkSize: SMALL_CHUNK };
          cases.push({ ...small, B: 2, T: 37, packed: true, s0: true, seed: seed++ });
          cases.push({ ...small, B: 1, T: 19, split: true, seed: seed++ });
          cases.push({ ...small, B: 1, T: 33, clampEveryStep: true, seed: seed++ });
        }
        if (!uniform) {
          cases.push({
            ...base,
            chunkSize: 16,
            B: 2,
            T: 37,
            dk: 7,
            dv: 5,
            packed: true,
            s0: true,
            seed: seed++,
          });
          cases.push({ ...base, chunkSize: 8, B: 1, T: 19, dk: 6, dv: 9, split: true, seed: seed++ });
          cases.push({
            ...base,
            chunkSize: 16,
            B: 1,
            T: 33,
            dk: 5,
            dv: 3,
            clampEveryStep: true,
            seed: seed++,
          });
        }
        if (level === "full") {
          cases.push({ ...base, chunkSize: 64, B: 1, H: 1, T: 1024, dk: 64, dv: 64, seed: seed++ });
        }
      }
    }
  }
  return cases;
}

/** Random inputs for a case, as plain arrays (shapes of {@linkcode FastWeightInputs}). */
export function fastWeightCaseData(c: FastWeightCase) {
  const rng = new Rng(c.seed * 7919 + 17);
  const { B, T, H, dk, dv } = c;
  const betaWidth = isPerColumnRule(c.rule) ? dv : 1;
  const betaRange: [number, number] = c.rule === "deltanet" || c.rule === "gated_deltanet"
    ? [0.05, 0.95]
    : c.rule === "mamba2"
    ? [0.01, 1]
    : [0.1, 1.9];
  const lambdaRange: [number, number] = c.clampEveryStep ? [1e3, 1e4] : [0.01, 1];
  const starts = new Uint8Array(B * T);
  for (let b = 0; b < B; b++) {
    starts[b * T] = 1;
    if (c.packed) starts[b * T + Math.floor(T / 2) - b] = 1;
  }
  return {
    q: rng.normals(B * T * H * dk),
    k: rng.normals(B * T * H * dk),
    v: rng.normals(B * T * H * dv),
    beta: rng.uniforms(B * T * H * betaWidth, ...betaRange),
    lambdabar: rng.uniforms(B * T * H, ...lambdaRange),
    starts,
    s0: c.s0 ? rng.normals(B * H * dk * dv, 0.3) : undefined,
    dO: rng.normals(B * T * H * dv),
    betaShape: betaWidth === 1 ? [B, T, H] : [B, T, H, dv],
  };
}

/** The host data of a case ({@linkcode fastWeightCaseData}). */
export type FastWeightCaseData = ReturnType<typeof fastWeightCaseData>;

/** The inputs of positions `[t0, t1)` of a case's data on `backend` (no carry). */
export function fastWeightCaseInputs(
  backend: Backend,
  d: FastWeightCaseData,
  c: FastWeightCase,
  t0: number,
  t1: number,
): FastWeightInputs {
  const { B, T, H, dk, dv } = c;
  const len = t1 - t0;
  const slice = (src: Float64Array, width: number) => {
    const out = new Float64Array(B * len * width);
    for (let b = 0; b < B; b++) {
      out.set(src.subarray((b * T + t0) * width, (b * T + t1) * width), b * len * width);
    }
    return out;
  };
  const betaWidth = d.betaShape.length === 4 ? H * dv : H;
  const starts = new Uint8Array(B * len);
  for (let b = 0; b < B; b++) starts.set(d.starts.subarray(b * T + t0, b * T + t1), b * len);
  return {
    q: backend.fromArray(slice(d.q, H * dk), [B, len, H, dk]),
    k: backend.fromArray(slice(d.k, H * dk), [B, len, H, dk]),
    v: backend.fromArray(slice(d.v, H * dv), [B, len, H, dv]),
    beta: backend.fromArray(
      slice(d.beta, betaWidth),
      d.betaShape.length === 4 ? [B, len, H, dv] : [B, len, H],
    ),
    lambdabar: backend.fromArray(slice(d.lambdabar, H), [B, len, H]),
    starts,
    s0: d.s0 ? backend.fromArray(d.s0, [B, H, dk, dv]) : undefined,
  };
}

/** One array's comparison result. */
export interface ParityResult {
  /** Which array (`o`, `state`, `dq`, ...). */
  readonly name: string;
  /** Relative L2 error against the reference. */
  readonly error: number;
  /** Tolerance it was held to. */
  readonly tolerance: number;
}

async function compare(
  backend: Backend,
  ref: Backend,
  name: string,
  actual: Tensor,
  expected: Tensor,
  tolerance: number,
): Promise<ParityResult> {
  const a = await backend.read(actual);
  const e = await ref.read(expected);
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(a[i])) return { name, error: Infinity, tolerance };
  }
  return { name, error: relativeL2(a, e), tolerance };
}

/**
 * Run one case on `backend` and on the reference; returns one result per compared array.
 * A `split` case runs two calls with a carry on the fast backend and one call on the reference.
 */
export async function runFastWeightCase(backend: Backend, c: FastWeightCase, ref = createRefBackend()) {
  const config = ruleConfig(c.rule, { alignment: c.alignment });
  const data = fastWeightCaseData(c);
  const options = { form: c.form, chunkSize: c.chunkSize };
  const results: ParityResult[] = [];
  const refInputs = fastWeightCaseInputs(ref, data, c, 0, c.T);
  const refOut = ref.fastWeightForward(config, refInputs, { form: "recurrent" });
  if (c.split) {
    const mid = Math.floor(c.T / 2);
    const first = backend.fastWeightForward(config, fastWeightCaseInputs(backend, data, c, 0, mid), options);
    const second = backend.fastWeightForward(
      config,
      { ...fastWeightCaseInputs(backend, data, c, mid, c.T), carry: first.carry },
      options,
    );
    const refSecond = ref.fastWeightForward(
      config,
      {
        ...fastWeightCaseInputs(ref, data, c, mid, c.T),
        carry: ref.fastWeightForward(config, fastWeightCaseInputs(ref, data, c, 0, mid)).carry,
      },
    );
    results.push(
      await compare(
        backend,
        ref,
        "o (second half, from carry)",
        second.o,
        refSecond.o,
        PARITY_TOLERANCE.forward,
      ),
    );
    results.push(
      await compare(
        backend,
        ref,
        "final state",
        second.carry.state,
        refOut.carry.state,
        PARITY_TOLERANCE.forward,
      ),
    );
    return results;
  }
  const inputs = fastWeightCaseInputs(backend, data, c, 0, c.T);
  const out = backend.fastWeightForward(config, inputs, options);
  results.push(await compare(backend, ref, "o", out.o, refOut.o, PARITY_TOLERANCE.forward));
  results.push(
    await compare(backend, ref, "final state", out.carry.state, refOut.carry.state, PARITY_TOLERANCE.forward),
  );
  const { B, T, H, dv } = c;
  const grads = backend.fastWeightBackward(
    config,
    inputs,
    backend.fromArray(data.dO, [B, T, H, dv]),
    options,
  );
  const refGrads = ref.fastWeightBackward(config, refInputs, ref.fromArray(data.dO, [B, T, H, dv]), {
    form: "recurrent",
  });
  for (const key of ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0"] as const) {
    results.push(
      await compare(backend, ref, key, gradOf(grads, key), gradOf(refGrads, key), PARITY_TOLERANCE.backward),
    );
  }
  return results;
}

/** A readable case label, e.g. `falcon3a prefix chunk C=16 B2 T37 H2 dk7 dv5 packed s0`. */
export function caseLabel(c: FastWeightCase): string {
  const flags = [
    c.packed && "packed",
    c.s0 && "s0",
    c.split && "split+carry",
    c.clampEveryStep && "clamp-every-step",
  ]
    .filter(Boolean).join(" ");
  return `${c.rule} ${c.alignment} ${c.form} C=${c.chunkSize} B${c.B} T${c.T} H${c.H} dk${c.dk} dv${c.dv} ${flags}`
    .trim();
}

/** Throw with every failing array of a case named, or return quietly. */
export function assertParity(c: FastWeightCase, results: ParityResult[]): void {
  const bad = results.filter((r) => !(r.error <= r.tolerance));
  if (bad.length > 0) {
    throw new Error(
      `${caseLabel(c)}: ` +
        bad.map((r) => `${r.name} rel L2 ${r.error.toExponential(2)} > ${r.tolerance}`).join("; "),
    );
  }
}

/**
 * The parity level asked for by the environment (`FALCON_TEST_LEVEL=full`, or the older
 * `FALCON_PARITY_LEVEL=full`, adds the large shapes): see {@linkcode testLevelFromEnv}.
 */
export function parityLevelFromEnv(): TestLevel {
  return testLevelFromEnv();
}

/**
 * Register the suite with `Deno.test` for a backend. `makeBackend` returns null when the backend
 * cannot exist here (no GPU adapter): the test then says so in its name and is ignored.
 */
export async function registerFastWeightParity(
  name: string,
  makeBackend: () => Promise<Backend | null>,
  options: {
    level?: TestLevel;
    forms?: readonly Form[];
    close?: (backend: Backend) => void | Promise<void>;
    /** Small cases share one kernel shape per rule (see {@linkcode fastWeightCases}). */
    oneKernelShape?: boolean;
  } = {},
): Promise<void> {
  const backend = await makeBackend();
  if (!backend) {
    Deno.test({
      name: `${name}: fast-weight parity (SKIPPED: backend unavailable here)`,
      ignore: true,
      fn() {},
    });
    return;
  }
  const ref = createRefBackend();
  const level = options.level ?? parityLevelFromEnv();
  Deno.test({
    name: `${name}: every rule, alignment and form matches the float64 reference (${level} shapes)`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      try {
        for (const c of fastWeightCases(level, options.forms, options.oneKernelShape)) {
          await t.step(caseLabel(c), async () => assertParity(c, await runFastWeightCase(backend, c, ref)));
        }
      } finally {
        await options.close?.(backend);
      }
    },
  });
}
