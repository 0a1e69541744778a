/**
 * WGSL of the recurrent fast-weight kernels, forward and backward, for every rule (float32):
 * `fastweight_recurrent_forward_f32` and `fastweight_recurrent_backward_f32`.
 *
 * Recurrence (see `fast_weight_coef.ts`): `S_t = gamma S_{t-1} + sum_o x_o (b y_o - a p_o)^T`,
 * `p_o = S_{t-1}^T x_o`, readout `o_t = S_t^T q_t`, over the `n_t = t - lo_t + 1` pairs
 * `t, t-1, .., lo_t` of the step (window rules; `n_t <= 1` otherwise; `n_t = 0` is the sentinel).
 *
 * Layout: one workgroup per `(b, h)`, `Dv` invocations; invocation `j` holds column `j` of `S`
 * (and of `dS`) in registers. Forward sweeps stage `L` steps of features and queries in workgroup
 * memory at once and compute the steps' statistics in parallel (no barrier per step); the reverse
 * sweep stages one step at a time, its global reads fetched one step ahead.
 * Preconditions: `Dv <= maxComputeInvocationsPerWorkgroup`, `B*H <= 65535`, window `W >= 1`.
 * Every loop over a compile-time size is unrolled (naga's loop-bounding counters otherwise keep
 * drivers from promoting the register arrays; llvmpipe also caps loop iterations per invocation).
 * Shapes (`BH = B*H`, `XR = W-1 + T + 1`, `YR = W-1 + T`, pair `p` at row `W-1+p`):
 * - `ws`: `QN [BH, T, Dk]`, `X [BH, XR, Dk]` (normalised write features), `Y [BH, YR, Dv]`;
 * - `stepinfo`: `[B, T, 2]` i32 = (`lo_t`, reset flag), computed on the host from starts and carry;
 * - `beta [B, T, H]` or `[B, T, H, Dv]`, `lb [B, T, H]`, `s0`/`init` `[BH, Dk, Dv]`.
 * Backward: forward recompute storing `S` every `CK` steps (`work`: checkpoints `[BH, NCK, Dk, Dv]`,
 * then per-chunk states `[BH, CK, Dk, Dv]`), then a reverse sweep chunk by chunk. Row vectors
 * (`dq`, `dx_o`) are reduced over columns through workgroup memory in blocks of `RB` rows.
 * Gradient workspace `g` (zeroed by the host): `DQ [BH,T,Dk]`, `DX [BH,XR,Dk]`, `DY [BH,YR,Dv]`,
 * `DB [BH,T,BW]`, `DLB [BH,T]`, `DS0 [BH,Dk,Dv]`, `DC [BH,Dk,Dv]`.
 *
 * @module
 */

import { isPerColumnRule, isWindowRule, type RuleConfig } from "../../src/rules/config.ts";
import { coefficientWgsl, type HeadConstants, statKind } from "./fast_weight_coef.ts";

/** Compile-time shape of a recurrent kernel. */
export interface RecurrentShape {
  /** Heads. */
  readonly H: number;
  /** Key size. */
  readonly dk: number;
  /** Value size (= workgroup size). */
  readonly dv: number;
  /** Checkpoint interval of the backward pass. */
  readonly ck: number;
  /** Rows per block of the workgroup reduction (backward). */
  readonly rb: number;
  /** Steps staged in workgroup memory at once by the forward sweeps. */
  readonly l: number;
}

/** Window slots `NW` of a rule (its `window` for Falcon-3/3A, 1 otherwise). */
export function windowSlots(config: RuleConfig): number {
  return isWindowRule(config.rule) ? config.window : 1;
}

/** Pipeline key of a recurrent kernel. */
export function recurrentKey(pass: string, config: RuleConfig, shape: RecurrentShape, heads: HeadConstants) {
  return [
    `fastweight_recurrent_${pass}_f32`,
    config.rule,
    config.coupling,
    config.eps,
    config.epsGamma,
    windowSlots(config),
    shape.H,
    shape.dk,
    shape.dv,
    shape.ck,
    shape.rb,
    shape.l,
    heads.mambaA.join(","),
    heads.retnetG.join(","),
  ].join(":");
}

