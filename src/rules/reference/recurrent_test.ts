/**
 * The recurrent form (the oracle) against central finite differences, and its sequence
 * semantics: continuation through a carry, packed sequences, the prefix sentinel and the edge
 * cases of SPEC sections 2-3 and 6.
 */

import {
  ALIGNMENTS,
  isFalconRule,
  isPerColumnRule,
  isWindowRule,
  type RuleConfig,
  ruleConfig,
  type RuleName,
  RULES,
} from "../config.ts";
import { assertClose, Rng, TOLERANCE } from "../../testing/compare.ts";
import { assertGradientClose, numericGradient } from "./finite_difference.ts";
import type { HeadCarry, HeadGrads, HeadInputs } from "./head.ts";
import { normalizeRows } from "./qk_norm.ts";
import { recurrentForm, recurrentTrace } from "./recurrent.ts";

// ---------------------------------------------------------------------------------------------
// Random heads

interface HeadSpec {
  T: number;
  dk: number;
  dv: number;
  /** Positions flagged as sequence starts (position 0 is a start anyway without a carry). */
  starts?: number[];
  /** Non-zero reset state. */
  s0?: boolean;
  /** Continue from a random carry (with W-1 window pairs for window rules). */
  carry?: boolean;
  /** Range of beta (default per rule). */
  beta?: [number, number];
  /** Range of lambdabar (default per rule). */
  lambdabar?: [number, number];
}

function defaultBetaRange(rule: RuleName): [number, number] {
  if (rule === "mamba2") return [0.1, 1];
  if (rule === "deltanet" || rule === "gated_deltanet") return [0.1, 0.9];
  return [0.2, 1.8];
}

function defaultLambdaRange(config: RuleConfig): [number, number] {
  if (config.rule === "gated_deltanet") return [0.01, 0.5];
  return config.coupling ? [0.05, 1] : [0.1, 3];
}

function randomHead(config: RuleConfig, rng: Rng, spec: HeadSpec): HeadInputs {
  const { T, dk, dv } = spec;
  const starts = new Uint8Array(T);
  for (const s of spec.starts ?? []) starts[s] = 1;
  const [blo, bhi] = spec.beta ?? defaultBetaRange(config.rule);
  const [llo, lhi] = spec.lambdabar ?? defaultLambdaRange(config);
  const slots = isWindowRule(config.rule) ? config.window - 1 : 0;
  const carry: HeadCarry | undefined = spec.carry
    ? {
      state: rng.normals(dk * dv, 0.3),
      lastKey: rng.normals(dk),
      windowX: rng.normals(slots * dk),
      windowY: rng.normals(slots * dv),
      count: slots,
    }
    : undefined;
  return {
    T,
    dk,
    dv,
    q: rng.normals(T * dk),
    k: rng.normals(T * dk),
    v: rng.normals(T * dv),
    beta: rng.uniforms(isPerColumnRule(config.rule) ? T * dv : T, blo, bhi),
    lambdabar: rng.uniforms(T, llo, lhi),
    starts,
    s0: spec.s0 ? rng.normals(dk * dv, 0.3) : new Float64Array(dk * dv),
    carry,
    mambaA: 0.7,
    retnetG: 0.9,
  };
}

/** Positions `from..to-1` of a head, continuing from `carry` when given. */
function sliceHead(head: HeadInputs, from: number, to: number, carry?: HeadCarry): HeadInputs {
  const { dk, dv } = head;
  const w = head.beta.length / head.T;
  return {
    ...head,
    T: to - from,
    q: head.q.slice(from * dk, to * dk),
    k: head.k.slice(from * dk, to * dk),
    v: head.v.slice(from * dv, to * dv),
    beta: head.beta.slice(from * w, to * w),
    lambdabar: head.lambdabar.slice(from, to),
    starts: head.starts.slice(from, to),
    carry: from === 0 ? head.carry : carry,
  };
}

const SIZE = { T: 9, dk: 3, dv: 2 };
const CASES = RULES.flatMap((rule) => ALIGNMENTS.map((alignment) => ({ rule, alignment })));

