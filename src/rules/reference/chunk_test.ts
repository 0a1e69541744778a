/**
 * The chunk-parallel and masked-parallel forms against the recurrent oracle (every rule and
 * alignment, awkward sizes, mid-sequence starts, non-zero `S0`, a carry), continuation, and the
 * positive-decay clamp binding at every step.
 */

import { ALIGNMENTS, isFalconRule, type RuleConfig, ruleConfig, type RuleName, RULES } from "../config.ts";
import { assertRelL2 } from "../../testing/compare.ts";
import { gatherRows, Tape } from "./autodiff.ts";
import { normalizeRows } from "./qk_norm.ts";
import { chunkForm, parallelForm } from "./chunk.ts";
import { stepCoefficients } from "./chunk_coeffs.ts";
import { chunkLayout, planSequence } from "./chunk_layout.ts";
import { randomHeadInputs, splitHeadInputs } from "./chunk_random.ts";
import type { HeadCarry, HeadForm, HeadGrads, HeadInputs } from "./head.ts";
import { recurrentForm } from "./recurrent.ts";

const TOL = 1e-10;
const DK = 5;
const DV = 3;

function assertCarryEqual(name: string, actual: HeadCarry, expected: HeadCarry): void {
  if (actual.count !== expected.count) {
    throw new Error(`${name}: count ${actual.count}, expected ${expected.count}`);
  }
  assertRelL2(`${name} state`, actual.state, expected.state, TOL);
  assertRelL2(`${name} lastKey`, actual.lastKey, expected.lastKey, TOL);
  assertRelL2(`${name} windowX`, actual.windowX, expected.windowX, TOL);
  assertRelL2(`${name} windowY`, actual.windowY, expected.windowY, TOL);
}

function assertGradsEqual(name: string, actual: HeadGrads, expected: HeadGrads): void {
  for (const key of ["dq", "dk", "dv", "dbeta", "dlambdabar", "ds0", "dCarryState"] as const) {
    assertRelL2(`${name} ${key}`, actual[key], expected[key], TOL);
  }
}

/** Forward and backward of `form` agree with the recurrent form. */
function assertMatchesRecurrent(
  name: string,
  config: RuleConfig,
  inputs: HeadInputs,
  form: HeadForm,
  chunkSize: number,
  dO: Float64Array,
): void {
  const ref = recurrentForm.forward(config, inputs, chunkSize);
  const got = form.forward(config, inputs, chunkSize);
  assertRelL2(`${name} o`, got.o, ref.o, TOL);
  assertCarryEqual(`${name} carry`, got.carry, ref.carry);
  assertGradsEqual(
    name,
    form.backward(config, inputs, dO, chunkSize),
    recurrentForm.backward(config, inputs, dO, 0),
  );
}

/** Start positions inside the sequence (some inside a chunk, one on a chunk boundary). */
function midStarts(T: number): number[] {
  return [3, 16, 40, 64, 101, 150].filter((s) => s < T);
}

function randomCase(
  rule: RuleName,
  alignment: (typeof ALIGNMENTS)[number],
  T: number,
  seed: number,
  carry: boolean,
) {
  const config = ruleConfig(rule, { alignment });
  const inputs = randomHeadInputs(config, { T, dk: DK, dv: DV, seed, starts: midStarts(T), s0: true, carry });
  const dO = randomHeadInputs(config, { T, dk: DK, dv: DV, seed: seed + 7 }).v;
  return { config, inputs, dO };
}

for (const rule of RULES) {
  Deno.test(`chunkForm and parallelForm of ${rule} match recurrentForm (T = 1..65, C = 1/16/64, starts, S0, carry)`, () => {
    let seed = 100;
    for (const alignment of ALIGNMENTS) {
      for (const T of [1, 2, 63, 64, 65]) {
        for (const carry of [false, true]) {
          const { config, inputs, dO } = randomCase(rule, alignment, T, seed++, carry);
          for (const C of [1, 16, 64]) {
            assertMatchesRecurrent(
              `${rule}/${alignment} T=${T} C=${C} carry=${carry}`,
              config,
              inputs,
              chunkForm,
              C,
              dO,
            );
          }
          assertMatchesRecurrent(
            `${rule}/${alignment} T=${T} parallel carry=${carry}`,
            config,
            inputs,
            parallelForm,
            0,
            dO,
          );
        }
      }
    }
  });
}

Deno.test("chunkForm and parallelForm match recurrentForm at T = 200 (C = 1/16/64) for every rule", () => {
  let seed = 900;
  for (const rule of RULES) {
    for (const alignment of ALIGNMENTS) {
      const { config, inputs, dO } = randomCase(rule, alignment, 200, seed++, alignment === "prefix");
      for (const C of [1, 16, 64]) {
        assertMatchesRecurrent(`${rule}/${alignment} T=200 C=${C}`, config, inputs, chunkForm, C, dO);
      }
      assertMatchesRecurrent(`${rule}/${alignment} T=200 parallel`, config, inputs, parallelForm, 0, dO);
    }
  }
});

