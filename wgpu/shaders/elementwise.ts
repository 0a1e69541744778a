/**
 * WGSL of the element-wise kernels: fill, add, mul, axpy, activations, SwiGLU and AdamW.
 * One invocation per element `idx < n`; every kernel reads its sizes and scalars from a uniform
 * block `u` (`n` first), so one pipeline serves every shape.
 *
 * @module
 */

import { FLAT_PARAMS, flatIndex } from "../runtime.ts";

/** Workgroup width of the element-wise kernels. */
export const ELEMENTWISE_WG = 256;

/** A storage binding of an element-wise kernel. */
export interface ElementBinding {
  /** WGSL name. */
  readonly name: string;
  /** `read` or `read_write`. */
  readonly access: "read" | "read_write";
}

/**
 * An element-wise kernel: storage bindings at `0..`, then the uniform block `u` with `n: u32`
 * followed by `fields` (f32 unless typed), and `body` run for each `idx < u.n`.
 */
export function elementwiseShader(
  bindings: readonly ElementBinding[],
  fields: readonly string[],
  body: string,
  helpers = "",
): string {
  const decl = bindings.map((b, i) =>
    `@group(0) @binding(${i}) var<storage, ${b.access}> ${b.name}: array<f32>;`
  );
  const uniformFields = ["n: u32", ...fields.map((f) => (f.includes(":") ? f : `${f}: f32`))];
  return `
${decl.join("\n")}
struct Params { ${uniformFields.join(", ")} }
@group(0) @binding(${bindings.length}) var<uniform> u: Params;
${helpers}
@compute @workgroup_size(${ELEMENTWISE_WG})
fn main(${FLAT_PARAMS}) {
  ${flatIndex(ELEMENTWISE_WG)}
  if (idx >= u.n) { return; }
  ${body}
}`;
}

/**
 * WGSL of `out[i] += value` where the uniform flag `fresh` may say that `out` holds zeros (its clear was
 * taken: `GpuRuntime.takeClear`): then the kernel adds `value` to 0 instead of reading `out`, the same
 * addition the zeroed buffer would give.
 */
export function accumulateInto(out: string, i: string, value: string, fresh: string): string {
  return `{ var prior = 0.0; if (${fresh} == 0u) { prior = ${out}[${i}]; } ${out}[${i}] = prior + ${value}; }`;
}

/** WGSL helpers: numerically stable sigmoid, softplus and SiLU with their derivatives. */
export const ACTIVATION_HELPERS = `
fn sigmoid_f(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
fn softplus_f(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  return max(x, 0.0) + log(1.0 + exp(-abs(x)));
}
fn silu_f(x: f32) -> f32 { return x * sigmoid_f(x); }
fn dsilu_f(x: f32) -> f32 { let s = sigmoid_f(x); return s * (1.0 + x * (1.0 - s)); }
fn dsigmoid_f(x: f32) -> f32 { let s = sigmoid_f(x); return s * (1.0 - s); }
`;

const RW = "read_write" as const;
const R = "read" as const;

/** `x[idx] = value`. */
export function fillShader(): string {
  return elementwiseShader([{ name: "x", access: RW }], ["value"], "x[idx] = u.value;");
}

/** `out = a + b` or `out = a * b`. */
export function binaryShader(op: "add" | "mul"): string {
  const sym = op === "add" ? "+" : "*";
  return elementwiseShader(
    [{ name: "out_", access: RW }, { name: "a", access: R }, { name: "b", access: R }],
    [],
    `out_[idx] = a[idx] ${sym} b[idx];`,
  );
}

/** `y += alpha * x`. */
export function axpyShader(): string {
  return elementwiseShader(
    [{ name: "y", access: RW }, { name: "x", access: R }],
    ["alpha"],
    "y[idx] += u.alpha * x[idx];",
  );
}

/**
 * Forward (`out = scale * f(x)`) or backward (`dx += dOut * scale * f'(x)`, uniform flag `fresh`:
 * {@linkcode accumulateInto}) of an activation.
 */
export function activationShader(
  kind: "sigmoid" | "softplus" | "silu",
  pass: "forward" | "backward",
): string {
  const f = { sigmoid: "sigmoid_f", softplus: "softplus_f", silu: "silu_f" }[kind];
  const df = { sigmoid: "dsigmoid_f", softplus: "sigmoid_f", silu: "dsilu_f" }[kind];
  if (pass === "forward") {
    return elementwiseShader(
      [{ name: "out_", access: RW }, { name: "x", access: R }],
      ["scale"],
      `out_[idx] = u.scale * ${f}(x[idx]);`,
      ACTIVATION_HELPERS,
    );
  }
  return elementwiseShader(
    [{ name: "dx", access: RW }, { name: "dout", access: R }, { name: "x", access: R }],
    ["scale", "fresh: u32"],
    accumulateInto("dx", "idx", `(dout[idx] * u.scale * ${df}(x[idx]))`, "u.fresh"),
    ACTIVATION_HELPERS,
  );
}