/** Workgroup floats of the recurrent kernels other than the reduction buffer. */
export function recurrentSharedFloats(config: RuleConfig, shape: RecurrentShape): number {
  const nw = windowSlots(config);
  const block = (shape.l + nw - 1) * shape.dk + shape.l * shape.dk + shape.l * (nw + 1);
  return nw * shape.dk + shape.dk + nw * nw + nw + 2 + 3 * shape.dv + 8 + block;
}

/** `n` copies of `f(i)` joined by `sep` (loops over compile-time sizes are unrolled). */
function unroll(n: number, f: (i: number) => string, sep = "\n"): string {
  return Array.from({ length: n }, (_, i) => f(i)).join(sep);
}

/** An unrolled sum expression `f(0) + .. + f(n-1)` (`0.0` when empty). */
function sum(n: number, f: (i: number) => string): string {
  return n === 0 ? "0.0" : unroll(n, f, " + ");
}

function common(config: RuleConfig, shape: RecurrentShape, heads: HeadConstants): string {
  const nw = windowSlots(config);
  const dk = shape.dk;
  const stat = statKind(config.rule);
  const bw = isPerColumnRule(config.rule) ? shape.dv : 1;
  const lx = Math.ceil((nw * dk) / shape.dv);
  const lq = Math.ceil(dk / shape.dv);
  const statCode = stat === "none" ? "" : `
  // Gram matrix of the window features (zero outside the n x n block), then the statistic
  for (var e = j; e < NW * NW; e += DV) {
    let r = e / NW;
    let c = e % NW;
    var s = 0.0;
    if (r < n && c < n) { s = ${sum(dk, (i) => `xs[r * DK + ${i}u] * xs[c * DK + ${i}u]`)}; }
    gram[e] = s;
  }
  workgroupBarrier();
  // every invocation computes the statistic; invocation 0 publishes it
  let st = stat_of(n, gram);
  if (j == 0u) {
    eig[0] = st.value;
    ${unroll(nw, (o) => `eig[${1 + o}] = st.u[${o}];`)}
  }
  workgroupBarrier();`;
  const statFn = {
    E: "fn stat_of(n: u32, gram: array<f32, NW2>) -> Stat { var st = Stat(); if (n > 0u) { st.value = gram[0]; } return st; }",
    Ebar: `fn stat_of(n: u32, gram: array<f32, NW2>) -> Stat {
  var st = Stat();
  if (n == 0u) { return st; }
  st.value = (${sum(nw, (o) => `gram[${o * nw + o}]`)}) / f32(n);
  return st;
}`,
    mu: topEigenWgsl(nw),
    none: "",
  }[stat];
  return `
const DK = ${dk}u;
const DV = ${shape.dv}u;
const NW = ${nw}u;
const PAD = ${nw - 1}u;
const H = ${shape.H}u;
const BW = ${bw}u;
const CK = ${shape.ck}u;
const LX = ${lx}u;
const NW2 = ${nw * nw}u;
const L = ${shape.l}u;
const LQ = ${lq}u;
struct U { B: u32, T: u32, hasS0: u32, hasInit: u32 }
struct Stat { value: f32, u: array<f32, ${nw}> }
var<workgroup> xs: array<f32, ${nw * dk}>;
var<workgroup> qs: array<f32, DK>;
var<workgroup> gram: array<f32, ${nw * nw}>;
var<workgroup> eig: array<f32, ${nw + 1}>;
// block staging of the forward sweeps: feature rows tb-(NW-1) .. tb+L-1, query rows, per-step statistics
var<workgroup> xb: array<f32, ${(shape.l + nw - 1) * dk}>;
var<workgroup> qb: array<f32, ${shape.l * dk}>;
var<workgroup> statb: array<f32, ${shape.l}>;
var<workgroup> eigb: array<f32, ${shape.l * nw}>;
${coefficientWgsl(config, heads)}
${statFn}
fn qn_at(bh: u32, t: u32, i: u32) -> f32 { return ws[(bh * u.T + t) * DK + i]; }
fn x_at(bh: u32, row: u32, i: u32) -> f32 { return ws[u.B * H * u.T * DK + (bh * (PAD + u.T + 1u) + row) * DK + i]; }
fn y_at(bh: u32, row: u32, j: u32) -> f32 {
  return ws[u.B * H * (u.T * DK + (PAD + u.T + 1u) * DK) + (bh * (PAD + u.T) + row) * DV + j];
}
fn beta_at(b: u32, t: u32, h: u32, j: u32) -> f32 { return beta[((b * u.T + t) * H + h) * BW + ${
    bw > 1 ? "j" : "0u"
  }]; }
fn lb_at(b: u32, t: u32, h: u32) -> f32 { return lb[(b * u.T + t) * H + h]; }

// Everything step t reads from global memory, fetched one step ahead so that the loads overlap
// the previous step's arithmetic: (lo_t, reset_t), this invocation's share of the window features
// and of q, its column of the window targets, beta and lambdabar.
struct Fetch { lo: i32, reset: i32, x: array<f32, LX>, q: array<f32, LQ>, y: array<f32, NW>, beta: f32, lb: f32 }
fn fetch(b: u32, bh: u32, h: u32, t: u32, j: u32) -> Fetch {
  var f = Fetch();
  f.lo = stepinfo[(b * u.T + t) * 2u];
  f.reset = stepinfo[(b * u.T + t) * 2u + 1u];
  ${
    unroll(lx, (k) =>
      `{ let e = j + ${
        k * shape.dv
      }u; if (e < NW * DK) { f.x[${k}] = x_at(bh, PAD + t - e / DK, e % DK); } }`, "\n  ")
  }
  ${
    unroll(lq, (k) =>
      `{ let i = j + ${k * shape.dv}u; if (i < DK) { f.q[${k}] = qn_at(bh, t, i); } }`, "\n  ")
  }
  ${unroll(nw, (o) => `f.y[${o}] = y_at(bh, PAD + t - ${o}u, j);`, "\n  ")}
  f.beta = beta_at(b, t, h, j);
  f.lb = lb_at(b, t, h);
  return f;
}
// The per-step global reads of the block sweeps (features and queries are staged per block).
struct StepIn { lo: i32, reset: i32, y: array<f32, NW>, beta: f32, lb: f32 }
fn fetch_small(b: u32, bh: u32, h: u32, t: u32, j: u32) -> StepIn {
  var f = StepIn();
  f.lo = stepinfo[(b * u.T + t) * 2u];
  f.reset = stepinfo[(b * u.T + t) * 2u + 1u];
  ${unroll(nw, (o) => `f.y[${o}] = y_at(bh, PAD + t - ${o}u, j);`, "\n  ")}
  f.beta = beta_at(b, t, h, j);
  f.lb = lb_at(b, t, h);
  return f;
}
${
    stat === "none"
      ? ""
      : `// Statistic of block step l from the staged features (pair t-o is staged row l + NW-1-o).
fn block_stat(l: u32, n: u32) -> Stat {
  var gm: array<f32, NW2>;
  ${
        unroll(nw, (r) =>
          unroll(nw - r, (c0) => {
            const c = r + c0;
            const dot = sum(
              dk,
              (i) => `xb[(l + ${nw - 1 - r}u) * DK + ${i}u] * xb[(l + ${nw - 1 - c}u) * DK + ${i}u]`,
            );
            return `if (${c}u < n) { let v = ${dot}; gm[${r * nw + c}] = v; gm[${c * nw + r}] = v; }`;
          }, "\n  "), "\n  ")
      }
  return stat_of(n, gm);
}`
  }
// Pair count of step t (0 at the prefix sentinel).
fn pairs_of(f: Fetch, t: u32) -> u32 { return u32(max(i32(t) - f.lo + 1, 0)); }
// Stage a fetched step in workgroup memory and compute its statistic (all invocations call it).
fn stage(f: Fetch, n: u32, j: u32) {
  workgroupBarrier();
  ${unroll(lx, (k) => `{ let e = j + ${k * shape.dv}u; if (e < NW * DK) { xs[e] = f.x[${k}]; } }`, "\n  ")}
  ${unroll(lq, (k) => `{ let i = j + ${k * shape.dv}u; if (i < DK) { qs[i] = f.q[${k}]; } }`, "\n  ")}
  workgroupBarrier();
  ${statCode}
}
fn stat_now() -> f32 { ${stat === "none" ? "return 0.0;" : "return eig[0];"} }
`;
}

