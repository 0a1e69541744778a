/**
 * WGSL of the chunk-parallel kernels of the REGRESSION WINDOW rule falcon3, forward and backward,
 * float32 (SPEC section 4; the CPU derivation is `assembly/fw_chunk_window_reg.ts`).
 *
 * Recurrence: `S_t = gamma_t S_{t-1} + sum_{j in I_t} x_j w_(t,j)^T`, `w_(t,j) = g_t (y_j - S_{t-1}^T x_j)`,
 * `g_t = eta_t / |I_t|` (the `a = b` of `coef()`, whose statistic is the top eigenvalue of the window's
 * Gram matrix, computed by the recurrent kernels' `stat_of`). This is a delta rule over the chunk's
 * INSTANCE ROWS `r = (t, o)`, `o = 0..W-1`, `W` per step, with feature `x_j`, target `y_j`, `j = t - o`
 * (row `r = (t - a) W + o` of the chunk at `a`; a row is valid where `j >= lo_t`: the other rows are
 * zero, and rows of the chunk's first steps reach the `W-1` pairs before the chunk). With `P_t`,
 * `Pp_t`, `seg(t)`, `base_t` as in `fast_weight_chunk_delta.ts`:
 * - `(I + A) W = R`, `A[r, r'] = g_t Gp[t, t'] x_j.x_j'` for `t' < t` (rows of one step do not see
 *   each other), `R_r = g_t y_j - g_t exp(Pp_t) base_t^T x_j`, split as `W = U0 - V S_in`;
 * - `o_t = exp(P_t) base_t^T q_t + sum_{r'} Gam[t, t'] (q_t.x_j') w_r'`;
 * - `S_exit = K S_in + Bv`, `K = [no start] exp(P_e) I - sum_r Gam[e, t] x_j V_r^T`,
 *   `Bv = [start] exp(P_e) S0 + sum_r Gam[e, t] x_j U0_r^T`.
 * So the delta rules' passes carry over with `C W` rows instead of `C`: the solve is `W^2` times wider.
 *
 * Kernels (`fastweight_chunk_<pass>_f32`): forward `coef` (shared: also the top eigenvector, `EIG`),
 * `wgram` (per `(b, h, chunk, 64 entries)`: the Gram matrix `KP` of the chunk's pairs and the `W-1`
 * before it, from which `A` is formed where it is read: `(C + W - 1)^2` dot products instead of
 * `(C W)^2`, and no `C W x C W` matrix in memory), `wsolve` (per `(b, h, chunk)`, one invocation per
 * column of `U0 | V`, forward substitution step by step), `wtrans` (`K`, `Bv`), the shared `dscan`
 * (`S_in` of every chunk), `wwfix` (`W`), `wout` (per `(b, h, chunk, R rows)`: the outputs).
 * Backward (after recomputing the forward): the shared `uv`; `wcolsq` (the readout's `dW`: `QD`);
 * `wlnk` (`L_n = U_n - V^T Qd`); the shared reverse scan `rscan2`; `wcols` (per `(b, h, chunk, RC
 * steps)`: every instance row's `dW` and readout/exit `dx`, the decay weights `DMM`, `EXJ`);
 * `wsolvet` (`dR = (I + A)^-T dW`); `wdq`; `wpairs` (per `(b, h, chunk, RP steps)`: what `A` and `R`
 * feed: `dx`, `da + db` (`DAS`, `DBS`), the decay shares `YM`, `RB`); the shared `coefd`, `coefd2`
 * (`d log gamma`, then `coef_back`), `ws0part` and the shared `s0sum` (`dS0`); `wgather` (per pair
 * and element: `dx_j`, `dy_j` summed over the instance rows of pair `j`, and the statistic's gradient
 * `d mu_s / d x_j = 2 u_o (X_s u) / n_s` through the top eigenvector `u` of step `s = j + o`).
 * Workspace sections (offsets in the uniform block, `NI = W` rows per step, rows of a `(b, h)` at
 * `(bh T + t) W + o`): `GA, DAS, DBS, RB [BH,T]`, `KP [BH,NCK,CP,CP]` (`CP = C + W - 1`),
 * `U0, WW, DW, DR [BH,T W,Dv]` (`QD` shares `DR`'s floats), `VV, DXR [BH,T W,Dk]`, `EIG [BH,T,W]`, `KM [BH,NCK,Dk,Dk]`, `YM [BH,NCK,C,C]`,
 * with `SIN`, `SFIN`, `DS` (= `Bv`), `GB`, `UV`, `LN`, `D0C`, `DP`, `DST`, `DMM`, `EXJ`, `DQB` as the
 * delta rules use them (`DMM`, `EXJ`, `YM`, `RB` per STEP, so `decayGradKernel` serves unchanged).
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import type { HeadConstants } from "./fast_weight_coef.ts";
import { windowSlots } from "./fast_weight_recurrent.ts";
import {
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  chunkSteps,
  flatEntry,
  prelude,
  WINDOW_REG_PASSES,
} from "./chunk_wgsl.ts";

/** One falcon3-only pass. */
export type WindowRegPass = typeof WINDOW_REG_PASSES[number];