/** SwiGLU forward `out = silu(gate) * up`. */
export function swigluForwardShader(): string {
  return elementwiseShader(
    [{ name: "out_", access: RW }, { name: "gate", access: R }, { name: "up", access: R }],
    [],
    "out_[idx] = silu_f(gate[idx]) * up[idx];",
    ACTIVATION_HELPERS,
  );
}

/**
 * SwiGLU backward: `dGate += dOut * up * silu'(gate)`, `dUp += dOut * silu(gate)` (uniform flags
 * `freshGate`, `freshUp`: {@linkcode accumulateInto}).
 */
export function swigluBackwardShader(): string {
  return elementwiseShader(
    [
      { name: "dgate", access: RW },
      { name: "dup", access: RW },
      { name: "dout", access: R },
      { name: "gate", access: R },
      { name: "up", access: R },
    ],
    ["freshGate: u32", "freshUp: u32"],
    `let g = gate[idx];
  let d = dout[idx];
  ${accumulateInto("dgate", "idx", "(d * up[idx] * dsilu_f(g))", "u.freshGate")}
  ${accumulateInto("dup", "idx", "(d * silu_f(g))", "u.freshUp")}`,
    ACTIVATION_HELPERS,
  );
}

/**
 * One AdamW step (decoupled decay): `g = gradScale * grad`, moments updated, then
 * `param -= lr * (mhat / (sqrt(vhat) + eps) + wd * param)` with `wd = 0` when decay is off.
 * Bias corrections `c1 = 1 - beta1^step`, `c2 = 1 - beta2^step` come from the host. The values that
 * change every step (`lr, c1, c2, gradScale, normScale`) are read from the storage buffer `hyper`,
 * written once per step, so the uniform block (and with it the bind group) stays the same.
 *
 * `guarded` (a device-resident training step, `StepGuard` of the kernel interface): two more
 * bindings, `stats = [loss sum, sum of squared gradients]` and the sticky `halted` flag. When the
 * flag is set or a statistic is not finite, nothing changes and the flag is set; otherwise `g` is
 * also multiplied by the clipping factor of the norm `sqrt(stats[1]) * normScale`.
 *
 * `blocked` (AdamW over every tensor of a block at once, `wgpu/multi_tensor.ts`): the buffers are whole
 * blocks, one more binding `decay` holds 1 or 0 per aligned run of `u.chunk` elements (each run lies in
 * one tensor, whose weight decay it gives), and `wd` is `u.wd` or 0 from it; the arithmetic per element
 * is the same as one dispatch per tensor.
 */
export function adamwShader(guarded = false, blocked = false): string {
  const wd = blocked ? "wd" : "u.wd";
  const update = `let mi = u.beta1 * m[idx] + (1.0 - u.beta1) * g;
  let vi = u.beta2 * v[idx] + (1.0 - u.beta2) * g * g;
  m[idx] = mi;
  v[idx] = vi;
  let p = param[idx];
  param[idx] = p - hyper[0] * ((mi / hyper[1]) / (sqrt(vi / hyper[2]) + u.eps) + ${wd} * p);`;
  const bindings: ElementBinding[] = [
    { name: "param", access: RW },
    { name: "grad", access: R },
    { name: "m", access: RW },
    { name: "v", access: RW },
    { name: "hyper", access: R },
  ];
  const fields = ["beta1", "beta2", "eps", "wd"];
  // over a block: the weight decay of each aligned run of `chunk` elements (one tensor's) from `decay`
  const decayBinding: ElementBinding[] = blocked ? [{ name: "decay", access: R }] : [];
  const decayField = blocked ? ["chunk: u32"] : [];
  const decayLine = blocked ? "let wd = select(0.0, u.wd, decay[idx / u.chunk] != 0.0);\n  " : "";
  if (!guarded) {
    return elementwiseShader(
      [...bindings, ...decayBinding],
      [...fields, ...decayField],
      `${decayLine}let g = grad[idx] * hyper[3];\n  ${update}`,
    );
  }
  return elementwiseShader(
    [...bindings, { name: "stats", access: R }, { name: "halted", access: RW }, ...decayBinding],
    [...fields, "clipNorm", ...decayField],
    `let loss = stats[0];
  let squares = stats[1];
  if (halted[0] != 0.0 || !finite_f(loss) || !finite_f(squares)) {
    halted[0] = 1.0;
    return;
  }
  let norm = sqrt(squares) * hyper[4];
  var clip = 1.0;
  if (u.clipNorm > 0.0 && norm > u.clipNorm) { clip = u.clipNorm / norm; }
  ${decayLine}let g = grad[idx] * hyper[3] * clip;
  ${update}`,
    "fn finite_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }",
  );
}
