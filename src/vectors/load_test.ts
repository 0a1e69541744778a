/** Parsing test-vector files: a well-formed file maps onto the reference types; errors name the field. */

import { assertClose, TOLERANCE } from "../testing/compare.ts";
import { retnetDecay } from "../rules/config.ts";
import { parseVectorFile } from "./load.ts";

const T = 3;
const DK = 2;
const DV = 2;

function rows(n: number, m: number, base: number): number[][] {
  return Array.from({ length: n }, (_, i) => Array.from({ length: m }, (_, j) => base + i * m + j));
}

/** A small well-formed vector file (values are arbitrary). */
function sample(rule = "falcon2", params: Record<string, unknown> = {}): Record<string, unknown> {
  const perColumn = rule === "falcon2" || rule === "falcon2a";
  const beta = perColumn ? rows(T, DV, 0.1) : [0.1, 0.2, 0.3];
  return {
    format: "falcon-vector/1",
    rule,
    alignment: "same-step",
    case: "tiny",
    shape: { T, d_k: DK, d_v: DV },
    params: { eps: 1e-6, eps_gamma: 1e-3, eps_rms: 1e-6, coupling: false, qk_norm: "l2", ...params },
    inputs: {
      q: rows(T, DK, 1),
      k: rows(T, DK, 2),
      v: rows(T, DV, 3),
      beta,
      lambdabar: [0.5, 0.6, 0.7],
      G: rows(T, DV, 4),
      S0: rows(DK, DV, 5),
      starts: [false, false, true],
    },
    outputs: { o: rows(T, DV, 6), S_final: rows(DK, DV, 7) },
    grads: {
      q: rows(T, DK, 8),
      k: rows(T, DK, 9),
      v: rows(T, DV, 10),
      beta,
      lambdabar: [1, 2, 3],
      S0: rows(DK, DV, 11),
    },
  };
}

function expectError(json: unknown, message: string, type: typeof TypeError | typeof RangeError): void {
  let error: unknown;
  try {
    parseVectorFile("tiny.json", json);
  } catch (e) {
    error = e;
  }
  if (!(error instanceof type) || !(error as Error).message.includes(message)) {
    throw new Error(`expected a ${type.name} containing "${message}", got ${error}`);
  }
}

Deno.test("parseVectorFile() maps a well-formed file onto config, head inputs and expectations", () => {
  const c = parseVectorFile("tiny.json", sample());
  if (c.rule !== "falcon2" || c.alignment !== "same-step" || c.caseName !== "tiny") {
    throw new Error(`header read as ${c.rule} ${c.alignment} ${c.caseName}`);
  }
  if (c.config.coupling !== false || c.config.qkNorm !== "l2" || c.config.alignment !== "same-step") {
    throw new Error(`config read as ${JSON.stringify(c.config)}`);
  }
  assertClose("q", c.head.q, [1, 2, 3, 4, 5, 6], TOLERANCE.f64);
  assertClose("beta [T, d_v]", c.head.beta, [0.1, 1.1, 2.1, 3.1, 4.1, 5.1], TOLERANCE.f64);
  assertClose("starts (position 0 always a start)", c.head.starts, [1, 0, 1], TOLERANCE.f64);
  assertClose("s0", c.head.s0, [5, 6, 7, 8], TOLERANCE.f64);
  assertClose("dO", c.dO, [4, 5, 6, 7, 8, 9], TOLERANCE.f64);
  assertClose("expected S_final", c.expected.sFinal, [7, 8, 9, 10], TOLERANCE.f64);
  assertClose("expected grads.S0", c.expected.grads.S0, [11, 12, 13, 14], TOLERANCE.f64);
  if (c.head.carry !== undefined) throw new Error("a vector file has no carry");
});