/** Whether a pass is falcon3-only. */
export function isWindowRegPass(pass: ChunkPass): pass is WindowRegPass {
  return (WINDOW_REG_PASSES as readonly string[]).includes(pass);
}

// instance-row addressing (global rows of a (b, h): (bh T + t) W + o)
const ADDR = `
fn grow(bh: u32, a: u32, r: u32) -> u32 { return (bh * u.T + a) * NW + r; }
// the chunk's pair Gram matrix KP [CP, CP] (pair j at a - PAD + p)
fn kpi(bh: u32, n: u32, p: u32, p2: u32) -> u32 { return u.KP + ((bh * nck() + n) * CP + p) * CP + p2; }
`;

// instance rows of the chunk at a (needs the chunk's step arrays)
const ROWS = `
// pair j of chunk row r
fn rpair(a: u32, r: u32) -> i32 { return i32(a + r / NW) - i32(r % NW); }
// whether chunk row r is a real pair of its step's window
fn rok(a: u32, len: u32, r: u32) -> bool {
  let t = r / NW;
  return t < len && rpair(a, r) >= clo[t];
}
// x_r . x_r2 of chunk rows r, r2 (from the pair Gram matrix)
fn xx(bh: u32, n: u32, r: u32, r2: u32) -> f32 {
  return cw[kpi(bh, n, r / NW + PAD - r % NW, r2 / NW + PAD - r2 % NW)];
}
// A[r, r2] = g_t Gp[t, t2] x_r.x_r2 for rows of earlier steps t2 < t of t's segment
fn amat(bh: u32, n: u32, a: u32, len: u32, r: u32, r2: u32) -> f32 {
  let t = r / NW;
  let t2 = r2 / NW;
  if (t2 >= t || cseg[t2] != cseg[t] || !rok(a, len, r) || !rok(a, len, r2)) { return 0.0; }
  return cga[t] * exp(cpp[t] - cp[t2]) * xx(bh, n, r, r2);
}
// Gam[t, t2] (t2 <= t, same segment; masked before exp)
fn gam(t: u32, t2: u32) -> f32 {
  if (t2 > t || cseg[t2] != cseg[t]) { return 0.0; }
  return exp(cp[t] - cp[t2]);
}
`;