/**
 * WGSL `stat_of(n)` for Falcon-3: `mu = lambda_max(G) / n` and the unit top eigenvector of the
 * window Gram matrix `G` (zero-padded to `NW x NW`, which leaves the top pair unchanged): closed
 * form for `NW <= 2`, otherwise a fixed number of cyclic Jacobi sweeps, fully unrolled.
 */
export function topEigenWgsl(nw: number): string {
  if (nw === 1) {
    return "fn stat_of(n: u32, gram: array<f32, NW2>) -> Stat { var st = Stat(); if (n > 0u) { st.value = gram[0]; st.u[0] = 1.0; } return st; }";
  }
  if (nw === 2) {
    return `
fn stat_of(n: u32, gram: array<f32, NW2>) -> Stat {
  var st = Stat();
  if (n == 0u) { return st; }
  let p = gram[0];
  let r = gram[1];
  let s = gram[3];
  let val = 0.5 * (p + s) + sqrt(0.25 * (p - s) * (p - s) + r * r);
  var u0 = r;
  var u1 = val - p;
  if (p >= s) { u0 = val - s; u1 = r; }
  let len = sqrt(u0 * u0 + u1 * u1);
  if (len == 0.0) { st.u[0] = 1.0; } else { st.u[0] = u0 / len; st.u[1] = u1 / len; }
  st.value = val / f32(n);
  return st;
}`;
  }
  const rot = (p: number, q: number) => `
    {
      let apq = m[${p * nw + q}];
      let app = m[${p * nw + p}];
      let aqq = m[${q * nw + q}];
      let skip = abs(apq) <= 1e-7 * (abs(app) + abs(aqq));
      let theta = (aqq - app) / (2.0 * select(apq, 1.0, skip));
      let sg = select(1.0, -1.0, theta < 0.0);
      let tt = select(sg / (abs(theta) + sqrt(theta * theta + 1.0)), 0.0, skip);
      let cs = 1.0 / sqrt(tt * tt + 1.0);
      let sn = tt * cs;
      ${
    unroll(nw, (k) =>
      `{ let a = m[${k * nw + p}]; let b = m[${k * nw + q}]; m[${k * nw + p}] = cs * a - sn * b; m[${
        k * nw + q
      }] = sn * a + cs * b; }`)
  }
      ${
    unroll(nw, (k) =>
      `{ let a = m[${p * nw + k}]; let b = m[${q * nw + k}]; m[${p * nw + k}] = cs * a - sn * b; m[${
        q * nw + k
      }] = sn * a + cs * b; }`)
  }
      ${
    unroll(nw, (k) =>
      `{ let a = v[${k * nw + p}]; let b = v[${k * nw + q}]; v[${k * nw + p}] = cs * a - sn * b; v[${
        k * nw + q
      }] = sn * a + cs * b; }`)
  }
      m[${p * nw + q}] = 0.0;
      m[${q * nw + p}] = 0.0;
    }`;
  const pairs: string[] = [];
  for (let p = 0; p < nw - 1; p++) for (let q = p + 1; q < nw; q++) pairs.push(rot(p, q));
  return `
fn stat_of(n: u32, gram: array<f32, NW2>) -> Stat {
  var st = Stat();
  if (n == 0u) { return st; }
  var m: array<f32, ${nw * nw}>;
  var v: array<f32, ${nw * nw}>;
  ${unroll(nw * nw, (e) => `m[${e}] = gram[${e}]; v[${e}] = ${e % (nw + 1) === 0 ? "1.0" : "0.0"};`)}
  // cyclic Jacobi, fixed sweep count (convergence is quadratic); negligible pivots rotate by identity
  for (var sweep = 0u; sweep < 10u; sweep++) {
    ${pairs.join("\n")}
  }
  var best = m[0];
  ${unroll(nw, (a) => `st.u[${a}] = v[${a * nw}];`)}
  ${
    unroll(nw - 1, (c0) => {
      const c = c0 + 1;
      return `if (m[${c * nw + c}] > best) { best = m[${c * nw + c}]; ${
        unroll(nw, (a) => `st.u[${a}] = v[${a * nw + c}];`, " ")
      } }`;
    })
  }
  st.value = best / f32(n);
  return st;
}`;
}

