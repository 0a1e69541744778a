/**
 * Parse and validate one float64 test-vector file (`fixtures/vectors/README.md`) into the
 * per-head types of the reference forms. Pure: it takes the already-parsed JSON; reading files
 * belongs to the caller (the CLI, the tests).
 *
 * Every error names the file, the field path and what was wrong, e.g.
 * `falcon1__prefix__default.json: inputs.q[3] has 7 numbers, expected d_k = 8`.
 *
 * @module
 */

import {
  type Alignment,
  ALIGNMENTS,
  isPerColumnRule,
  QK_NORMS,
  type QkNorm,
  retnetDecay,
  type RuleConfig,
  ruleConfig,
  type RuleName,
  RULES,
} from "../rules/config.ts";
import type { HeadInputs } from "../rules/reference/head.ts";

/** The `format` tag this loader reads. */
export const VECTOR_FORMAT = "falcon-vector/1";

/** Gradients stored in a vector file (row-major, shapes as the inputs). */
export interface VectorGrads {
  /** `[T, d_k]`. */
  q: Float64Array;
  /** `[T, d_k]`. */
  k: Float64Array;
  /** `[T, d_v]`. */
  v: Float64Array;
  /** `[T]`, or `[T, d_v]` for falcon2/falcon2a. */
  beta: Float64Array;
  /** `[T]`. */
  lambdabar: Float64Array;
  /** `[d_k, d_v]`. */
  S0: Float64Array;
}

/** Per-step internals stored for debugging (Falcon rules only). */
export interface VectorAux {
  /** Write statistic `E*_t` `[T]`. */
  stat: Float64Array;
  /** Step size `[T]`, or `[T, d_v]` for falcon2/falcon2a. */
  eta: Float64Array;
  /** Decay after the clamp, shaped as `eta`. */
  gamma: Float64Array;
}

/** One parsed test vector. */
export interface VectorCase {
  /** The file name it was parsed under. */
  name: string;
  /** The rule. */
  rule: RuleName;
  /** The alignment. */
  alignment: Alignment;
  /** The case label (e.g. `default`), or `""` when absent. */
  caseName: string;
  /** The rule configuration the file's `params` describe. */
  config: RuleConfig;
  /** The head's inputs (position 0 flagged as a start; `s0` zero when the file has no S0). */
  head: HeadInputs;
  /** The output gradient `G` `[T, d_v]`: the loss is `sum(o * G)`. */
  dO: Float64Array;
  /** Expected results. */
  expected: {
    /** Readout `[T, d_v]`. */
    o: Float64Array;
    /** Final state `[d_k, d_v]`. */
    sFinal: Float64Array;
    /** Gradients of `sum(o * G)`. */
    grads: VectorGrads;
  };
  /** Per-step internals when the file has them. */
  aux?: VectorAux;
}

/** Where a value sits: the file and the field path, for error messages. */
interface At {
  file: string;
  path: string;
}

function field(at: At, key: string | number): At {
  const path = typeof key === "number" ? `${at.path}[${key}]` : at.path ? `${at.path}.${key}` : key;
  return { file: at.file, path };
}

function fail(at: At, problem: string, Err: typeof TypeError | typeof RangeError = TypeError): never {
  throw new Err(`${at.file}: ${at.path || "(top level)"} ${problem}`);
}