function label(config: RuleConfig): string {
  return `${config.rule}/${config.alignment}`;
}

// ---------------------------------------------------------------------------------------------
// Gradients against finite differences

/** `L = sum(o * G)`, the loss whose gradient `backward` returns. */
function loss(config: RuleConfig, head: HeadInputs, G: Float64Array): number {
  const { o } = recurrentForm.forward(config, head, 64);
  let sum = 0;
  for (let i = 0; i < o.length; i++) sum += o[i] * G[i];
  return sum;
}

/** Compare every gradient of `backward` with central differences of `loss`. */
function checkGradients(config: RuleConfig, head: HeadInputs, G: Float64Array, what: string): HeadGrads {
  const g = recurrentForm.backward(config, head, G, 64);
  const f = () => loss(config, head, G);
  const arrays: [string, Float64Array, Float64Array][] = [
    ["dq", head.q, g.dq],
    ["dk", head.k, g.dk],
    ["dv", head.v, g.dv],
    ["dbeta", head.beta, g.dbeta],
    ["dlambdabar", head.lambdabar, g.dlambdabar],
    ["ds0", head.s0, g.ds0],
  ];
  if (head.carry) arrays.push(["dCarryState", head.carry.state, g.dCarryState]);
  for (const [name, x, analytic] of arrays) {
    assertGradientClose(`${label(config)} ${what}: ${name}`, analytic, numericGradient(f, x));
  }
  if (!head.carry && g.dCarryState.some((x) => x !== 0)) {
    throw new Error(`${label(config)} ${what}: dCarryState is not zero without a carry`);
  }
  return g;
}

const FD_SPECS: [string, HeadSpec][] = [
  ["fresh run, mid-sequence start, non-zero s0", { ...SIZE, starts: [5], s0: true }],
  ["carried run, mid-sequence start, non-zero s0", { ...SIZE, starts: [6], s0: true, carry: true }],
  ["carried run flagged as a start at position 0", { ...SIZE, starts: [0, 4], s0: true, carry: true }],
];

for (const { rule, alignment } of CASES) {
  Deno.test(`recurrentForm.backward() of ${rule}/${alignment} matches finite differences (coupling off)`, () => {
    const config = ruleConfig(rule, { alignment, coupling: false });
    const rng = new Rng(1234 + RULES.indexOf(rule) * 7 + ALIGNMENTS.indexOf(alignment));
    for (const [what, spec] of FD_SPECS) {
      const head = randomHead(config, rng, spec);
      checkGradients(config, head, rng.normals(spec.T * spec.dv), what);
    }
  });
}

Deno.test("recurrentForm.backward() is exact with the clamp active and beta near 0 or near 2", () => {
  const specs: [string, Partial<HeadSpec>][] = [
    ["clamp active", { beta: [1.2, 1.8], lambdabar: [1e3, 1e4] }],
    ["beta near 0", { beta: [1e-4, 1e-3] }],
    ["beta near 2", { beta: [1.99, 1.999] }],
  ];
  const rng = new Rng(99);
  for (const rule of RULES.filter(isFalconRule)) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment, coupling: false });
      for (const [what, extra] of specs) {
        const head = randomHead(config, rng, { ...SIZE, starts: [5], s0: true, carry: true, ...extra });
        if (what === "clamp active" && recurrentTrace(config, head).clamped === 0) {
          throw new Error(`${label(config)}: the clamp never binds in the clamp case`);
        }
        checkGradients(config, head, rng.normals(SIZE.T * SIZE.dv), what);
      }
    }
  }
});

Deno.test("recurrentForm.backward() matches finite differences under l2 and no q/k normalisation", () => {
  const rng = new Rng(5);
  for (const [rule, qkNorm] of [["falcon2", "l2"], ["falcon3", "none"], ["falcon1a", "none"]] as const) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment, coupling: false, qkNorm });
      const head = randomHead(config, rng, { ...SIZE, starts: [5], s0: true, carry: true });
      checkGradients(config, head, rng.normals(SIZE.T * SIZE.dv), `qkNorm ${qkNorm}`);
    }
  }
});

