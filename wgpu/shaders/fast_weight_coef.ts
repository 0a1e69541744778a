/**
 * WGSL of the per-step coefficients of every rule and their backward (SPEC sections 3 and 6).
 *
 * Every rule step is written as `S_t = gamma S_{t-1} + sum_o x_o (b y_o - a p_o)^T` with
 * `p_o = S_{t-1}^T x_o` over the `n` window pairs of the step (`n <= 1` outside Falcon-3/3A);
 * `gamma, a, b` are per value column for falcon2/falcon2a, scalars otherwise. `coef()` maps
 * `(n, stat, beta, lambdabar)` to them; `coef_back()` maps `(dgamma, da, db)` back to
 * `(dbeta, dlambdabar, dstat)`. It is linear in its inputs, so per-column contributions of a
 * scalar rule may be summed after the call.
 *
 * @module
 */

import {
  type BaselineRuleName,
  isDeltaRule,
  isFalconRule,
  type RuleConfig,
  type RuleName,
  UnknownRuleError,
  type WriteStatistic,
  writeStatistic,
} from "../../src/rules/config.ts";

/** WGSL float literal of a number. */
export function f32Literal(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError(`not a finite f32 constant: ${x}`);
  const s = x.toPrecision(9);
  return s.includes(".") || s.includes("e") ? s : `${s}.0`;
}

/** Per-head constants a rule reads (Mamba-2 `A_h`, RetNet `g_h`). */
export interface HeadConstants {
  /** Mamba-2 `A_h` per head. */
  readonly mambaA: readonly number[];
  /** RetNet decay `g_h` per head. */
  readonly retnetG: readonly number[];
}

/** `stat` kind of the Falcon rules: `E` (rules 1/2/1A/2A), `Ebar` (3A) or `mu` (3); `none` for baselines. */
export type StatKind = WriteStatistic;

/** The statistic a rule's step size uses (the catalog's `statistic`). */
export function statKind(rule: RuleName): StatKind {
  return writeStatistic(rule);
}

/** WGSL `struct Co`, `fn coef(n, stat, beta, lb, h) -> Co` and `fn coef_back(...) -> vec3<f32>`. */
export function coefficientWgsl(config: RuleConfig, heads: HeadConstants): string {
  const header = `
struct Co { gamma: f32, a: f32, b: f32, eta: f32, lam: f32, den: f32, stat: f32, n: f32, clamped: bool, noop: bool }
fn co_noop() -> Co { return Co(1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, false, true); }
const MAMBA_A = array<f32, ${heads.mambaA.length}>(${heads.mambaA.map(f32Literal).join(", ")});
const RETNET_G = array<f32, ${heads.retnetG.length}>(${heads.retnetG.map(f32Literal).join(", ")});
`;
  const rule = config.rule;
  if (isFalconRule(rule)) {
    const additive = !isDeltaRule(rule);
    const eg = f32Literal(config.epsGamma);
    return header + `
fn coef(n: u32, stat: f32, beta: f32, lb: f32, h: u32) -> Co {
  if (n == 0u || stat == 0.0) { return co_noop(); }
  let lam = ${config.coupling ? "lb * stat" : "lb"};
  let den = stat + lam + ${f32Literal(config.eps)};
  let eta = beta / den;
  let araw = eta * lam;
  let clamped = araw > 1.0 - ${eg};
  let gamma = select(1.0 - araw, ${eg}, clamped);
  let nf = f32(n);
  let g = eta / nf;
  return Co(gamma, ${additive ? "0.0" : "g"}, g, eta, lam, den, stat, nf, clamped, false);
}
fn coef_back(c: Co, dgamma: f32, da: f32, db: f32) -> vec3<f32> {
  if (c.noop) { return vec3<f32>(0.0); }
  var deta = (${additive ? "db" : "da + db"}) / c.n;
  var dlam = 0.0;
  if (!c.clamped) {
    let dar = -dgamma;
    deta += dar * c.lam;
    dlam = dar * c.eta;
  }
  let dden = -deta * c.eta / c.den;
  dlam += dden;
  return vec3<f32>(deta / c.den, ${config.coupling ? "dlam * c.stat" : "dlam"}, dden);
}`;
  }
  const bodies: Record<BaselineRuleName, [string, string]> = {
    linear: ["return Co(1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, false, false);", "return vec3<f32>(0.0);"],
    retnet: [
      "return Co(RETNET_G[h], 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, false, false);",
      "return vec3<f32>(0.0);",
    ],
    mamba2: [
      "let gm = exp(-beta * MAMBA_A[h]);\n  return Co(gm, 0.0, beta, MAMBA_A[h], 0.0, 1.0, 0.0, 1.0, false, false);",
      "return vec3<f32>(db - dgamma * c.eta * c.gamma, 0.0, 0.0);",
    ],
    deltanet: [
      "return Co(1.0, beta, beta, 0.0, 0.0, 1.0, 0.0, 1.0, false, false);",
      "return vec3<f32>(da + db, 0.0, 0.0);",
    ],
    gated_deltanet: [
      "let ag = exp(-lb);\n  return Co(ag, ag * beta, beta, beta, 0.0, 1.0, 0.0, 1.0, false, false);",
      "let dag = dgamma + da * c.eta;\n  return vec3<f32>(da * c.gamma + db, -dag * c.gamma, 0.0);",
    ],
  };
  if (!Object.hasOwn(bodies, rule)) throw new UnknownRuleError(rule, "rule of coefficientWgsl");
  const [fwd, back] = bodies[rule];
  return header + `
fn coef(n: u32, stat: f32, beta: f32, lb: f32, h: u32) -> Co {
  if (n == 0u) { return co_noop(); }
  ${fwd}
}
fn coef_back(c: Co, dgamma: f32, da: f32, db: f32) -> vec3<f32> {
  if (c.noop) { return vec3<f32>(0.0); }
  ${back}
}`;
}