/** WGSL of a falcon3-only pass (entry point `main`). */
export function windowRegShader(
  pass: WindowRegPass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
  const nw = windowSlots(config);
  const head = prelude(pass, config, s, heads) + `const CW = ${s.C * nw}u;\n` + ADDR;
  const steps = head + chunkSteps(true) + ROWS;
  const elems = `${Math.ceil((s.dk * s.dv) / 64)}u`;
  switch (pass) {
    case "wgram":
      return steps + `
${chunkEntry(`${Math.ceil((s.C + nw - 1) ** 2 / 64)}u`)}
  let e = tile * WG + lid;
  if (e < CP * CP) {
    let p = e / CP;
    let p2 = e % CP;
    let j0 = i32(a) - i32(PAD);
    var v = 0.0;
    if (p < len + PAD && p2 < len + PAD) {
      for (var i = 0u; i < DK; i++) { v += xp(bh, j0 + i32(p), i) * xp(bh, j0 + i32(p2), i); }
    }
    cw[kpi(bh, n, p, p2)] = v;
  }
}`;
    case "wsolve":
      return steps + solveKernel(nw);
    case "wtrans":
      return steps + `
var<workgroup> ge: array<f32, C>;
${chunkEntry(`${Math.ceil((s.dk * (s.dk + s.dv)) / 64)}u`)}
  for (var k = lid; k < len; k += WG) { ge[k] = gam(len - 1u, k); }
  workgroupBarrier();
  let e = tile * WG + lid;
  let dec = exp(cp[len - 1u]);
  let bk = base_kind(len - 1u);
  let nr = len * NW;
  if (e < DK * DK) {
    let i = e / DK;
    let i2 = e % DK;
    var v = select(0.0, dec, bk == 0u && i == i2);
    for (var r = 0u; r < nr; r++) {
      if (rok(a, len, r)) { v -= ge[r / NW] * xp(bh, rpair(a, r), i) * cw[u.VV + grow(bh, a, r) * DK + i2]; }
    }
    cw[u.KM + ((bh * nck() + n) * DK + i) * DK + i2] = v;
  } else if (e < DK * (DK + DV)) {
    let e2 = e - DK * DK;
    let i = e2 / DV;
    let c = e2 % DV;
    var v = 0.0;
    if (bk == 1u && u.hasS0 != 0u) { v = dec * s0[(bh * DK + i) * DV + c]; }
    for (var r = 0u; r < nr; r++) {
      if (rok(a, len, r)) { v += ge[r / NW] * xp(bh, rpair(a, r), i) * cw[u.U0 + grow(bh, a, r) * DV + c]; }
    }
    cw[u.DS + ((bh * nck() + n) * DK + i) * DV + c] = v;
  }
}`;
    case "wwfix":
      return head + `
${flatEntry("u.B * H * u.T * NW * DV")}
  let c = idx % DV;
  let gr = idx / DV;
  let bh = gr / (u.T * NW);
  let t = (gr % (u.T * NW)) / NW;
  let n = t / C;
  var w = cw[u.U0 + idx];
  for (var i = 0u; i < DK; i++) {
    w -= cw[u.VV + gr * DK + i] * cw[u.SIN + ((bh * nck() + n) * DK + i) * DV + c];
  }
  cw[u.WW + idx] = w;
}`;
    case "wout":
    case "wdq":
      return steps + rowsKernel(pass, s, nw);
    case "wcolsq":
    case "wcols":
      return steps + colsKernel(pass === "wcols", s, nw);
    case "wlnk":
      return steps + `
${chunkEntry(elems)}
  let e = tile * WG + lid;
  if (e < DK * DV) {
    let i = e / DV;
    let c = e % DV;
    var v = cw[u.UV + ((bh * nck() + n) * 2u) * DK * DV + e];
    for (var r = 0u; r < len * NW; r++) {
      let gr = grow(bh, a, r);
      v -= cw[u.VV + gr * DK + i] * cw[u.QD + gr * DV + c];
    }
    cw[u.LN + (bh * nck() + n) * DK * DV + e] = v;
  }
}`;
    case "wsolvet":
      return steps + solveTransposedKernel(nw);
    case "wpairs":
      return steps + pairsKernel(s, nw);
    case "ws0part":
      return steps + `
${chunkEntry(elems)}
  let e = tile * WG + lid;
  if (e < DK * DV) {
    let i = e / DV;
    let c = e % DV;
    var v = cw[u.UV + ((bh * nck() + n) * 2u + 1u) * DK * DV + e];
    if (base_kind(len - 1u) == 1u) { v += exp(cp[len - 1u]) * cw[u.GB + (bh * nck() + n) * DK * DV + e]; }
    for (var r = 0u; r < len * NW; r++) {
      let t = r / NW;
      if (base_kind(t) == 1u && rok(a, len, r)) {
        v -= cga[t] * exp(cpp[t]) * xp(bh, rpair(a, r), i) * cw[u.DR + grow(bh, a, r) * DV + c];
      }
    }
    cw[u.D0C + (bh * nck() + n) * DK * DV + e] = v;
  }
}`;
    case "wgather":
      return head + `
${flatEntry("u.B * H * (PAD + u.T) * (DK + DV)")}
  let e = idx % (DK + DV);
  let pr = idx / (DK + DV);
  let row = pr % (PAD + u.T);
  let bh = pr / (PAD + u.T);
  let b = bh / H;
  let p = i32(row) - i32(PAD);
  var v = 0.0;
  // the instance rows (s, o) of pair p: s = p + o, where p is in the window of s
  for (var o = 0u; o < NW; o++) {
    let s = p + i32(o);
    if (s < 0 || s >= i32(u.T)) { continue; }
    let lo = stepinfo[(b * u.T + u32(s)) * 2u];
    if (lo > p) { continue; }
    let st = bh * u.T + u32(s);
    let gr = st * NW + o;
    if (e < DK) {
      v += cw[u.DXR + gr * DK + e];
      // d mu_s / d x_p = 2 u_o (X_s u) / n_s (u: top eigenvector of step s's window Gram matrix)
      var xu = 0.0;
      for (var c2 = 0u; c2 < NW; c2++) {
        if (s - i32(c2) >= lo) { xu += cw[u.EIG + st * NW + c2] * xp(bh, s - i32(c2), e); }
      }
      v += cw[u.DST + st] * 2.0 * cw[u.EIG + st * NW + o] * xu / f32(s - lo + 1);
    } else {
      v += cw[u.GK + st] * cw[u.DR + gr * DV + e - DK];
    }
  }
  if (e < DK) {
    out[u.gDX + (bh * (PAD + u.T + 1u) + row) * DK + e] = v;
  } else {
    out[u.gDY + (bh * (PAD + u.T) + row) * DV + e - DK] = v;
  }
}`;
  }
}