Deno.test("chunkForm matches recurrentForm with dk = 2, dv = 7 and dk = 9, dv = 1", () => {
  let seed = 960;
  for (const rule of RULES) {
    for (const [dk, dv] of [[2, 7], [9, 1]]) {
      const config = ruleConfig(rule, { alignment: seed % 2 ? "prefix" : "same-step" });
      const inputs = randomHeadInputs(config, {
        T: 50,
        dk,
        dv,
        seed: seed++,
        starts: [20],
        s0: true,
        carry: true,
      });
      const dO = randomHeadInputs(config, { T: 50, dk, dv, seed: seed++ }).v;
      assertMatchesRecurrent(`${rule} dk=${dk} dv=${dv}`, config, inputs, chunkForm, 16, dO);
    }
  }
});

Deno.test("chunkForm: running 1..T1 then T1+1..T from the carry equals running 1..T at once", () => {
  let seed = 300;
  for (const rule of RULES) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment });
      const inputs = randomHeadInputs(config, {
        T: 40,
        dk: DK,
        dv: DV,
        seed: seed++,
        starts: [9, 30],
        s0: true,
      });
      const whole = chunkForm.forward(config, inputs, 16);
      for (const T1 of [1, 9, 10, 17, 31]) {
        const [first, rest] = splitHeadInputs(config, inputs, T1);
        const a = chunkForm.forward(config, first, 16);
        const b = chunkForm.forward(config, rest(a.carry), 16);
        const o = new Float64Array(whole.o.length);
        o.set(a.o);
        o.set(b.o, a.o.length);
        assertRelL2(`${rule}/${alignment} split ${T1} o`, o, whole.o, TOL);
        assertCarryEqual(`${rule}/${alignment} split ${T1} carry`, b.carry, whole.carry);
      }
    }
  }
});

Deno.test("chunkForm of falcon3/3a with C < B-1: chunk boundaries inside the window match recurrentForm", () => {
  let seed = 400;
  for (const rule of ["falcon3", "falcon3a"] as const) {
    for (const alignment of ALIGNMENTS) {
      for (const window of [4, 7]) {
        const config = ruleConfig(rule, { alignment, window });
        const inputs = randomHeadInputs(config, {
          T: 30,
          dk: DK,
          dv: DV,
          seed: seed++,
          starts: [5, 6, 13],
          s0: true,
          carry: true,
        });
        const dO = randomHeadInputs(config, { T: 30, dk: DK, dv: DV, seed: seed++ }).v;
        for (const C of [1, 2, 3, 5]) {
          assertMatchesRecurrent(`${rule}/${alignment} B=${window} C=${C}`, config, inputs, chunkForm, C, dO);
        }
      }
    }
  }
});

Deno.test("chunkForm with B = 1: falcon3 equals falcon1 and falcon3a equals falcon1a", () => {
  for (const [windowRule, plain] of [["falcon3", "falcon1"], ["falcon3a", "falcon1a"]] as const) {
    for (const alignment of ALIGNMENTS) {
      const c3 = ruleConfig(windowRule, { alignment, window: 1 });
      const c1 = ruleConfig(plain, { alignment });
      const inputs = randomHeadInputs(c1, { T: 37, dk: DK, dv: DV, seed: 17, starts: [11], s0: true });
      const dO = randomHeadInputs(c1, { T: 37, dk: DK, dv: DV, seed: 18 }).v;
      assertRelL2(
        `${windowRule} B=1 o`,
        chunkForm.forward(c3, inputs, 8).o,
        chunkForm.forward(c1, inputs, 8).o,
        TOL,
      );
      assertGradsEqual(
        `${windowRule} B=1`,
        chunkForm.backward(c3, inputs, dO, 8),
        chunkForm.backward(c1, inputs, dO, 8),
      );
    }
  }
});

function allFinite(name: string, arrays: Record<string, ArrayLike<number>>): void {
  for (const [key, arr] of Object.entries(arrays)) {
    for (let i = 0; i < arr.length; i++) {
      if (!Number.isFinite(arr[i])) throw new Error(`${name} ${key}[${i}] = ${arr[i]} is not finite`);
    }
  }
}