Deno.test("the coupled ridge treats its statistic as a constant (stop-gradient)", () => {
  // With coupling on, lambda_t = lambdabar_t * sg(E*_t). The uncoupled run with lambda_t fixed to
  // that product has the same forward; its gradients (checked against finite differences above)
  // must equal the coupled ones, with dlambdabar scaled by E*_t.
  const rng = new Rng(77);
  for (const rule of RULES.filter(isFalconRule)) {
    for (const alignment of ALIGNMENTS) {
      const coupled = ruleConfig(rule, { alignment });
      const frozen = ruleConfig(rule, { alignment, coupling: false });
      const head = randomHead(coupled, rng, { ...SIZE, starts: [5], s0: true, carry: true });
      const stat = recurrentTrace(coupled, head).stat;
      const fixed = { ...head, lambdabar: head.lambdabar.map((lb, t) => lb * stat[t]) };
      const G = rng.normals(SIZE.T * SIZE.dv);
      const oCoupled = recurrentForm.forward(coupled, head, 64).o;
      assertClose(
        `${label(coupled)} forward`,
        oCoupled,
        recurrentForm.forward(frozen, fixed, 64).o,
        TOLERANCE.f64,
      );
      const a = recurrentForm.backward(coupled, head, G, 64);
      const b = checkGradients(frozen, fixed, G, "frozen statistic");
      for (const key of ["dq", "dk", "dv", "dbeta", "ds0", "dCarryState"] as const) {
        assertClose(`${label(coupled)} ${key}`, a[key], b[key], TOLERANCE.f64);
      }
      const scaled = b.dlambdabar.map((d, t) => d * stat[t]);
      assertClose(`${label(coupled)} dlambdabar`, a.dlambdabar, scaled, TOLERANCE.f64);
    }
  }
});

// ---------------------------------------------------------------------------------------------
// Continuation and packing

function assertSameCarry(what: string, a: HeadCarry, b: HeadCarry): void {
  assertClose(`${what} carry.state`, a.state, b.state, TOLERANCE.f64);
  assertClose(`${what} carry.lastKey`, a.lastKey, b.lastKey, TOLERANCE.f64);
  if (a.count !== b.count) throw new Error(`${what} carry.count ${a.count}, expected ${b.count}`);
  assertClose(`${what} carry.windowX`, a.windowX, b.windowX, TOLERANCE.f64);
  assertClose(`${what} carry.windowY`, a.windowY, b.windowY, TOLERANCE.f64);
}

for (const { rule, alignment } of CASES) {
  Deno.test(`${rule}/${alignment}: a run split anywhere and continued through its carry equals the whole run`, () => {
    const config = ruleConfig(rule, { alignment, window: 4 });
    const rng = new Rng(31 + RULES.indexOf(rule));
    const T = 11;
    for (const fromCarry of [false, true]) {
      const head = randomHead(config, rng, { T, dk: 3, dv: 2, starts: [7], s0: true, carry: fromCarry });
      const G = rng.normals(T * 2);
      const whole = recurrentForm.forward(config, head, 64);
      const wholeGrads = recurrentForm.backward(config, head, G, 64);
      for (let split = 1; split < T; split++) {
        const what = `${label(config)} split at ${split}${fromCarry ? " (from a carry)" : ""}`;
        const first = recurrentForm.forward(config, sliceHead(head, 0, split), 64);
        const rest = sliceHead(head, split, T, first.carry);
        const second = recurrentForm.forward(config, rest, 64);
        const o = new Float64Array(T * 2);
        o.set(first.o);
        o.set(second.o, split * 2);
        assertClose(`${what}: o`, o, whole.o, TOLERANCE.f64);
        assertSameCarry(what, second.carry, whole.carry);
        // Inputs at positions >= split reach only outputs at positions >= split.
        const g = recurrentForm.backward(config, rest, G.slice(split * 2), 64);
        const w = head.beta.length / T;
        assertClose(`${what}: dq`, g.dq, wholeGrads.dq.slice(split * 3), TOLERANCE.f64);
        assertClose(`${what}: dk`, g.dk, wholeGrads.dk.slice(split * 3), TOLERANCE.f64);
        assertClose(`${what}: dv`, g.dv, wholeGrads.dv.slice(split * 2), TOLERANCE.f64);
        assertClose(`${what}: dbeta`, g.dbeta, wholeGrads.dbeta.slice(split * w), TOLERANCE.f64);
        assertClose(`${what}: dlambdabar`, g.dlambdabar, wholeGrads.dlambdabar.slice(split), TOLERANCE.f64);
      }
    }
  });
}