/** `n` copies of `f(o)` joined by `sep` (the `W` rows of a step, unrolled). */
function unroll(n: number, f: (o: number) => string, sep = "\n"): string {
  return Array.from({ length: n }, (_, o) => f(o)).join(sep);
}

/**
 * `wsolve`: `(I + A) [U0 | V] = [R_y | R_x]` by forward substitution, one step (its `W` rows, which do
 * not see each other) at a time: the step's rows of `A` are staged in workgroup memory, and every
 * invocation owns columns of `U0 | V`, so each earlier row it reads serves the step's `W` rows.
 */
function solveKernel(nw: number): string {
  const rows = (body: (o: number) => string) => unroll(nw, body, "\n        ");
  return `
var<workgroup> arow: array<f32, NW * CW>;
${chunkEntry("1u")}
  for (var t = 0u; t < len; t++) {
    let r0 = t * NW;
    workgroupBarrier();
    for (var k = lid; k < r0 * NW; k += WG) {
      let q = k / NW;
      let o = k % NW;
      arow[o * CW + q] = amat(bh, n, a, len, r0 + o, q);
    }
    workgroupBarrier();
    let ex = exp(cpp[t]);
    let bk = base_kind(t);
    ${
    unroll(
      nw,
      (o) => `let ok${o} = rok(a, len, r0 + ${o}u);\n    let j${o} = rpair(a, r0 + ${o}u);`,
      "\n    ",
    )
  }
    for (var col = lid; col < DV + DK; col += WG) {
      ${unroll(nw, (o) => `var v${o} = 0.0;`, "\n      ")}
      if (col < DV) {
        ${
    rows((o) =>
      `if (ok${o}) {
          v${o} = cg[t] * yp(bh, j${o}, col);
          if (bk == 1u && u.hasS0 != 0u) {
            var sx = 0.0;
            for (var i = 0u; i < DK; i++) { sx += s0[(bh * DK + i) * DV + col] * xp(bh, j${o}, i); }
            v${o} -= cga[t] * ex * sx;
          }
        }`
    )
  }
        for (var q = 0u; q < r0; q++) {
          let x = cw[u.U0 + grow(bh, a, q) * DV + col];
          ${unroll(nw, (o) => `v${o} -= arow[${o}u * CW + q] * x;`, "\n          ")}
        }
        ${rows((o) => `cw[u.U0 + grow(bh, a, r0 + ${o}u) * DV + col] = select(0.0, v${o}, ok${o});`)}
      } else {
        let i = col - DV;
        ${rows((o) => `if (ok${o} && bk == 0u) { v${o} = cga[t] * ex * xp(bh, j${o}, i); }`)}
        for (var q = 0u; q < r0; q++) {
          let x = cw[u.VV + grow(bh, a, q) * DK + i];
          ${unroll(nw, (o) => `v${o} -= arow[${o}u * CW + q] * x;`, "\n          ")}
        }
        ${rows((o) => `cw[u.VV + grow(bh, a, r0 + ${o}u) * DK + i] = select(0.0, v${o}, ok${o});`)}
      }
    }
  }
}`;
}