const BINDINGS_IN = `
@group(0) @binding(0) var<storage, read> ws: array<f32>;
@group(0) @binding(1) var<storage, read> beta: array<f32>;
@group(0) @binding(2) var<storage, read> lb: array<f32>;
@group(0) @binding(3) var<storage, read> stepinfo: array<i32>;
@group(0) @binding(4) var<storage, read> s0: array<f32>;
@group(0) @binding(5) var<storage, read> init: array<f32>;`;

/** Hooks of {@linkcode blockSweep}: WGSL run before the reset, after it, and after the update of step `t`. */
interface SweepHooks {
  pre?: string;
  mid?: string;
  post?: string;
}

/**
 * The forward recurrence over steps `[tStart, tEnd)` on column `j` (register array `s`), staging
 * `L` steps of features and queries in workgroup memory at a time: three barriers per block (the
 * per-step statistics are computed in parallel, one invocation per step) and none per step.
 */
function blockSweep(
  config: RuleConfig,
  nw: number,
  dk: number,
  tStart: string,
  tEnd: string,
  hooks: SweepHooks,
): string {
  const falcon = statKind(config.rule) !== "none";
  const row = (o: number) => `(l + ${nw - 1 - o}u) * DK`;
  return `
  for (var tb = ${tStart}; tb < ${tEnd}; tb += L) {
    let rows = min(L, ${tEnd} - tb);
    workgroupBarrier();
    for (var e = j; e < (rows + NW - 1u) * DK; e += DV) { xb[e] = x_at(bh, tb + e / DK, e % DK); }
    for (var e = j; e < rows * DK; e += DV) { qb[e] = qn_at(bh, tb + e / DK, e % DK); }
    workgroupBarrier();
    ${
    falcon
      ? `for (var l = j; l < rows; l += DV) {
      let t = tb + l;
      let st = block_stat(l, u32(max(i32(t) - stepinfo[(b * u.T + t) * 2u] + 1, 0)));
      statb[l] = st.value;
      ${unroll(nw, (o) => `eigb[l * NW + ${o}u] = st.u[${o}];`, " ")}
    }
    workgroupBarrier();`
      : ""
  }
    var nx = fetch_small(b, bh, h, tb, j);
    for (var l = 0u; l < rows; l++) {
      let t = tb + l;
      let cur = nx;
      if (l + 1u < rows) { nx = fetch_small(b, bh, h, t + 1u, j); }
      ${hooks.pre ?? ""}
      if (cur.reset != 0) {
        ${
    unroll(
      dk,
      (i) => `s[${i}] = select(0.0, s0[bh * DK * DV + ${i}u * DV + j], u.hasS0 != 0u);`,
      "\n        ",
    )
  }
      }
      ${hooks.mid ?? ""}
      let n = u32(max(i32(t) - cur.lo + 1, 0));
      let co = coef(n, ${falcon ? "statb[l]" : "0.0"}, cur.beta, cur.lb, h);
      var cw: array<f32, NW>;
      ${
    unroll(nw, (o) =>
      `if (${o}u < n) {
        cw[${o}] = co.b * cur.y[${o}] - co.a * (${sum(dk, (i) => `xb[${row(o)} + ${i}u] * s[${i}]`)});
      } else { cw[${o}] = 0.0; }`, "\n      ")
  }
      ${
    unroll(dk, (i) =>
      `s[${i}] = co.gamma * s[${i}] + ${
        sum(nw, (o) => `xb[${row(o)} + ${i}u] * cw[${o}]`)
      };`, "\n      ")
  }
      ${hooks.post ?? ""}
    }
  }`;
}