Deno.test("two sequences packed in one row with a start flag equal each sequence run alone", () => {
  const rng = new Rng(8);
  for (const { rule, alignment } of CASES) {
    const config = ruleConfig(rule, { alignment });
    const T = 11;
    const cut = 5;
    const packed = randomHead(config, rng, { T, dk: 3, dv: 2, starts: [cut], s0: true });
    const G = rng.normals(T * 2);
    const alone = [sliceHead(packed, 0, cut), sliceHead(packed, cut, T)];
    const fwd = recurrentForm.forward(config, packed, 64);
    const parts = alone.map((h) => recurrentForm.forward(config, h, 64));
    const what = label(config);
    assertClose(`${what} o`, fwd.o, Float64Array.of(...parts[0].o, ...parts[1].o), TOLERANCE.f64);
    assertSameCarry(what, fwd.carry, parts[1].carry);
    const g = recurrentForm.backward(config, packed, G, 64);
    const ga = recurrentForm.backward(config, alone[0], G.slice(0, cut * 2), 64);
    const gb = recurrentForm.backward(config, alone[1], G.slice(cut * 2), 64);
    for (const key of ["dq", "dk", "dv", "dbeta", "dlambdabar"] as const) {
      assertClose(`${what} ${key}`, g[key], Float64Array.of(...ga[key], ...gb[key]), TOLERANCE.f64);
    }
    assertClose(`${what} ds0`, g.ds0, ga.ds0.map((x, i) => x + gb.ds0[i]), TOLERANCE.f64);
  }
});

Deno.test("the returned carry holds the last normalised key and the last W-1 window pairs", () => {
  const config = ruleConfig("falcon3", { alignment: "prefix", window: 4 });
  const head = randomHead(config, new Rng(3), { T: 7, dk: 3, dv: 2 });
  const { carry } = recurrentForm.forward(config, head, 64);
  const kn = normalizeRows(head.k, 7, 3, "rms", config.epsRms);
  assertClose("lastKey", carry.lastKey, kn.slice(6 * 3), TOLERANCE.f64);
  // prefix: the pairs of steps 4, 5, 6 are (phi(k_3), v_4), (phi(k_4), v_5), (phi(k_5), v_6)
  if (carry.count !== 3) throw new Error(`carry.count ${carry.count}, expected 3`);
  assertClose("windowX", carry.windowX, kn.slice(3 * 3, 6 * 3), TOLERANCE.f64);
  assertClose("windowY", carry.windowY, head.v.slice(4 * 2, 7 * 2), TOLERANCE.f64);
});

// ---------------------------------------------------------------------------------------------
// Edge cases

/** `S^T q` for every row of `q` (qkNorm none). */
function readAll(s: Float64Array, q: Float64Array, T: number, dk: number, dv: number): Float64Array {
  const o = new Float64Array(T * dv);
  for (let t = 0; t < T; t++) {
    for (let j = 0; j < dv; j++) {
      for (let i = 0; i < dk; i++) o[t * dv + j] += s[i * dv + j] * q[t * dk + i];
    }
  }
  return o;
}

function assertFinite(what: string, a: Float64Array): void {
  const bad = a.findIndex((x) => !Number.isFinite(x));
  if (bad >= 0) throw new Error(`${what}: entry ${bad} is ${a[bad]}`);
}