/**
 * `wsolvet`: `dR = (I + A)^-T dW` by back substitution, one step at a time from the last: the
 * columns of `A` under the step's rows are staged in workgroup memory; one invocation per value column.
 */
function solveTransposedKernel(nw: number): string {
  return `
var<workgroup> acol: array<f32, NW * CW>;
${chunkEntry("1u")}
  let nr = len * NW;
  for (var tr = i32(len) - 1; tr >= 0; tr--) {
    let r0 = u32(tr) * NW;
    let r1 = r0 + NW;
    workgroupBarrier();
    for (var k = lid; k < (nr - r1) * NW; k += WG) {
      let q = r1 + k / NW;
      let o = k % NW;
      acol[o * CW + q] = amat(bh, n, a, len, q, r0 + o);
    }
    workgroupBarrier();
    for (var c = lid; c < DV; c += WG) {
      ${unroll(nw, (o) => `var v${o} = cw[u.DW + grow(bh, a, r0 + ${o}u) * DV + c];`, "\n      ")}
      for (var q = r1; q < nr; q++) {
        let d = cw[u.DR + grow(bh, a, q) * DV + c];
        ${unroll(nw, (o) => `v${o} -= acol[${o}u * CW + q] * d;`, "\n        ")}
      }
      ${unroll(nw, (o) => `cw[u.DR + grow(bh, a, r0 + ${o}u) * DV + c] = v${o};`, "\n      ")}
    }
  }
}`;
}

/**
 * `wout`: `o_t = exp(P_t) base_t^T q_t + sum_r (Gam[t, t_r] q_t.x_r) w_r`;
 * `wdq`: `dq_t = exp(P_t) base_t dO_t + sum_r (Gam[t, t_r] dO_t.w_r) x_r` (its base part into `DQB`).
 */
function rowsKernel(pass: "wout" | "wdq", s: ChunkShape, nw: number): string {
  const fwd = pass === "wout";
  const dout = "dout[((b * u.T + t) * H + h) * DV";
  return `
var<workgroup> sc: array<f32, ${s.R * s.C * nw}>;
${chunkEntry(`${Math.ceil(s.C / s.R)}u`)}
  let h = bh % H;
  let r0 = tile * R;
  // scores of the tile's rows against the chunk's instance rows
  for (var k = lid; k < R * CW; k += WG) {
    let tr = k / CW;
    let r2 = k % CW;
    let tt = r0 + tr;
    var v = 0.0;
    if (tt < len && r2 / NW <= tt && rok(a, len, r2)) {
      let m = gam(tt, r2 / NW);
      if (m != 0.0) {
        let t = a + tt;
        var d = 0.0;
        ${
    fwd
      ? "let j = rpair(a, r2);\n        for (var i = 0u; i < DK; i++) { d += qn(bh, t, i) * xp(bh, j, i); }"
      : "let gr = grow(bh, a, r2);\n        for (var c = 0u; c < DV; c++) { d += " + dout +
        " + c] * cw[u.WW + gr * DV + c]; }"
  }
        v = m * d;
      }
    }
    sc[k] = v;
  }
  workgroupBarrier();
  let base = u.SIN + (bh * nck() + n) * DK * DV;
  for (var k = lid; k < R * ${fwd ? "DV" : "DK"}; k += WG) {
    let tr = k / ${fwd ? "DV" : "DK"};
    let col = k % ${fwd ? "DV" : "DK"};
    let tt = r0 + tr;
    if (tt >= len) { continue; }
    let t = a + tt;
    let bk = base_kind(tt);
    let fromS0 = bk == 1u;
    var inter = 0.0;
    if (bk == 0u || (fromS0 && u.hasS0 != 0u)) {
      let sb = select(base, bh * DK * DV, fromS0);
      ${
    fwd
      ? `for (var i = 0u; i < DK; i++) {
        let k2 = sb + i * DV + col;
        inter += qn(bh, t, i) * select(cw[k2], s0[k2], fromS0);
      }`
      : `for (var c = 0u; c < DV; c++) {
        let k2 = sb + col * DV + c;
        inter += ${dout} + c] * select(cw[k2], s0[k2], fromS0);
      }`
  }
    }
    var acc = exp(cp[tt]) * inter;
    ${fwd ? "" : "cw[u.DQB + (bh * u.T + t) * DK + col] = acc;"}
    for (var r2 = 0u; r2 < (tt + 1u) * NW; r2++) {
      let v = sc[tr * CW + r2];
      if (v != 0.0) {
        acc += v * ${fwd ? "cw[u.WW + grow(bh, a, r2) * DV + col]" : "xp(bh, rpair(a, r2), col)"};
      }
    }
    ${fwd ? "out[((b * u.T + t) * H + h) * DV + col] = acc;" : "out[(bh * u.T + t) * DK + col] = acc;"}
  }
}`;
}