function initCode(dk: number): string {
  return `
  var s: array<f32, DK>;
  ${
    unroll(dk, (i) =>
      `s[${i}] = select(0.0, init[bh * DK * DV + ${i}u * DV + j], u.hasInit != 0u);`, "\n  ")
  }`;
}

/** WGSL of `fastweight_recurrent_forward_f32`: bindings ws, beta, lb, stepinfo, s0, init, o, state, uniform. */
export function recurrentForwardShader(
  config: RuleConfig,
  shape: RecurrentShape,
  heads: HeadConstants,
): string {
  const nw = windowSlots(config);
  const dk = shape.dk;
  return `// fastweight_recurrent_forward_f32 (${config.rule})
${BINDINGS_IN}
@group(0) @binding(6) var<storage, read_write> out_o: array<f32>;
@group(0) @binding(7) var<storage, read_write> state: array<f32>;
@group(0) @binding(8) var<uniform> u: U;
${common(config, shape, heads)}
@compute @workgroup_size(${shape.dv})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) j: u32) {
  let bh = wid.x;
  let b = bh / H;
  let h = bh % H;
  ${initCode(dk)}
  ${
    blockSweep(config, nw, dk, "0u", "u.T", {
      post: `out_o[((b * u.T + t) * H + h) * DV + j] = ${sum(dk, (i) => `qb[l * DK + ${i}u] * s[${i}]`)};`,
    })
  }
  ${unroll(dk, (i) => `state[bh * DK * DV + ${i}u * DV + j] = s[${i}];`, "\n  ")}
}`;
}