Deno.test("parseVectorFile() fills absent S0 and starts, and reads the window and baseline params", () => {
  const json = sample("falcon3", { B: 3 });
  const inputs = json.inputs as Record<string, unknown>;
  delete inputs.S0;
  delete inputs.starts;
  const c = parseVectorFile("tiny.json", json);
  if (c.config.window !== 3) throw new Error(`window ${c.config.window}, expected 3`);
  if (c.head.s0.some((x) => x !== 0)) throw new Error("absent S0 must be zero");
  assertClose("starts", c.head.starts, [1, 0, 0], TOLERANCE.f64);
  const retnet = parseVectorFile("r.json", sample("retnet", { retnet_head: 2, retnet_g: retnetDecay(2) }));
  if (retnet.head.retnetG !== retnetDecay(2) || retnet.config.retnetHeads?.[0] !== 2) {
    throw new Error(`retnet head read as g = ${retnet.head.retnetG}`);
  }
  const mamba = parseVectorFile("m.json", sample("mamba2", { mamba_A: 0.25 }));
  if (mamba.head.mambaA !== 0.25 || mamba.config.mambaA?.[0] !== 0.25) throw new Error("mamba_A not read");
});

Deno.test("a row of the wrong length is named with its index and the size it should have", () => {
  const json = sample();
  (json.inputs as Record<string, number[][]>).q[1] = [1, 2, 3];
  expectError(json, "tiny.json: inputs.q[1] has 3 numbers, expected d_k = 2", RangeError);
});

Deno.test("a missing field is named by its path", () => {
  const json = sample();
  delete (json.grads as Record<string, unknown>).lambdabar;
  expectError(json, "tiny.json: grads.lambdabar is missing, expected a list of T = 3 numbers", TypeError);
  const noOutputs = sample();
  delete noOutputs.outputs;
  expectError(noOutputs, "tiny.json: outputs is missing, expected an object", TypeError);
});

Deno.test("a non-number entry is named with its full index", () => {
  const json = sample();
  (json.outputs as Record<string, unknown[][]>).o[2][1] = "1.5";
  expectError(json, 'tiny.json: outputs.o[2][1] is the string "1.5", expected a finite number', TypeError);
  const nan = sample();
  (nan.inputs as Record<string, unknown[]>).lambdabar[0] = null;
  expectError(nan, "tiny.json: inputs.lambdabar[0] is null, expected a finite number", TypeError);
});

Deno.test("wrong header values and params are rejected, naming the field", () => {
  expectError(
    { ...sample(), rule: "falcon9" },
    'tiny.json: rule is the string "falcon9", expected one of',
    RangeError,
  );
  expectError(
    { ...sample(), shape: { T: 0, d_k: 2, d_v: 2 } },
    "tiny.json: shape.T is 0, expected an integer >= 1",
    RangeError,
  );
  expectError(sample("falcon1", { qk_norm: "layer" }), "tiny.json: params.qk_norm is the string", RangeError);
  expectError(sample("falcon3", { B: 0 }), "tiny.json: params.B is 0, expected an integer >= 1", RangeError);
  expectError(
    sample("falcon1", { eps_gamma: 2 }),
    "tiny.json: params epsGamma must be in (0, 1)",
    RangeError,
  );
  expectError(sample("retnet", { retnet_head: 1, retnet_g: 0.5 }), "params.retnet_g is 0.5", RangeError);
  expectError(sample("falcon1", { coupling: "yes" }), "tiny.json: params.coupling is the string", TypeError);
  expectError([1, 2], "tiny.json: (top level) is an array, expected an object", TypeError);
});

Deno.test("per-column beta is required for falcon2 and a scalar beta for falcon1", () => {
  const json = sample("falcon2");
  (json.inputs as Record<string, unknown>).beta = [0.1, 0.2, 0.3];
  expectError(json, "tiny.json: inputs.beta[0] is number 0.1, expected a list of d_v = 2 numbers", TypeError);
  const scalar = sample("falcon1");
  (scalar.inputs as Record<string, unknown>).beta = rows(T, DV, 0);
  expectError(scalar, "tiny.json: inputs.beta[0] is an array, expected a finite number", TypeError);
});