/**
 * `wcols` / `wcolsq`: for the instance rows `r = (t', o)` of `RC` steps, with `G` the exit-state
 * gradient and `ge = Gam[e, t']`: `dW_r = sum_t Gam[t, t'] (q_t.x_r) dO_t + ge G^T x_r` (`wcolsq`: the
 * readout part only, into `QD`); `wcols` also `dx_r = sum_t Gam[t, t'] (w_r.dO_t) q_t + ge G w_r`
 * (into `DXR`), the readout decay weights `DMM[t, t'] = sum_o (q_t.x_r)(w_r.dO_t)` and the exit
 * weights `EXJ[t'] = sum_o x_r^T G w_r`.
 */
function colsKernel(exit: boolean, s: ChunkShape, nw: number): string {
  const dout = "dout[((b * u.T + t) * H + h) * DV";
  const rows = s.RC * nw;
  return `
var<workgroup> wq: array<f32, ${rows * s.C}>;
${
    exit
      ? `var<workgroup> wd: array<f32, ${rows * s.C}>;
var<workgroup> dm: array<f32, ${rows * s.C}>;
var<workgroup> gy: array<f32, ${rows * s.dk}>;
var<workgroup> gx: array<f32, ${rows * s.dv}>;
var<workgroup> ge: array<f32, C>;`
      : ""
  }
const RCW = ${rows}u;
${chunkEntry(`${Math.ceil(s.C / s.RC)}u`)}
  let h = bh % H;
  let cb = bh * nck() + n;
  let st0 = tile * RC;
  let rb = st0 * NW;
  ${exit ? "for (var k = lid; k < len; k += WG) { ge[k] = gam(len - 1u, k); }" : ""}
  for (var k = lid; k < RCW * C; k += WG) {
    let jr = k / C;
    let tt = k % C;
    let r = rb + jr;
    let t2 = r / NW;
    var vq = 0.0;
    ${exit ? "var vd = 0.0;\n    var vm = 0.0;" : ""}
    if (tt < len && tt >= t2 && rok(a, len, r)) {
      let m = gam(tt, t2);
      let t = a + tt;
      let j = rpair(a, r);
      var qx = 0.0;
      for (var i = 0u; i < DK; i++) { qx += qn(bh, t, i) * xp(bh, j, i); }
      vq = m * qx;
      ${
    exit
      ? `let gr = grow(bh, a, r);
      var yd = 0.0;
      for (var c = 0u; c < DV; c++) { yd += ${dout} + c] * cw[u.WW + gr * DV + c]; }
      vd = m * yd;
      vm = qx * yd;`
      : ""
  }
    }
    wq[k] = vq;
    ${exit ? "wd[k] = vd;\n    dm[k] = vm;" : ""}
  }
  ${
    exit
      ? `let gb = u.GB + cb * DK * DV;
  // G w_r and G^T x_r
  for (var k = lid; k < RCW * DK; k += WG) {
    let r = rb + k / DK;
    let q = k % DK;
    var v = 0.0;
    if (rok(a, len, r)) {
      let gr = grow(bh, a, r);
      for (var c = 0u; c < DV; c++) { v += cw[gb + q * DV + c] * cw[u.WW + gr * DV + c]; }
    }
    gy[k] = v;
  }
  for (var k = lid; k < RCW * DV; k += WG) {
    let r = rb + k / DV;
    let c = k % DV;
    var v = 0.0;
    if (rok(a, len, r)) {
      let j = rpair(a, r);
      for (var i = 0u; i < DK; i++) { v += cw[gb + i * DV + c] * xp(bh, j, i); }
    }
    gx[k] = v;
  }`
      : ""
  }
  workgroupBarrier();
  for (var k = lid; k < RCW * (DK + DV); k += WG) {
    let jr = k / (DK + DV);
    let q = k % (DK + DV);
    let r = rb + jr;
    if (r >= len * NW) { continue; }
    let ok = rok(a, len, r);
    let gr = grow(bh, a, r);
    if (q < DK) {
      ${
    exit
      ? `var v = 0.0;
      if (ok) {
        v = ge[r / NW] * gy[jr * DK + q];
        for (var tt = 0u; tt < len; tt++) { v += wd[jr * C + tt] * qn(bh, a + tt, q); }
      }
      cw[u.DXR + gr * DK + q] = v;`
      : ""
  }
    } else {
      let c = q - DK;
      var v = 0.0;
      if (ok) {
        ${exit ? "v = ge[r / NW] * gx[jr * DV + c];" : ""}
        for (var tt = 0u; tt < len; tt++) {
          let t = a + tt;
          v += wq[jr * C + tt] * ${dout} + c];
        }
      }
      cw[u.${exit ? "DW" : "QD"} + gr * DV + c] = v;
    }
  }
  ${
    exit
      ? `for (var k = lid; k < RC * C; k += WG) {
    let sl = k / C;
    let tt = k % C;
    let t2 = st0 + sl;
    if (t2 >= len || tt >= len) { continue; }
    var v = 0.0;
    for (var o = 0u; o < NW; o++) { v += dm[(sl * NW + o) * C + tt]; }
    cw[u.DMM + (cb * C + tt) * CP + t2] = v;
  }
  for (var sl = lid; sl < RC; sl += WG) {
    let t2 = st0 + sl;
    if (t2 >= len) { continue; }
    var v = 0.0;
    for (var o = 0u; o < NW; o++) {
      let r = t2 * NW + o;
      if (!rok(a, len, r)) { continue; }
      let j = rpair(a, r);
      for (var i = 0u; i < DK; i++) { v += xp(bh, j, i) * gy[(sl * NW + o) * DK + i]; }
    }
    cw[u.EXJ + cb * CP + t2] = v;
  }`
      : ""
  }
}`;
}