/** WGSL of `fastweight_recurrent_backward_f32`: bindings ws, beta, lb, stepinfo, s0, init, dO, work, g, uniform. */
export function recurrentBackwardShader(
  config: RuleConfig,
  shape: RecurrentShape,
  heads: HeadConstants,
): string {
  const stat = statKind(config.rule);
  const perColumn = isPerColumnRule(config.rule);
  const nw = windowSlots(config);
  const { dk, dv, rb } = shape;
  const rs = dv + 1; // padded row stride of the reduction buffer
  const blocks = Math.ceil(dk / rb);
  // d stat / d x_o[i], added to the reduced dx_o (Falcon rules only); i and o are runtime values here
  const dstatDx = {
    E: "2.0 * xs[i]",
    Ebar: "2.0 * xs[o * DK + i] / f32(n)",
    mu: `2.0 * eig[1u + o] * (${sum(nw, (c) => `eig[${1 + c}] * xs[${c * dk}u + i]`)}) / f32(n)`,
    none: "0.0",
  }[stat];
  // one reduction over the value columns of the rows i in [0, DK): write(i) gives invocation j's term,
  // done(i, tot) consumes the total (invocations rr = j, j + DV, .. of each block)
  const reduce = (write: (i: number) => string, done: string) =>
    unroll(blocks, (blk) => {
      const r0 = blk * rb;
      const rows = Math.min(rb, dk - r0);
      return `
      workgroupBarrier();
      ${unroll(rows, (rr) => `red[${rr * rs}u + j] = ${write(r0 + rr)};`, "\n      ")}
      workgroupBarrier();
      for (var rr = j; rr < ${rows}u; rr += DV) {
        let i = ${r0}u + rr;
        let tot = ${sum(dv, (c) => `red[rr * RS + ${c}u]`)};
        ${done}
      }`;
    });
  return `// fastweight_recurrent_backward_f32 (${config.rule})
${BINDINGS_IN}
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read_write> work: array<f32>;
@group(0) @binding(8) var<storage, read_write> g: array<f32>;
@group(0) @binding(9) var<uniform> u: U;
${common(config, shape, heads)}
const RS = ${rs}u;
var<workgroup> red: array<f32, ${rb * rs}>;
var<workgroup> red3: array<f32, ${3 * dv}>;

fn nck() -> u32 { return (u.T + CK - 1u) / CK; }
fn ckpt_index(bh: u32, c: u32, i: u32, j: u32) -> u32 { return ((bh * nck() + c) * DK + i) * DV + j; }
fn stbuf_index(bh: u32, r: u32, i: u32, j: u32) -> u32 {
  return u.B * H * nck() * DK * DV + ((bh * CK + r) * DK + i) * DV + j;
}
// gradient workspace sections
fn g_dq(bh: u32, t: u32, i: u32) -> u32 { return (bh * u.T + t) * DK + i; }
fn g_dx(bh: u32, row: u32, i: u32) -> u32 { return u.B * H * u.T * DK + (bh * (PAD + u.T + 1u) + row) * DK + i; }
fn g_dy_base() -> u32 { return u.B * H * (u.T * DK + (PAD + u.T + 1u) * DK); }
fn g_dy(bh: u32, row: u32, j: u32) -> u32 { return g_dy_base() + (bh * (PAD + u.T) + row) * DV + j; }
fn g_db(bh: u32, t: u32, c: u32) -> u32 { return g_dy_base() + u.B * H * (PAD + u.T) * DV + (bh * u.T + t) * BW + c; }
fn g_dlb(bh: u32, t: u32) -> u32 { return g_db(u.B * H, 0u, 0u) + bh * u.T + t; }
fn g_ds0(bh: u32, i: u32, j: u32) -> u32 { return g_dlb(u.B * H, 0u) + (bh * DK + i) * DV + j; }
fn g_dc(bh: u32, i: u32, j: u32) -> u32 { return g_ds0(u.B * H, 0u, 0u) + (bh * DK + i) * DV + j; }

@compute @workgroup_size(${dv})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) j: u32) {
  let bh = wid.x;
  let b = bh / H;
  let h = bh % H;
  ${initCode(dk)}
  // phase 1: forward, keeping S (before any reset) every CK steps
  ${
    blockSweep(config, nw, dk, "0u", "u.T", {
      pre: `if (t % CK == 0u) {
        ${unroll(dk, (i) => `work[ckpt_index(bh, t / CK, ${i}u, j)] = s[${i}];`, "\n        ")}
      }`,
    })
  }
  var nxt: Fetch;
  // phase 2: reverse sweep, chunk by chunk: recompute the chunk's states, then walk back
  var ds: array<f32, DK>;
  var sp: array<f32, DK>;
  ${unroll(dk, (i) => `ds[${i}] = 0.0;`, " ")}
  for (var cc = i32(nck()) - 1; cc >= 0; cc--) {
    let t0 = u32(cc) * CK;
    let t1 = min(u.T, t0 + CK);
    ${unroll(dk, (i) => `s[${i}] = work[ckpt_index(bh, u32(cc), ${i}u, j)];`, "\n    ")}
    ${
    blockSweep(config, nw, dk, "t0", "t1", {
      mid: unroll(dk, (i) => `work[stbuf_index(bh, t - t0, ${i}u, j)] = s[${i}];`, "\n      "),
    })
  }
    nxt = fetch(b, bh, h, t1 - 1u, j);
    for (var tr = i32(t1) - 1; tr >= i32(t0); tr--) {
      let t = u32(tr);
      let cur = nxt;
      if (t > t0) { nxt = fetch(b, bh, h, t - 1u, j); }
      ${unroll(dk, (i) => `sp[${i}] = work[stbuf_index(bh, t - t0, ${i}u, j)];`, "\n      ")}
      let n = pairs_of(cur, t);
      stage(cur, n, j);
      let co = coef(n, stat_now(), cur.beta, cur.lb, h);
      var yv: array<f32, ${nw}>;
      var pv: array<f32, ${nw}>;
      var cw: array<f32, ${nw}>;
      var dp: array<f32, ${nw}>;
      let dOj = dout[((b * u.T + t) * H + h) * DV + j];
      ${unroll(dk, (i) => `ds[${i}] += qs[${i}] * dOj;`, " ")}
      let dgamma = ${sum(dk, (i) => `sp[${i}] * ds[${i}]`)};
      var da = 0.0;
      var db = 0.0;
      ${
    unroll(nw, (o) =>
      `if (${o}u < n) {
        yv[${o}] = cur.y[${o}];
        pv[${o}] = ${sum(dk, (i) => `xs[${o * dk + i}] * sp[${i}]`)};
        cw[${o}] = co.b * yv[${o}] - co.a * pv[${o}];
        let w = ${sum(dk, (i) => `xs[${o * dk + i}] * ds[${i}]`)};
        da -= w * pv[${o}];
        db += w * yv[${o}];
        dp[${o}] = -co.a * w;
        let yi = g_dy(bh, PAD + t - ${o}u, j);
        g[yi] = g[yi] + co.b * w;
      } else { yv[${o}] = 0.0; pv[${o}] = 0.0; cw[${o}] = 0.0; dp[${o}] = 0.0; }`)
  }
      let cb = coef_back(co, dgamma, da, db);
      ${perColumn ? "g[g_db(bh, t, j)] = cb.x;" : ""}
      red3[j * 3u] = ${perColumn ? "0.0" : "cb.x"};
      red3[j * 3u + 1u] = cb.y;
      red3[j * 3u + 2u] = cb.z;
      workgroupBarrier();
      var sums = vec3<f32>(0.0);
      ${unroll(dv, (c) => `sums += vec3<f32>(red3[${3 * c}], red3[${3 * c + 1}], red3[${3 * c + 2}]);`, " ")}
      if (j == 0u) {
        ${perColumn ? "" : "g[g_db(bh, t, 0u)] = sums.x;"}
        g[g_dlb(bh, t)] = sums.y;
      }
      let dstat = sums.z;
      // dq_t[i] = sum_j S_t[i, j] dO_j
      ${
    reduce(
      (i) => `(co.gamma * sp[${i}] + ${sum(nw, (o) => `xs[${o * dk + i}] * cw[${o}]`)}) * dOj`,
      "g[g_dq(bh, t, i)] = tot;",
    )
  }
      // dx_o[i] = sum_j dS[i, j] cw_o + S_{t-1}[i, j] dp_o, plus the statistic's gradient
      ${
    unroll(nw, (o) =>
      `{
        let o = ${o}u;
        let cwo = cw[${o}];
        let dpo = dp[${o}];
        ${
        reduce(
          (i) => `ds[${i}] * cwo + sp[${i}] * dpo`,
          `if (o < n) {
          let xi = g_dx(bh, PAD + t - o, i);
          g[xi] = g[xi] + tot + dstat * ${dstatDx};
        }`,
        )
      }
      }`)
  }
      // dS_{t-1}
      ${
    unroll(dk, (i) =>
      `ds[${i}] = co.gamma * ds[${i}] + ${
        sum(nw, (o) => `xs[${o * dk + i}] * dp[${o}]`)
      };`, "\n      ")
  }
      if (cur.reset != 0) {
        ${
    unroll(
      dk,
      (i) => `{ let k = g_ds0(bh, ${i}u, j); g[k] = g[k] + ds[${i}]; ds[${i}] = 0.0; }`,
      "\n        ",
    )
  }
      }
    }
  }
  ${unroll(dk, (i) => `g[g_dc(bh, ${i}u, j)] = ds[${i}];`, "\n  ")}
}`;
}