Deno.test("with the clamp active at every step the state stays finite and gamma = eps_gamma", () => {
  const rng = new Rng(11);
  for (const rule of RULES.filter(isFalconRule)) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment });
      const T = 200;
      const head = randomHead(config, rng, { T, dk: 4, dv: 3, beta: [1.2, 1.9], lambdabar: [1e6, 1e8] });
      const trace = recurrentTrace(config, head);
      const first = alignment === "prefix" ? 1 : 0; // the sentinel neither decays nor writes
      for (let i = first * 3; i < T * 3; i++) {
        if (trace.gamma[i] !== config.epsGamma) {
          throw new Error(`${label(config)}: gamma[${i}] = ${trace.gamma[i]}, expected ${config.epsGamma}`);
        }
      }
      if (trace.clamped !== (T - first) * 3) throw new Error(`${label(config)}: clamped ${trace.clamped}`);
      const { o, carry } = recurrentForm.forward(config, head, 64);
      assertFinite(`${label(config)} o`, o);
      assertFinite(`${label(config)} state`, carry.state);
      const g = recurrentForm.backward(config, head, rng.normals(T * 3), 64);
      for (const key of ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0"] as const) {
        assertFinite(`${label(config)} ${key}`, g[key]);
      }
    }
  }
});

Deno.test("lambda = 0 never decays, and Falcon-1 with beta = 1 then reads back the value it wrote", () => {
  const rng = new Rng(12);
  for (const rule of RULES.filter(isFalconRule)) {
    const config = ruleConfig(rule, { alignment: "same-step" });
    const head = randomHead(config, rng, { T: 9, dk: 3, dv: 2, lambdabar: [0, 0] });
    const trace = recurrentTrace(config, head);
    if (trace.gamma.some((g) => g !== 1)) throw new Error(`${rule}: decayed with lambda = 0`);
  }
  // NLMS with beta = 1, lambda = 0: S_t^T x_t = y_t up to eps / (E_t + eps).
  const config = ruleConfig("falcon1", { alignment: "same-step", qkNorm: "none", coupling: false });
  const head = randomHead(config, rng, { T: 9, dk: 3, dv: 2, beta: [1, 1], lambdabar: [0, 0], s0: true });
  head.q = head.k.slice();
  const { o } = recurrentForm.forward(config, head, 64);
  assertClose("read-after-write", o, head.v, { rtol: 1e-5, atol: 1e-5 });
});

Deno.test("with beta near 0 the Falcon rules keep the reset state", () => {
  const rng = new Rng(13);
  for (const rule of RULES.filter(isFalconRule)) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment, qkNorm: "none" });
      const head = randomHead(config, rng, { T: 9, dk: 3, dv: 2, beta: [1e-12, 2e-12], s0: true });
      const { o } = recurrentForm.forward(config, head, 64);
      assertClose(`${label(config)}`, o, readAll(head.s0, head.q, 9, 3, 2), { rtol: 1e-9, atol: 1e-9 });
    }
  }
});

Deno.test("with beta near 2 every rule stays finite and bounded", () => {
  const rng = new Rng(14);
  for (const rule of RULES.filter(isFalconRule)) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment });
      const head = randomHead(config, rng, { T: 300, dk: 4, dv: 3, beta: [1.999, 1.9999] });
      const { o, carry } = recurrentForm.forward(config, head, 64);
      const big = carry.state.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
      assertFinite(`${label(config)} o`, o);
      if (!(big < 1e3)) throw new Error(`${label(config)}: |S_final| reached ${big}`);
    }
  }
});

Deno.test("with W = 1 Falcon-3 is Falcon-1 and Falcon-3A is Falcon-1A (forward and backward)", () => {
  const rng = new Rng(15);
  for (const [windowRule, plainRule] of [["falcon3", "falcon1"], ["falcon3a", "falcon1a"]] as const) {
    for (const alignment of ALIGNMENTS) {
      const windowed = ruleConfig(windowRule, { alignment, window: 1 });
      const plain = ruleConfig(plainRule, { alignment });
      const head = randomHead(windowed, rng, { ...SIZE, starts: [5], s0: true, carry: true });
      const G = rng.normals(SIZE.T * SIZE.dv);
      const what = `${windowRule} (W = 1) vs ${plainRule} ${alignment}`;
      const a = recurrentForm.forward(windowed, head, 64);
      const b = recurrentForm.forward(plain, head, 64);
      assertClose(`${what} o`, a.o, b.o, TOLERANCE.f64);
      assertSameCarry(what, a.carry, b.carry);
      const ga = recurrentForm.backward(windowed, head, G, 64);
      const gb = recurrentForm.backward(plain, head, G, 64);
      for (const key of ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const) {
        assertClose(`${what} ${key}`, ga[key], gb[key], TOLERANCE.f64);
      }
    }
  }
});