Deno.test("chunkForm with the clamp binding at every step: finite, and equal to recurrentForm", () => {
  let seed = 500;
  for (const rule of RULES) {
    for (const alignment of ALIGNMENTS) {
      const config = ruleConfig(rule, { alignment });
      const T = 130;
      const inputs = randomHeadInputs(config, {
        T,
        dk: DK,
        dv: DV,
        seed: seed++,
        starts: [70],
        s0: true,
        clamp: true,
      });
      const dO = randomHeadInputs(config, { T, dk: DK, dv: DV, seed: seed++ }).v;
      if (isFalconRule(rule)) {
        // every step but the sentinels must have log gamma = log(eps_gamma) exactly
        const plan = planSequence(config, inputs);
        const layout = chunkLayout(plan, 0, T);
        const tape = new Tape();
        const keys = tape.constant(T, DK, normalizeRows(inputs.k, T, DK, config.qkNorm, config.epsRms));
        const xPairs = gatherRows(keys, layout.pairX);
        const bw = inputs.beta.length / T;
        const { lg } = stepCoefficients(config, layout, {
          xPairs,
          beta: tape.constant(T, bw, inputs.beta),
          lambdabar: tape.constant(T, 1, inputs.lambdabar),
          mambaA: 1,
          retnetG: 1,
        });
        for (let i = 0; i < lg.value.length; i++) {
          const t = Math.floor(i / lg.cols);
          if (layout.Bt[t] > 0 && lg.value[i] !== Math.log(config.epsGamma)) {
            throw new Error(`${rule}/${alignment}: clamp not binding at step ${t} (lg ${lg.value[i]})`);
          }
        }
      }
      for (const C of [64, 130]) {
        const fwd = chunkForm.forward(config, inputs, C);
        const grads = chunkForm.backward(config, inputs, dO, C);
        allFinite(`${rule}/${alignment} C=${C}`, { o: fwd.o, state: fwd.carry.state, ...grads });
        assertMatchesRecurrent(`${rule}/${alignment} clamp C=${C}`, config, inputs, chunkForm, C, dO);
      }
    }
  }
});

Deno.test("chunkForm matches recurrentForm where keys are zero (zero write statistic: the step is a no-op)", () => {
  let seed = 600;
  for (const rule of RULES.filter(isFalconRule)) {
    for (const alignment of ALIGNMENTS) {
      const { config, inputs, dO } = randomCase(rule, alignment, 40, seed++, false);
      for (let t = 10; t < 17; t++) inputs.k.fill(0, t * DK, (t + 1) * DK); // a whole window of zero keys
      inputs.k.fill(0, 30 * DK, 31 * DK);
      for (const C of [4, 40]) {
        assertMatchesRecurrent(`${rule}/${alignment} zero keys C=${C}`, config, inputs, chunkForm, C, dO);
      }
    }
  }
});

Deno.test("chunkForm of falcon3/3a matches recurrentForm from a carry with a partial window", () => {
  let seed = 650;
  for (const rule of ["falcon3", "falcon3a"] as const) {
    for (const alignment of ALIGNMENTS) {
      for (const count of [0, 1, 2]) {
        const { config, inputs, dO } = randomCase(rule, alignment, 20, seed++, true);
        const carry = inputs.carry!;
        inputs.carry = {
          ...carry,
          windowX: carry.windowX.slice(0, count * DK),
          windowY: carry.windowY.slice(0, count * DV),
          count,
        };
        for (const C of [1, 2, 8]) {
          assertMatchesRecurrent(
            `${rule}/${alignment} carry count ${count} C=${C}`,
            config,
            inputs,
            chunkForm,
            C,
            dO,
          );
        }
      }
    }
  }
});

Deno.test("chunkForm rejects a bad chunk size and mis-sized inputs with a RangeError naming them", () => {
  const config = ruleConfig("falcon1");
  const inputs = randomHeadInputs(config, { T: 4, dk: DK, dv: DV, seed: 1 });
  const expectRangeError = (what: string, fn: () => unknown, mention: string) => {
    try {
      fn();
    } catch (e) {
      if (e instanceof RangeError && e.message.includes(mention)) return;
      throw new Error(`${what}: wrong error ${e}`);
    }
    throw new Error(`${what}: no error`);
  };
  expectRangeError("chunk size 0", () => chunkForm.forward(config, inputs, 0), "chunkSize");
  expectRangeError(
    "short q",
    () => chunkForm.forward(config, { ...inputs, q: inputs.q.subarray(1) }, 2),
    "q has length",
  );
  expectRangeError(
    "short dO",
    () => chunkForm.backward(config, inputs, new Float64Array(3), 2),
    "dO has length",
  );
});

Deno.test("chunkForm matches recurrentForm for every qkNorm (rms, l2, none) and with coupling off", () => {
  let seed = 800;
  for (const rule of RULES) {
    for (const qkNorm of ["rms", "l2", "none"] as const) {
      for (const coupling of [true, false]) {
        const config = ruleConfig(rule, { qkNorm, coupling, alignment: seed % 2 ? "prefix" : "same-step" });
        const inputs = randomHeadInputs(config, {
          T: 33,
          dk: DK,
          dv: DV,
          seed: seed++,
          starts: [12],
          s0: true,
          carry: true,
        });
        if (qkNorm === "none" && (rule === "deltanet" || rule === "gated_deltanet")) {
          // raw keys would make the delta rules diverge: use unit-norm keys instead
          for (let t = 0; t < 33; t++) {
            const row = inputs.k.subarray(t * DK, (t + 1) * DK);
            const n = Math.hypot(...row);
            row.forEach((x, i) => (row[i] = x / n));
          }
        }
        const dO = randomHeadInputs(config, { T: 33, dk: DK, dv: DV, seed: seed++ }).v;
        assertMatchesRecurrent(
          `${rule} qkNorm=${qkNorm} coupling=${coupling}`,
          config,
          inputs,
          chunkForm,
          8,
          dO,
        );
      }
    }
  }
});