/**
 * `wpairs`: for the instance rows `r = (t, o)` of `RP` steps, with `F[r, r'] = -(dR_r.w_r') g_t Gp[t, t']`
 * (`t' < t`): `dx_r += sum_r' (F[r, r'] + F[r', r]) x_r' - g_t exp(Pp_t) base_t dR_r` (into `DXR`);
 * per step `DAS_t = sum_o [sum_r' -(dR_r.w_r') Gp[t, t'] x_r.x_r' - exp(Pp_t) dR_r.(base_t^T x_r)]`,
 * `DBS_t = sum_o dR_r.y_r` (`da`, `db`); the decay shares `YM[t, t'] = sum_{o, o'} F[r, r'] x_r.x_r'`
 * and `RB_t = -g_t exp(Pp_t) sum_o dR_r.(base_t^T x_r)`.
 */
function pairsKernel(s: ChunkShape, nw: number): string {
  const rows = s.RP * nw;
  const cw = s.C * nw;
  return `
const RPW = ${rows}u;
var<workgroup> scx: array<f32, ${rows * cw}>;
var<workgroup> sv1: array<f32, ${rows * cw}>;
var<workgroup> sxb: array<f32, ${rows * s.dk}>;
${chunkEntry(`${Math.ceil(s.C / s.RP)}u`)}
  let cb = bh * nck() + n;
  let st0 = tile * RP;
  let rb = st0 * NW;
  for (var k = lid; k < RPW * CW; k += WG) {
    let jr = k / CW;
    let r2 = k % CW;
    let r = rb + jr;
    let t = r / NW;
    let t2 = r2 / NW;
    var cx = 0.0;
    var v1 = 0.0;
    if (t != t2 && rok(a, len, r) && rok(a, len, r2) && cseg[t] == cseg[t2]) {
      // (later, earlier) = (r, r2) below the diagonal, (r2, r) above it
      let later = select(r, r2, t2 > t);
      let earlier = select(r2, r, t2 > t);
      let tq = later / NW;
      let gl = grow(bh, a, later);
      let ge2 = grow(bh, a, earlier);
      var dw = 0.0;
      for (var c = 0u; c < DV; c++) { dw += cw[u.DR + gl * DV + c] * cw[u.WW + ge2 * DV + c]; }
      let gp = exp(cpp[tq] - cp[earlier / NW]);
      cx = -dw * cga[tq] * gp;
      if (t2 < t) { v1 = -dw * gp * xx(bh, n, r, r2); }
    }
    scx[k] = cx;
    sv1[k] = v1;
  }
  workgroupBarrier();
  let bin = u.SIN + cb * DK * DV;
  for (var k = lid; k < RPW * DK; k += WG) {
    let jr = k / DK;
    let q = k % DK;
    let r = rb + jr;
    var xb = 0.0;
    if (rok(a, len, r)) {
      let t = r / NW;
      let j = rpair(a, r);
      let gr = grow(bh, a, r);
      var v = 0.0;
      for (var r2 = 0u; r2 < len * NW; r2++) {
        let f = scx[jr * CW + r2];
        if (f != 0.0) { v += f * xp(bh, rpair(a, r2), q); }
      }
      // the right-hand side's -g_t exp(Pp_t) base_t^T x_j
      let bk = base_kind(t);
      let fromS0 = bk == 1u;
      var bd = 0.0;
      if (bk == 0u || (fromS0 && u.hasS0 != 0u)) {
        let sb = select(bin, bh * DK * DV, fromS0);
        for (var c = 0u; c < DV; c++) {
          let kq = sb + q * DV + c;
          bd += select(cw[kq], s0[kq], fromS0) * cw[u.DR + gr * DV + c];
        }
      }
      v -= cga[t] * exp(cpp[t]) * bd;
      xb = xp(bh, j, q) * bd;
      cw[u.DXR + gr * DK + q] = cw[u.DXR + gr * DK + q] + v;
    }
    sxb[k] = xb;
  }
  workgroupBarrier();
  for (var sl = lid; sl < RP; sl += WG) {
    let t = st0 + sl;
    if (t >= len) { continue; }
    var s1 = 0.0;
    var xbd = 0.0;
    var db = 0.0;
    for (var o = 0u; o < NW; o++) {
      let jr = sl * NW + o;
      let r = rb + jr;
      if (!rok(a, len, r)) { continue; }
      for (var r2 = 0u; r2 < t * NW; r2++) { s1 += sv1[jr * CW + r2]; }
      for (var i = 0u; i < DK; i++) { xbd += sxb[jr * DK + i]; }
      let gr = grow(bh, a, r);
      let j = rpair(a, r);
      for (var c = 0u; c < DV; c++) { db += cw[u.DR + gr * DV + c] * yp(bh, j, c); }
    }
    let ex = exp(cpp[t]);
    let k = bh * u.T + a + t;
    cw[u.DAS + k] = s1 - ex * xbd;
    cw[u.DBS + k] = db;
    cw[u.RB + k] = -cga[t] * ex * xbd;
  }
  for (var k = lid; k < RP * C; k += WG) {
    let sl = k / C;
    let t2 = k % C;
    let t = st0 + sl;
    if (t >= len || t2 >= len) { continue; }
    var v = 0.0;
    if (t2 < t) {
      for (var o = 0u; o < NW; o++) {
        for (var o2 = 0u; o2 < NW; o2++) { v += sv1[(sl * NW + o) * CW + t2 * NW + o2]; }
      }
    }
    cw[u.YM + (cb * C + t) * C + t2] = cga[t] * v;
  }
}`;
}