Deno.test("a zero key makes its Falcon step a no-op", () => {
  const rng = new Rng(16);
  const rules: [RuleName, number][] = [
    ["falcon1", 4],
    ["falcon2", 4],
    ["falcon1a", 4],
    ["falcon2a", 4],
    ["falcon3", 1],
    ["falcon3a", 1],
  ];
  for (const [rule, window] of rules) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment, qkNorm: "none", window });
      const head = randomHead(config, rng, { T: 8, dk: 3, dv: 2, s0: true });
      const zero = 4;
      head.k.fill(0, zero * 3, zero * 3 + 3);
      // the step that writes k_4: step 4 (same-step) or step 5 (prefix)
      const step = alignment === "prefix" ? zero + 1 : zero;
      const before = recurrentForm.forward(config, sliceHead(head, 0, step), 64).carry.state;
      const after = recurrentForm.forward(config, sliceHead(head, 0, step + 1), 64).carry.state;
      assertClose(`${label(config)} state across the zero-key step`, after, before, { rtol: 0, atol: 0 });
      const g = recurrentForm.backward(config, head, rng.normals(16), 64);
      assertFinite(`${label(config)} dk`, g.dk);
    }
  }
});

Deno.test("under prefix alignment the first step neither writes nor decays, for every rule", () => {
  const rng = new Rng(17);
  for (const rule of RULES) {
    const config = ruleConfig(rule, { alignment: "prefix", qkNorm: "none" });
    const head = randomHead(config, rng, { T: 3, dk: 3, dv: 2, s0: true, starts: [2] });
    const { o } = recurrentForm.forward(config, head, 64);
    const expected = readAll(head.s0, head.q, 3, 3, 2);
    assertClose(`${rule} o_0`, o.slice(0, 2), expected.slice(0, 2), { rtol: 0, atol: 0 });
    assertClose(`${rule} o_2 (a later start)`, o.slice(4), expected.slice(4), { rtol: 0, atol: 0 });
  }
});

Deno.test("inputs a baseline does not read get exactly zero gradient", () => {
  const unused: [RuleName, ("dbeta" | "dlambdabar")[]][] = [
    ["linear", ["dbeta", "dlambdabar"]],
    ["retnet", ["dbeta", "dlambdabar"]],
    ["mamba2", ["dlambdabar"]],
    ["deltanet", ["dlambdabar"]],
  ];
  const rng = new Rng(18);
  for (const [rule, keys] of unused) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment });
      const head = randomHead(config, rng, { ...SIZE, starts: [5], s0: true, carry: true });
      const g = recurrentForm.backward(config, head, rng.normals(SIZE.T * SIZE.dv), 64);
      for (const key of keys) {
        if (g[key].some((x) => x !== 0)) throw new Error(`${label(config)}: ${key} = ${g[key]}`);
      }
    }
  }
});

Deno.test("recurrentForm rejects arrays of the wrong size, naming the field", () => {
  const config = ruleConfig("falcon2", {});
  const head = randomHead(config, new Rng(1), SIZE);
  const cases: [string, HeadInputs][] = [
    ["head q has 26 entries", { ...head, q: head.q.slice(1) }],
    ["head beta has 9 entries, expected T*Dv = 18", { ...head, beta: head.beta.slice(0, 9) }],
    ["head s0 has 5 entries", { ...head, s0: head.s0.slice(1) }],
  ];
  for (const [message, bad] of cases) {
    let error: unknown;
    try {
      recurrentForm.forward(config, bad, 64);
    } catch (e) {
      error = e;
    }
    if (!(error instanceof RangeError) || !error.message.includes(message)) {
      throw new Error(`expected a RangeError containing "${message}", got ${error}`);
    }
  }
});