function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value.slice(0, 40))}`;
  return `${typeof value} ${typeof value === "object" ? "" : String(value)}`.trim();
}

function objectAt(at: At, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(at, `is ${describe(value)}, expected an object`);
  }
  return value as Record<string, unknown>;
}

function numberAt(at: At, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    fail(at, `is ${describe(value)}, expected a finite number`);
  }
  return value;
}

function integerAt(at: At, value: unknown, min: number): number {
  const n = numberAt(at, value);
  if (!Number.isInteger(n) || n < min) fail(at, `is ${n}, expected an integer >= ${min}`, RangeError);
  return n;
}

function choiceAt<T extends string>(at: At, value: unknown, choices: readonly T[]): T {
  if (typeof value !== "string" || !(choices as readonly string[]).includes(value)) {
    fail(at, `is ${describe(value)}, expected one of ${choices.join(", ")}`, RangeError);
  }
  return value as T;
}

/** A list of `n` numbers (`size` names `n` in messages, e.g. `T`). */
function vectorAt(at: At, value: unknown, n: number, size: string): Float64Array {
  if (!Array.isArray(value)) fail(at, `is ${describe(value)}, expected a list of ${size} = ${n} numbers`);
  if (value.length !== n) fail(at, `has ${value.length} numbers, expected ${size} = ${n}`, RangeError);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = numberAt(field(at, i), value[i]);
  return out;
}

/** A `rows x cols` nested list, flattened row-major. */
function matrixAt(
  at: At,
  value: unknown,
  rows: number,
  cols: number,
  rowSize: string,
  colSize: string,
): Float64Array {
  if (!Array.isArray(value)) {
    fail(at, `is ${describe(value)}, expected ${rowSize} = ${rows} rows of ${colSize} = ${cols} numbers`);
  }
  if (value.length !== rows) fail(at, `has ${value.length} rows, expected ${rowSize} = ${rows}`, RangeError);
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) out.set(vectorAt(field(at, r), value[r], cols, colSize), r * cols);
  return out;
}

/** Sequence-start flags: booleans (or 0/1). */
function startsAt(at: At, value: unknown, T: number): Uint8Array {
  if (!Array.isArray(value)) fail(at, `is ${describe(value)}, expected a list of T = ${T} booleans`);
  if (value.length !== T) fail(at, `has ${value.length} entries, expected T = ${T}`, RangeError);
  const out = new Uint8Array(T);
  value.forEach((flag, i) => {
    if (flag === true || flag === 1) out[i] = 1;
    else if (flag !== false && flag !== 0) fail(field(at, i), `is ${describe(flag)}, expected a boolean`);
  });
  return out;
}

/** Sizes of one file. */
interface Shape {
  T: number;
  dk: number;
  dv: number;
}

/** Readers for the arrays of one file, with its sizes and the rule's beta shape. */
function arrays(shape: Shape, perColumn: boolean) {
  const { T, dk, dv } = shape;
  return {
    byKey: (at: At, v: unknown) => matrixAt(at, v, T, dk, "T", "d_k"),
    byValue: (at: At, v: unknown) => matrixAt(at, v, T, dv, "T", "d_v"),
    perStep: (at: At, v: unknown) => vectorAt(at, v, T, "T"),
    beta: (at: At, v: unknown) => perColumn ? matrixAt(at, v, T, dv, "T", "d_v") : vectorAt(at, v, T, "T"),
    state: (at: At, v: unknown) => matrixAt(at, v, dk, dv, "d_k", "d_v"),
  };
}

/** Read `params` into a {@linkcode RuleConfig} and the head's baseline constants. */
function parseParams(at: At, value: unknown, rule: RuleName, alignment: Alignment) {
  const p = objectAt(at, value);
  const overrides: { -readonly [K in keyof RuleConfig]?: RuleConfig[K] } = { alignment };
  const optionalNumber = (key: string) => p[key] === undefined ? undefined : numberAt(field(at, key), p[key]);
  if (p.coupling !== undefined) {
    if (typeof p.coupling !== "boolean") {
      fail(field(at, "coupling"), `is ${describe(p.coupling)}, expected a boolean`);
    }
    overrides.coupling = p.coupling;
  }
  if (p.qk_norm !== undefined) overrides.qkNorm = choiceAt<QkNorm>(field(at, "qk_norm"), p.qk_norm, QK_NORMS);
  const eps = optionalNumber("eps");
  const epsGamma = optionalNumber("eps_gamma");
  const epsRms = optionalNumber("eps_rms");
  if (eps !== undefined) overrides.eps = eps;
  if (epsGamma !== undefined) overrides.epsGamma = epsGamma;
  if (epsRms !== undefined) overrides.epsRms = epsRms;
  if (p.B !== undefined) overrides.window = integerAt(field(at, "B"), p.B, 1);
  let mambaA = 1;
  if (p.mamba_A !== undefined) {
    mambaA = numberAt(field(at, "mamba_A"), p.mamba_A);
    if (!(mambaA > 0)) fail(field(at, "mamba_A"), `is ${mambaA}, expected > 0`, RangeError);
    overrides.mambaA = [mambaA];
  }
  let retnetHead = 0;
  if (p.retnet_head !== undefined) {
    retnetHead = integerAt(field(at, "retnet_head"), p.retnet_head, 0);
    overrides.retnetHeads = [retnetHead];
  }
  const retnetG = retnetDecay(retnetHead);
  const storedG = optionalNumber("retnet_g");
  if (storedG !== undefined && Math.abs(storedG - retnetG) > 1e-15) {
    fail(field(at, "retnet_g"), `is ${storedG}, but retnet_head ${retnetHead} gives ${retnetG}`, RangeError);
  }
  let config: RuleConfig;
  try {
    config = ruleConfig(rule, overrides);
  } catch (e) {
    fail(at, (e as Error).message, RangeError);
  }
  return { config, mambaA, retnetG };
}

/**
 * Parse one vector file's JSON. `name` (the file name) prefixes every error message.
 * Throws a `TypeError` (wrong type) or `RangeError` (wrong size or value) naming the field.
 */
export function parseVectorFile(name: string, json: unknown): VectorCase {
  const top: At = { file: name, path: "" };
  const root = objectAt(top, json);
  if (root.format !== undefined && root.format !== VECTOR_FORMAT) {
    fail(field(top, "format"), `is ${describe(root.format)}, expected "${VECTOR_FORMAT}"`, RangeError);
  }
  const rule = choiceAt<RuleName>(field(top, "rule"), root.rule, RULES);
  const alignment = choiceAt<Alignment>(field(top, "alignment"), root.alignment, ALIGNMENTS);
  const caseName = root.case === undefined ? "" : String(root.case);
  const shapeAt = field(top, "shape");
  const shapeObj = objectAt(shapeAt, root.shape);
  const shape: Shape = {
    T: integerAt(field(shapeAt, "T"), shapeObj.T, 1),
    dk: integerAt(field(shapeAt, "d_k"), shapeObj.d_k, 1),
    dv: integerAt(field(shapeAt, "d_v"), shapeObj.d_v, 1),
  };
  const { config, mambaA, retnetG } = parseParams(field(top, "params"), root.params, rule, alignment);
  const read = arrays(shape, isPerColumnRule(rule));

  const inAt = field(top, "inputs");
  const inputs = objectAt(inAt, root.inputs);
  const starts = inputs.starts === undefined
    ? new Uint8Array(shape.T)
    : startsAt(field(inAt, "starts"), inputs.starts, shape.T);
  starts[0] = 1; // position 0 is always a sequence start
  const head: HeadInputs = {
    T: shape.T,
    dk: shape.dk,
    dv: shape.dv,
    q: read.byKey(field(inAt, "q"), inputs.q),
    k: read.byKey(field(inAt, "k"), inputs.k),
    v: read.byValue(field(inAt, "v"), inputs.v),
    beta: read.beta(field(inAt, "beta"), inputs.beta),
    lambdabar: read.perStep(field(inAt, "lambdabar"), inputs.lambdabar),
    starts,
    s0: inputs.S0 === undefined
      ? new Float64Array(shape.dk * shape.dv)
      : read.state(field(inAt, "S0"), inputs.S0),
    mambaA,
    retnetG,
  };
  const dO = read.byValue(field(inAt, "G"), inputs.G);

  const outAt = field(top, "outputs");
  const outputs = objectAt(outAt, root.outputs);
  const gradAt = field(top, "grads");
  const grads = objectAt(gradAt, root.grads);
  const expected = {
    o: read.byValue(field(outAt, "o"), outputs.o),
    sFinal: read.state(field(outAt, "S_final"), outputs.S_final),
    grads: {
      q: read.byKey(field(gradAt, "q"), grads.q),
      k: read.byKey(field(gradAt, "k"), grads.k),
      v: read.byValue(field(gradAt, "v"), grads.v),
      beta: read.beta(field(gradAt, "beta"), grads.beta),
      lambdabar: read.perStep(field(gradAt, "lambdabar"), grads.lambdabar),
      S0: read.state(field(gradAt, "S0"), grads.S0),
    },
  };

  let aux: VectorAux | undefined;
  if (root.aux !== undefined) {
    const auxAt = field(top, "aux");
    const a = objectAt(auxAt, root.aux);
    aux = {
      stat: read.perStep(field(auxAt, "stat"), a.stat),
      eta: read.beta(field(auxAt, "eta"), a.eta),
      gamma: read.beta(field(auxAt, "gamma"), a.gamma),
    };
  }
  return { name, rule, alignment, caseName, config, head, dO, expected, aux };
}
