/**
 * WGSL of the chunk-parallel kernels of the PER-COLUMN rules falcon2 (regression) and falcon2a
 * (additive), forward and backward, float32 (SPEC section 4; the CPU worked derivation is
 * `assembly/fw_chunk_per_column.ts`).
 *
 * Value column `j` of the state is its own scalar-decay rule: `s_t = gamma_t s_{t-1} + x_t w_t` with
 * `w_t = b_t y_t - a_t x_t.s_{t-1}` (`gamma, a, b` per step and column from the recurrent kernels'
 * `coef()`; falcon2a has `a = 0`). The Falcon decay never drops below `eps_gamma`, so segments are
 * cut only by sequence starts (no underflow cuts). For a chunk `a..e` entering with the column
 * `s_in`, with `P_t` the sum of `log gamma_r` over `r` from the start of `t`'s segment (the chunk
 * start or the last sequence start) to `t`, `Pp_t = P_t - log gamma_t` (0 at a segment's first
 * step), `base_t = s_in` in the chunk's first segment and `S0[:, j]` after a start,
 * `Gam[t,s] = exp(P_t - P_s)`, `Gp[t,s] = exp(Pp_t - P_s)` (same segment, masked before `exp`),
 * `K = X X^T`, `Kq = Q X^T` (shared by all columns):
 * - `(I + A) W = R`, `A[t,s] = a_t Gp[t,s] K[t,s]` (`s < t`), `R_t = b_t y_t - a_t exp(Pp_t) x_t.base_t`;
 * - `o_t = exp(P_t) q_t.base_t + sum_{s <= t} Gam[t,s] Kq[t,s] W_s`;
 * - `s_exit = exp(P_e) base_e + sum_s Gam[e,s] x_s W_s`.
 *
 * Only the solve carries a state dependence across chunks, so one workgroup per `(b, h, column)`
 * walks the chunks in order (`column_state_scan`: the `C x C` solve as a column sweep, one barrier per step, the
 * rows spread over the invocations: with `COLUMN_SWEEP = "registers"` and grouped scans, their running values in
 * registers and their `K` entries loaded `COLUMN_SWEEP_AHEAD` steps ahead, else in workgroup memory and one step
 * ahead; with `COLUMN_SCAN_STEP_PREFETCH` each chunk's step arrays loaded into registers a chunk ahead, with
 * `COLUMN_SCAN_VEC4_DOTS` the right-hand sides' dot products 4 key indices per workgroup load) and every
 * other pass runs per chunk, position or Gram entry:
 * - forward: `column_coefs` (per `(b, h, chunk)`, an invocation per column: coefficients `a, b`, the
 *   log-decay sums `P` and the start counts `startsInChunk`), `column_gram` (`K`, `Kq` of every chunk: with
 *   `COLUMN_GRAM_STAGED` of `chunk_wgsl.ts`, per `(b, h, chunk, Gram tile)` as staged register tiles,
 *   {@linkcode stagedGramKernel}; else per chunk row and 4 Gram columns from storage), `column_state_scan` (the
 *   entering state of every chunk, `W`, `x.base`, the final state), `column_readout` (the outputs: with
 *   `COLUMN_READOUT_TILED`, per `(b, h, chunk, tile of rows x value columns)` as staged register tiles, the decay
 *   `Gam[t,s]` of each column a per-term factor of the intra-chunk product, {@linkcode tiledReadoutKernel}; else per
 *   `(b, h, t, column)`, walking back over `t`'s segment);
 * - backward, after the forward passes: `column_readout_dw` (per `(b, h, t, column)`: the readout's `dW`), `column_query_dout`
 *   (per state element and chunk: `sum_t exp(P_t) q_t dO_t` split by base), `column_reverse_scan` (per `(b, h,
 *   column)`, chunks in reverse: the exit-state gradient `G` of every chunk, `dR = (I + A)^-T dW` by
 *   back substitution, `dS0`, `dCarryState`), `column_dots` (per `(b, h, t, column)`: `q_t.base_t`,
 *   `x_t.G` and `<G, base_e>`, as the shares `column_step_grads` needs), `column_step_grads` (per `(b, h, chunk, column)`:
 *   `dy`, `db`, `da` and `d log gamma` as the sum, over the decay factors whose chain holds step
 *   `r`, of the factor's share of the loss: `sum_{t >= r} sum_{s < r} Z[t,s]` from row prefix sums
 *   of `Z` in blocks of `RP` rows, so every term carries `gamma_r` and nothing cancels), `column_gram_grads` (per
 *   Gram entry, summed over columns: `dKq[t,s] = sum_j Gam_j dO_t W_s`,
 *   `dK[t,s] = -sum_j dR_t W_s a_t Gp_j`), `column_coef_grads` (per `(b, h, t)`: `coef_back` of every column,
 *   `dbeta`, `dlambdabar`, the statistic's gradient)
 *   and `column_query_key_grads` (per `(b, h, t, key index)`: `dq` and `dx`, from the per-`(t, column)` weights that
 *   `column_step_grads` leaves, so no `exp` is repeated per key index).
 *
 * falcon2a (`a = 0`: `W = R = b y`, no solve) with `COLUMN_SPLIT_SCAN` of `chunk_wgsl.ts` ({@linkcode splitsColumnScan})
 * has only the linear carry `s_exit = exp(P_e) base_e + sum_s Gam[e,s] x_s W_s` across chunks, so it splits the scans:
 * `column_coefs` also stores `W`; `column_state_increment` (per `(b, h, chunk, tile of the state)`, staged register
 * tiles, {@linkcode stateIncrementKernel}: the sum, into the slot of the next chunk's entering state) and
 * `column_increment_scan` (per state element, chunks in order: `entryState`, `finalState`) replace
 * `column_state_scan`, which also stored `x.base` (its one reader, `column_step_grads`, multiplies it by `a`: that
 * pass then reads none); `column_gradient_scan` (per state element, chunks in reverse: `G`, `dS0`, `dCarryState`)
 * replaces `column_reverse_scan`, and `column_dots` stores `dR = dW` from its `x_t.G`.
 *
 * Workspace sections (`cw`, offsets in the uniform block, `BH = B*H`, `NCK = ceil(T / C)`):
 * `columnLogDecaySum, columnEraseGain, columnWriteGain, columnPseudoValues, columnKeyDotBase, columnDPseudoValuesReadout, columnDRightHandSide, columnDEraseGain, columnDWriteGain, columnDLogDecay, columnDqBaseWeights, columnDxExitWeights, columnDxBaseWeights [BH, T, Dv]` (`P`, `a`, `b`, `W`,
 * `x_t.base_t`, readout `dW`, `dR`, `da`, `db`, `d log gamma`, and the weights of `column_query_key_grads`:
 * `exp(P_t) dO_t`, `[t in the exit segment] Gam[e,t] W_t`, `a_t exp(Pp_t) dR_t`), `columnBaseDecayShare, columnKeyDotDExit [BH, T, Dv]`
 * (the base-factor share `Zb_t` of `column_step_grads` without its right-hand-side part, `x_t.G`), `startsInChunk [BH, T]`
 * (sequence starts in the chunk up to `t`), `keyGram, queryKeyGram, dQueryKeyGram, dKeyGram [BH, NCK, C, C]`,
 * `columnDBaseReadout [BH, NCK, 2, Dk, Dv]`, with `entryState, dExitState [BH, NCK, Dk, Dv]`, `finalState [BH, Dk, Dv]`, `dStatistic [BH, T]`
 * shared with the other rules. Preconditions: a per-column Falcon rule (window 1, so no pairs
 * before a chunk); workgroup memory for `12 C + 2 Dk` floats, `RP` rows of `Z`, and the staged kernels' slices
 * (`columnGramLayout`, `columnReadoutLayout` of `chunk_wgsl.ts`: at most 1632 and `1568 + C` floats, tiles of at
 * most 64 x 64 entries).
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import type { HeadConstants } from "./fast_weight_coef.ts";
import {
  CHUNK_WG,
  chunkEntry,
  type ChunkPass,
  type ChunkShape,
  COLUMN_GRAM_STAGED,
  COLUMN_READOUT_TILED,
  columnGramLayout,
  columnIncrementLayout,
  columnReadoutLayout,
  flatEntry,
  PER_COLUMN_PASSES,
  prelude,
  splitsColumnScan,
  stepCoefEntry,
  stepCoefWgsl,
} from "./chunk_wgsl.ts";
import {
  component,
  declareAccumulators,
  eachTileRow,
  gridBlocks,
  roundUp4,
  stagedFloats,
  stagedLoop,
  type StagedOperand,
  type TileGrid,
  type TileProduct,
} from "./chunk_staged_tiles.ts";
import { packWorkgroupArrays } from "./workgroup_packing.ts";

/** One per-column pass. */
export type PerColumnPass = typeof PER_COLUMN_PASSES[number];

/** Whether a pass is a per-column one. */
export function isPerColumnPass(pass: ChunkPass): pass is PerColumnPass {
  return (PER_COLUMN_PASSES as readonly string[]).includes(pass);
}

/** The forward passes of a per-column rule, in dispatch order. */
export const PER_COLUMN_FORWARD: readonly ChunkPass[] = [
  "column_coefs",
  "column_gram",
  "column_state_scan",
  "column_readout",
];

/** falcon2a's split state scan ({@linkcode splitsColumnScan}), in dispatch order: in place of `column_state_scan`. */
const SPLIT_SCAN_PASSES: readonly PerColumnPass[] = ["column_state_increment", "column_increment_scan"];

/** falcon2a's split reverse scan ({@linkcode splitsColumnScan}): in place of `column_reverse_scan`. */
const SPLIT_REVERSE_PASSES: readonly PerColumnPass[] = ["column_gradient_scan"];

/**
 * The backward passes of a per-column rule (the forward recompute first), in dispatch order: every
 * per-column pass (`PER_COLUMN_PASSES` lists them in that order) but the forward's readout `column_readout` and
 * falcon2a's split scan.
 */
export const PER_COLUMN_BACKWARD: readonly ChunkPass[] = PER_COLUMN_PASSES.filter((p) =>
  p !== "column_readout" && !SPLIT_SCAN_PASSES.includes(p) && !SPLIT_REVERSE_PASSES.includes(p)
);

/**
 * `passes` with falcon2a's split scans in place of `column_state_scan` and `column_reverse_scan` (the lists of the
 * rules that {@linkcode splitsColumnScan}).
 */
function withSplitScan(passes: readonly ChunkPass[]): readonly ChunkPass[] {
  return passes.flatMap((p): readonly ChunkPass[] =>
    p === "column_state_scan" ? SPLIT_SCAN_PASSES : p === "column_reverse_scan" ? SPLIT_REVERSE_PASSES : [p]
  );
}

// the pass lists of falcon2a's split scans, made once (a chunk call asks for its lists every time)
const SPLIT_FORWARD = withSplitScan(PER_COLUMN_FORWARD);
const SPLIT_BACKWARD = withSplitScan(PER_COLUMN_BACKWARD);

/** The forward passes of per-column rule `config`, in dispatch order. */
export function perColumnForward(config: RuleConfig): readonly ChunkPass[] {
  return splitsColumnScan(config) ? SPLIT_FORWARD : PER_COLUMN_FORWARD;
}

/** The backward passes of per-column rule `config` (the forward recompute first), in dispatch order. */
export function perColumnBackward(config: RuleConfig): readonly ChunkPass[] {
  return splitsColumnScan(config) ? SPLIT_BACKWARD : PER_COLUMN_BACKWARD;
}

// addressing of the column sections: [BH, T, Dv], [BH, NCK, C, C], [BH, NCK, Dk, Dv], [BH, Dk, Dv]
const ADDR = `
fn ci(bh: u32, t: u32, c: u32) -> u32 { return (bh * u.T + t) * DV + c; }
fn kk(bh: u32, n: u32, t: u32, s: u32) -> u32 { return ((bh * nck() + n) * C + t) * C + s; }
fn si(bh: u32, n: u32, i: u32, c: u32) -> u32 { return ((bh * nck() + n) * DK + i) * DV + c; }
fn s0i(bh: u32, i: u32, c: u32) -> u32 { return (bh * DK + i) * DV + c; }
fn dor(b: u32, h: u32, t: u32, c: u32) -> u32 { return ((b * u.T + t) * H + h) * DV + c; }
`;

/** Blocks of 4 Gram columns per chunk row (`column_gram`). */
const GRAM_BLOCKS = (C: number) => Math.ceil(C / 4);

const STARTS = `
fn is_start(b: u32, t: u32) -> bool { return stepinfo[(b * u.T + t) * 2u + 1u] != 0; }
`;

/**
 * The chunk's per-step arrays of one column in workgroup memory (the scans and `column_step_grads`): `sg`
 * (sequence starts in `a..t`, left by `column_coefs` in `startsInChunk`: 0 means base `s_in`), `pl` (`P`), `pp`
 * (`Pp`), `ga` (`a`).
 */
const COLUMN_STEPS = `
var<workgroup> sg: array<u32, C>;
var<workgroup> pl: array<f32, C>;
var<workgroup> pp: array<f32, C>;
var<workgroup> ga: array<f32, C>;
fn load_column(lid: u32, bh: u32, a: u32, len: u32, col: u32) {
  workgroupBarrier();
  for (var k = lid; k < len; k += WG) {
    sg[k] = u32(cw[u.startsInChunk + bh * u.T + a + k]);
    pl[k] = cw[u.columnLogDecaySum + ci(bh, a + k, col)];
    ga[k] = cw[u.columnEraseGain + ci(bh, a + k, col)];
  }
  workgroupBarrier();
  for (var k = lid; k < len; k += WG) {
    let km = max(k, 1u) - 1u;
    pp[k] = select(pl[km], 0.0, k == 0u || sg[k] != sg[km]);
  }
  workgroupBarrier();
}
`;

/** `n` copies of `f(m)` (the rows `lid + m * WG` an invocation owns). */
function unrollRows(n: number, f: (m: number) => string): string {
  return Array.from({ length: n }, (_, m) => f(m)).join("\n      ");
}

/** Entry of a pass with one workgroup per `count` item (`wgid`). */
function groupEntry(count: string): string {
  return `@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wgid = gid.y * nwg.x + gid.x;
  if (wgid >= ${count}) { return; }`;
}

/** WGSL `base_of(bh, n, i, col, fromS0)`: element `i` of the column's base (`s_in` of chunk `n`, or `S0`). */
const BASE = `
fn base_of(bh: u32, n: u32, i: u32, col: u32, fromS0: bool) -> f32 {
  if (!fromS0) { return cw[u.entryState + si(bh, n, i, col)]; }
  if (u.hasS0 != 0u) { return s0[s0i(bh, i, col)]; }
  return 0.0;
}
`;

/** WGSL of a per-column pass (entry point `main`). */
export function perColumnShader(
  pass: PerColumnPass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
  const reg = config.rule === "falcon2";
  const rpt = Math.ceil(s.C / CHUNK_WG);
  const head = prelude(pass, config, s, heads) + ADDR + `const SB = ${GRAM_BLOCKS(s.C)}u;\n`;
  const coefCol = `
fn step_co_col(bh: u32, b: u32, h: u32, t: u32, col: u32, n: u32, st: f32) -> Co {
  return coef(n, st, beta[((b * u.T + t) * H + h) * DV + col], lb[(b * u.T + t) * H + h], h);
}
fn stat_at(bh: u32, n: u32, t: u32) -> f32 {
  if (n == 0u) { return 0.0; }
  return dot_xx(bh, i32(t));
}`;
  switch (pass) {
    case "column_coefs":
      return head + STARTS + stepCoefWgsl(config) + coefCol + `
var<workgroup> est: array<f32, C>;
var<workgroup> enp: array<u32, C>;
${groupEntry("u.B * H * nck()")}
  let n = wgid % nck();
  let bh = wgid / nck();
  let b = bh / H;
  let h = bh % H;
  let a = n * C;
  let len = min(C, u.T - a);
  // the statistic E_t once per step, then one invocation per column walks the chunk
  for (var k = lid; k < len; k += WG) {
    let np = pairs_at(b, a + k);
    enp[k] = np;
    est[k] = stat_at(bh, np, a + k);
  }
  if (lid == 0u) {
    // sequence starts in a..t, for the column passes' segment tests
    var cnt = 0u;
    for (var k = 0u; k < len; k++) {
      if (is_start(b, a + k)) { cnt++; }
      cw[u.startsInChunk + bh * u.T + a + k] = f32(cnt);
    }
  }
  workgroupBarrier();
  for (var col = lid; col < DV; col += WG) {
    var p = 0.0;
    for (var k = 0u; k < len; k++) {
      let t = a + k;
      if (is_start(b, t)) { p = 0.0; }
      let co = step_co_col(bh, b, h, t, col, enp[k], est[k]);
      // the Falcon decay is at least eps_gamma: log_gamma never returns the cut marker here
      p += log_gamma(co);
      let c = ci(bh, t, col);
      cw[u.columnLogDecaySum + c] = p;
      cw[u.columnEraseGain + c] = co.a;
      cw[u.columnWriteGain + c] = co.b;${
        splitsColumnScan(config)
          ? `
      // falcon2a's pseudo-values W = R = b y (a = 0: no state term), for the split scan
      cw[u.columnPseudoValues + c] = co.b * yp(bh, i32(t), col);`
          : ""
      }
    }
  }
}`;
    case "column_gram":
      if (COLUMN_GRAM_STAGED) return head + stagedGramKernel(s, splitsColumnScan(config));
      return head + `
${flatEntry("u.B * H * nck() * C * SB")}
  // one invocation per row t and block of 4 columns s: each loaded x_t, q_t entry serves 4 products
  let s0b = (idx % SB) * 4u;
  let t = (idx / SB) % C;
  let bn = idx / (C * SB);
  let n = bn % nck();
  let bh = bn / nck();
  let a = n * C;
  let len = min(C, u.T - a);
  if (t >= len) {
    for (var j = 0u; j < 4u; j++) {
      let sx = s0b + j;
      if (sx < C) {
        cw[u.keyGram + kk(bh, n, t, sx)] = 0.0;
        cw[u.queryKeyGram + kk(bh, n, t, sx)] = 0.0;
      }
    }
    return;
  }
  let r0 = i32(a + min(s0b, len - 1u));
  let r1 = i32(a + min(s0b + 1u, len - 1u));
  let r2 = i32(a + min(s0b + 2u, len - 1u));
  let r3 = i32(a + min(s0b + 3u, len - 1u));
  var kx = vec4<f32>(0.0);
  var kq = vec4<f32>(0.0);
  for (var i = 0u; i < DK; i++) {
    let xs = vec4<f32>(xp(bh, r0, i), xp(bh, r1, i), xp(bh, r2, i), xp(bh, r3, i));
    kx += xp(bh, i32(a + t), i) * xs;
    kq += qn(bh, a + t, i) * xs;
  }
  for (var j = 0u; j < 4u; j++) {
    let sx = s0b + j;
    if (sx < C) {
      cw[u.keyGram + kk(bh, n, t, sx)] = select(0.0, kx[j], sx < len);
      cw[u.queryKeyGram + kk(bh, n, t, sx)] = select(0.0, kq[j], sx <= t);
    }
  }
}`;
    case "column_state_scan":
      if (s.CS > 1) {
        return packWorkgroupArrays(head + columnStateScanKernel(s, reg), COLUMN_SCAN_ARRAYS.state);
      }
      return head + COLUMN_STEPS + `
var<workgroup> sc: array<f32, DK>;
var<workgroup> wv: array<f32, C>;
var<workgroup> ge: array<f32, C>;
${groupEntry("u.B * H * DV")}
  let col = wgid % DV;
  let bh = wgid / DV;
  for (var i = lid; i < DK; i += WG) { sc[i] = select(0.0, init[s0i(bh, i, col)], u.hasInit != 0u); }
  for (var n = 0u; n < nck(); n++) {
    let a = n * C;
    let len = min(C, u.T - a);
    let e = len - 1u;
    load_column(lid, bh, a, len, col);
    for (var i = lid; i < DK; i += WG) { cw[u.entryState + si(bh, n, i, col)] = sc[i]; }
    // right-hand side R_t = b_t y_t - a_t exp(Pp_t) x_t.base_t
    for (var k = lid; k < len; k += WG) {
      let t = a + k;
      var xs = 0.0;
      if (sg[k] == 0u) {
        for (var i = 0u; i < DK; i++) { xs += xp(bh, i32(t), i) * sc[i]; }
      } else if (u.hasS0 != 0u) {
        for (var i = 0u; i < DK; i++) { xs += xp(bh, i32(t), i) * s0[s0i(bh, i, col)]; }
      }
      cw[u.columnKeyDotBase + ci(bh, t, col)] = xs;
      wv[k] = cw[u.columnWriteGain + ci(bh, t, col)] * yp(bh, i32(t), col) - ga[k] * exp(pp[k]) * xs;
    }
    workgroupBarrier();
    ${
        reg
          ? `// forward substitution as a column sweep: once W_s is final, every later row of its segment
    // drops A[k,s] W_s; each invocation keeps its rows (k = lid + m WG) and loads the next K entries
    // one step ahead, so the global reads overlap the barrier
    var kc: array<f32, ${rpt}>;
    ${
            unrollRows(rpt, (m) =>
              `{ let k = lid + ${m}u * WG; kc[${m}] = select(0.0, cw[u.keyGram + kk(bh, n, 0u, min(k, C - 1u))], k < len); }`)
          }
    for (var sx = 0u; sx + 1u < len; sx++) {
      let w = wv[sx];
      ${
            unrollRows(rpt, (m) =>
              `{
        let k = lid + ${m}u * WG;
        var kn = 0.0;
        if (k > sx + 1u && k < len) { kn = cw[u.keyGram + kk(bh, n, sx + 1u, k)]; }
        if (k > sx && k < len && sg[k] == sg[sx]) { wv[k] -= ga[k] * exp(pp[k] - pl[sx]) * kc[${m}] * w; }
        kc[${m}] = kn;
      }`)
          }
      workgroupBarrier();
    }`
          : ""
      }
    for (var k = lid; k < len; k += WG) {
      ge[k] = select(0.0, exp(pl[e] - pl[k]), sg[k] == sg[e]) * wv[k];
      cw[u.columnPseudoValues + ci(bh, a + k, col)] = wv[k];
    }
    workgroupBarrier();
    // exit state: exp(P_e) base_e + sum_k Gam[e,k] x_k W_k (each invocation its own rows)
    for (var i = lid; i < DK; i += WG) {
      var v = 0.0;
      if (sg[e] == 0u) { v = exp(pl[e]) * sc[i]; } else if (u.hasS0 != 0u) { v = exp(pl[e]) * s0[s0i(bh, i, col)]; }
      for (var k = 0u; k < len; k++) { v += xp(bh, i32(a + k), i) * ge[k]; }
      sc[i] = v;
    }
  }
  workgroupBarrier();
  for (var i = lid; i < DK; i += WG) { cw[u.finalState + s0i(bh, i, col)] = sc[i]; }
}`;
    case "column_state_increment":
      return head + stateIncrementKernel(s);
    case "column_increment_scan":
      return head + INCREMENT_SCAN;
    case "column_gradient_scan":
      return head + GRADIENT_SCAN;
    case "column_readout":
      if (COLUMN_READOUT_TILED) return head + tiledReadoutKernel(s);
      return head + STARTS + BASE + `
${flatEntry("u.B * H * u.T * DV")}
  let col = idx % DV;
  let bt = idx / DV;
  let t = bt % u.T;
  let bh = bt / u.T;
  let b = bh / H;
  let h = bh % H;
  let n = t / C;
  let a = n * C;
  let pt = cw[u.columnLogDecaySum + ci(bh, t, col)];
  // walk back over t's segment: sum_s Gam[t,s] Kq[t,s] W_s
  var acc = 0.0;
  var sx = t;
  var fromS0 = false;
  loop {
    acc += exp(pt - cw[u.columnLogDecaySum + ci(bh, sx, col)]) * cw[u.queryKeyGram + kk(bh, n, t - a, sx - a)] * cw[u.columnPseudoValues + ci(bh, sx, col)];
    if (is_start(b, sx)) {
      fromS0 = true;
      break;
    }
    if (sx == a) { break; }
    sx--;
  }
  var inter = 0.0;
  for (var i = 0u; i < DK; i++) { inter += qn(bh, t, i) * base_of(bh, n, i, col, fromS0); }
  out[dor(b, h, t, col)] = acc + exp(pt) * inter;
}`;
    case "column_readout_dw":
      return head + STARTS + `
${flatEntry("u.B * H * u.T * DV")}
  let col = idx % DV;
  let bt = idx / DV;
  let sx = bt % u.T;
  let bh = bt / u.T;
  let b = bh / H;
  let h = bh % H;
  let n = sx / C;
  let a = n * C;
  let len = min(C, u.T - a);
  let ps = cw[u.columnLogDecaySum + ci(bh, sx, col)];
  // the readout's dW_s = sum_{t >= s} Gam[t,s] Kq[t,s] dO_t over s's segment
  var acc = 0.0;
  var t = sx;
  loop {
    acc += exp(cw[u.columnLogDecaySum + ci(bh, t, col)] - ps) * cw[u.queryKeyGram + kk(bh, n, t - a, sx - a)] * dout[dor(b, h, t, col)];
    t++;
    if (t >= a + len) { break; }
    if (is_start(b, t)) { break; }
  }
  cw[u.columnDPseudoValuesReadout + ci(bh, sx, col)] = acc;
}`;
    case "column_query_dout":
      return head + STARTS + `
${flatEntry("u.B * H * nck() * DK * DV")}
  let col = idx % DV;
  let r = idx / DV;
  let i = r % DK;
  let bn = r / DK;
  let n = bn % nck();
  let bh = bn / nck();
  let b = bh / H;
  let h = bh % H;
  let a = n * C;
  let len = min(C, u.T - a);
  var u0 = 0.0;
  var u1 = 0.0;
  var seen = false;
  for (var k = 0u; k < len; k++) {
    let t = a + k;
    if (is_start(b, t)) { seen = true; }
    let w = exp(cw[u.columnLogDecaySum + ci(bh, t, col)]) * qn(bh, t, i) * dout[dor(b, h, t, col)];
    if (seen) { u1 += w; } else { u0 += w; }
  }
  let o = u.columnDBaseReadout + (bh * nck() + n) * 2u * DK * DV + i * DV + col;
  cw[o] = u0;
  cw[o + DK * DV] = u1;
}`;
    case "column_reverse_scan":
      if (s.CS > 1) {
        return packWorkgroupArrays(head + columnReverseScanKernel(s, reg), COLUMN_SCAN_ARRAYS.reverse);
      }
      return head + COLUMN_STEPS + `
var<workgroup> gs: array<f32, DK>;
var<workgroup> g0: array<f32, DK>;
var<workgroup> dr: array<f32, C>;
var<workgroup> rc: array<f32, C>;
${groupEntry("u.B * H * DV")}
  let col = wgid % DV;
  let bh = wgid / DV;
  for (var i = lid; i < DK; i += WG) {
    gs[i] = 0.0;
    g0[i] = 0.0;
  }
  for (var kc = 0u; kc < nck(); kc++) {
    let n = nck() - 1u - kc;
    let a = n * C;
    let len = min(C, u.T - a);
    let e = len - 1u;
    load_column(lid, bh, a, len, col);
    for (var i = lid; i < DK; i += WG) { cw[u.dExitState + si(bh, n, i, col)] = gs[i]; }
    // dW = readout part + Gam[e,k] x_k.G
    for (var k = lid; k < len; k += WG) {
      let t = a + k;
      var xg = 0.0;
      if (sg[k] == sg[e]) {
        for (var i = 0u; i < DK; i++) { xg += xp(bh, i32(t), i) * gs[i]; }
        xg *= exp(pl[e] - pl[k]);
      }
      dr[k] = cw[u.columnDPseudoValuesReadout + ci(bh, t, col)] + xg;
    }
    workgroupBarrier();
    ${
        reg
          ? `// back substitution as a column sweep: once dR_t2 is final, every earlier row of its segment
    // drops A[t2,k] dR_t2 (K entries loaded one step ahead, as in column_state_scan)
    var kc: array<f32, ${rpt}>;
    ${
            unrollRows(rpt, (m) =>
              `{ let k = lid + ${m}u * WG; kc[${m}] = select(0.0, cw[u.keyGram + kk(bh, n, len - 1u, min(k, C - 1u))], k < len); }`)
          }
    for (var t2 = len - 1u; t2 > 0u; t2--) {
      let d = dr[t2];
      ${
            unrollRows(rpt, (m) =>
              `{
        let k = lid + ${m}u * WG;
        var kn = 0.0;
        if (k + 1u < t2) { kn = cw[u.keyGram + kk(bh, n, t2 - 1u, k)]; }
        if (k < t2 && sg[k] == sg[t2]) { dr[k] -= ga[t2] * exp(pp[t2] - pl[k]) * kc[${m}] * d; }
        kc[${m}] = kn;
      }`)
          }
      workgroupBarrier();
    }`
          : ""
      }
    for (var k = lid; k < len; k += WG) {
      cw[u.columnDRightHandSide + ci(bh, a + k, col)] = dr[k];
      rc[k] = ga[k] * exp(pp[k]) * dr[k];
    }
    workgroupBarrier();
    // gradient of the entering state (base s_in) and of S0 (base S0)
    for (var i = lid; i < DK; i += WG) {
      let o = u.columnDBaseReadout + (bh * nck() + n) * 2u * DK * DV + i * DV + col;
      var v0 = cw[o];
      var v1 = cw[o + DK * DV];
      let ce = exp(pl[e]) * gs[i];
      if (sg[e] == 0u) { v0 += ce; } else { v1 += ce; }
      for (var k = 0u; k < len; k++) {
        let v = rc[k] * xp(bh, i32(a + k), i);
        if (sg[k] == 0u) { v0 -= v; } else { v1 -= v; }
      }
      g0[i] += v1;
      gs[i] = v0;
    }
  }
  workgroupBarrier();
  for (var i = lid; i < DK; i += WG) {
    out[u.gDC + s0i(bh, i, col)] = gs[i];
    out[u.gDS0 + s0i(bh, i, col)] = g0[i];
  }
}`;
    case "column_step_grads":
      return head + COLUMN_STEPS + colGradKernel(s, reg, splitsColumnScan(config));
    case "column_dots":
      return head + BASE + `
${flatEntry("u.B * H * u.T * DV")}
  let col = idx % DV;
  let bt = idx / DV;
  let t = bt % u.T;
  let bh = bt / u.T;
  let b = bh / H;
  let h = bh % H;
  let n = t / C;
  let e = min(n * C + C, u.T) - 1u;
  let fromS0 = cw[u.startsInChunk + bh * u.T + t] != 0.0;
  // q_t.base_t, x_t.G and (at the chunk's last step) <G, base_e>, the base e shares with t
  var qb = 0.0;
  var xg = 0.0;
  var eb = 0.0;
  for (var i = 0u; i < DK; i++) {
    let bs = base_of(bh, n, i, col, fromS0);
    let g = cw[u.dExitState + si(bh, n, i, col)];
    qb += qn(bh, t, i) * bs;
    xg += xp(bh, i32(t), i) * g;
    eb += g * bs;
  }
  let c = ci(bh, t, col);
  cw[u.columnBaseDecayShare + c] = exp(cw[u.columnLogDecaySum + c]) * (dout[dor(b, h, t, col)] * qb + select(0.0, eb, t == e));
  cw[u.columnKeyDotDExit + c] = xg;${
        splitsColumnScan(config)
          ? `
  // falcon2a's split reverse scan: dR_t = dW_t = readout part + Gam[e,t] x_t.G (t in the exit segment; no solve)
  let sameSegment = cw[u.startsInChunk + bh * u.T + t] == cw[u.startsInChunk + bh * u.T + e];
  let xe = select(0.0, exp(cw[u.columnLogDecaySum + ci(bh, e, col)] - cw[u.columnLogDecaySum + c]) * xg, sameSegment);
  cw[u.columnDRightHandSide + c] = cw[u.columnDPseudoValuesReadout + c] + xe;`
          : ""
      }
}`;
    case "column_gram_grads":
      return head + gramGradKernel(reg);
    case "column_coef_grads":
      return head + stepCoefWgsl(config) + coefCol + `
${stepCoefEntry(config)}
  let t = idx % u.T;
  let bh = idx / u.T;
  let b = bh / H;
  let h = bh % H;
  let np = pairs_at(b, t);
  let st = stat_at(bh, np, t);
  var dlb = 0.0;
  var dst = 0.0;
  for (var col = 0u; col < DV; col++) {
    let co = step_co_col(bh, b, h, t, col, np, st);
    let c = ci(bh, t, col);
    let cb = coef_back(co, dgamma_of(co, cw[u.columnDLogDecay + c]), cw[u.columnDEraseGain + c], cw[u.columnDWriteGain + c]);
    out[u.gDB + c] = cb.x;
    dlb += cb.y;
    dst += cb.z;
  }
  out[u.gDLB + idx] = dlb;
  cw[u.dStatistic + idx] = dst;
}`;
    case "column_query_key_grads":
      return head + BASE + `
${flatEntry("u.B * H * u.T * DK")}
  let i = idx % DK;
  let bt = idx / DK;
  let t = bt % u.T;
  let bh = bt / u.T;
  let n = t / C;
  let a = n * C;
  let len = min(C, u.T - a);
  let tt = t - a;
  let fromS0 = cw[u.startsInChunk + bh * u.T + t] != 0.0;
  var dq = 0.0;
  var dx = 0.0;
  for (var col = 0u; col < DV; col++) {
    let c = ci(bh, t, col);
    let bs = base_of(bh, n, i, col, fromS0);
    dq += cw[u.columnDqBaseWeights + c] * bs;
    dx += cw[u.columnDxExitWeights + c] * cw[u.dExitState + si(bh, n, i, col)]${
        reg ? " - cw[u.columnDxBaseWeights + c] * bs" : ""
      };
  }
  for (var sx = 0u; sx <= tt; sx++) { dq += cw[u.dQueryKeyGram + kk(bh, n, tt, sx)] * xp(bh, i32(a + sx), i); }
  for (var sx = tt; sx < len; sx++) { dx += cw[u.dQueryKeyGram + kk(bh, n, sx, tt)] * qn(bh, a + sx, i); }
  ${
        reg
          ? `for (var sx = 0u; sx < len; sx++) {
    dx += (cw[u.dKeyGram + kk(bh, n, tt, sx)] + cw[u.dKeyGram + kk(bh, n, sx, tt)]) * xp(bh, i32(a + sx), i);
  }`
          : ""
      }
  // the statistic E_t = |x_t|^2
  dx += 2.0 * xp(bh, i32(t), i) * cw[u.dStatistic + bh * u.T + t];
  out[(bh * u.T + t) * DK + i] = dq;
  out[u.gDX + (bh * (PAD + u.T + 1u) + PAD + t) * DK + i] = dx;
}`;
  }
}

/**
 * `column_step_grads`: one workgroup per `(b, h, chunk, column)`. Per step `t`: `dy_t = b_t dR_t`,
 * `db_t = dR_t y_t`, `da_t = -dR_t (exp(Pp_t) x_t.base_t + sum_{s<t} Gp[t,s] K[t,s] W_s)` and
 * `d log gamma_r = sum_{t >= r} (Zb_t + sum_{s < r} Z[t,s])` (same segment), where `Z[t,s]` is the
 * share of `Gam[t,s]`: readout `Kq[t,s] dO_t W_s`, exit `[t = e] (x_s.G) W_s` and the solve's
 * `Gp[t+1,s] = Gam[t,s]` (`-dR_{t+1} a_{t+1} K[t+1,s] W_s`), each times `Gam[t,s]`; `Zb_t` the share
 * of `exp(P_t)`: readout `exp(P_t) dO_t q_t.base_t`, exit `exp(P_e) <G, base_e>` (these two from
 * `column_dots`, in `columnBaseDecayShare`) and the right-hand side's `exp(Pp_{t+1}) = exp(P_t)`
 * (`-a_{t+1} exp(Pp_{t+1}) (x_{t+1}.base) dR_{t+1}`). Also leaves `columnDqBaseWeights, columnDxExitWeights, columnDxBaseWeights` for `column_query_key_grads`.
 */
function colGradKernel(s: ChunkShape, reg: boolean, split = false): string {
  // falcon2a's split scan stores no x_t.base_t: its a = 0 leaves no right-hand-side term, and coef_back drops da
  const keyDotBase = (c: string) => split ? "0.0" : `cw[u.columnKeyDotBase + ${c}]`;
  return `
var<workgroup> ww: array<f32, C>;
var<workgroup> dr: array<f32, C>;
var<workgroup> dd: array<f32, C>;
var<workgroup> xg: array<f32, C>;
var<workgroup> zb: array<f32, C>;
var<workgroup> zr: array<f32, C>;
var<workgroup> dl: array<f32, C>;
var<workgroup> zz: array<f32, ${s.RP * s.C}>;
${groupEntry("u.B * H * nck() * DV")}
  let col = wgid % DV;
  let bn = wgid / DV;
  let n = bn % nck();
  let bh = bn / nck();
  let b = bh / H;
  let h = bh % H;
  let a = n * C;
  let len = min(C, u.T - a);
  let e = len - 1u;
  load_column(lid, bh, a, len, col);
  for (var k = lid; k < len; k += WG) {
    let t = a + k;
    let c = ci(bh, t, col);
    ww[k] = cw[u.columnPseudoValues + c];
    dr[k] = cw[u.columnDRightHandSide + c];
    dd[k] = dout[dor(b, h, t, col)];
    xg[k] = cw[u.columnKeyDotDExit + c];
    zb[k] = cw[u.columnBaseDecayShare + c];
    zr[k] = -ga[k] * exp(pp[k]) * ${keyDotBase("c")} * dr[k];
    cw[u.columnDWriteGain + c] = dr[k] * yp(bh, i32(t), col);
    // the per-(t, column) weights of column_query_key_grads: dq's base term, dx's exit and right-hand-side terms
    cw[u.columnDqBaseWeights + c] = exp(pl[k]) * dd[k];
    cw[u.columnDxExitWeights + c] = select(0.0, exp(pl[e] - pl[k]), sg[k] == sg[e]) * ww[k];
    cw[u.columnDxBaseWeights + c] = ga[k] * exp(pp[k]) * dr[k];
    out[u.gDY + (bh * (PAD + u.T) + PAD + t) * DV + col] = cw[u.columnWriteGain + c] * dr[k];
    dl[k] = 0.0;
  }
  workgroupBarrier();
  for (var k = lid; k < len; k += WG) {
    var da = -exp(pp[k]) * ${keyDotBase("ci(bh, a + k, col)")} * dr[k];
    ${
    reg
      ? `for (var sx = 0u; sx < k; sx++) {
      if (sg[sx] == sg[k]) { da -= dr[k] * ww[sx] * exp(pp[k] - pl[sx]) * cw[u.keyGram + kk(bh, n, k, sx)]; }
    }`
      : ""
  }
    cw[u.columnDEraseGain + ci(bh, a + k, col)] = da;
  }
  // sum_{t >= r} sum_{s < r} Z[t,s], RP rows of Z at a time: row prefix sums, then column sums
  for (var t0 = 0u; t0 < len; t0 += RP) {
    for (var q = lid; q < RP * C; q += WG) {
      let t = t0 + q / C;
      let sx = q % C;
      var z = 0.0;
      if (t < len && sx < t && sg[sx] == sg[t]) {
        var d = cw[u.queryKeyGram + kk(bh, n, t, sx)] * dd[t];
        if (t == e) { d += xg[sx]; }
        ${
    reg
      ? `if (t + 1u < len && sg[t + 1u] == sg[t]) { d -= dr[t + 1u] * ga[t + 1u] * cw[u.keyGram + kk(bh, n, t + 1u, sx)]; }`
      : ""
  }
        z = exp(pl[t] - pl[sx]) * d * ww[sx];
      }
      zz[q] = z;
    }
    workgroupBarrier();
    for (var tr = lid; tr < RP; tr += WG) {
      var run = 0.0;
      for (var sx = 0u; sx < C; sx++) {
        let v = zz[tr * C + sx];
        zz[tr * C + sx] = run;
        run += v;
      }
    }
    workgroupBarrier();
    for (var r = lid; r < len; r += WG) {
      var acc = dl[r];
      for (var tr = 0u; tr < RP; tr++) {
        let t = t0 + tr;
        if (t >= r && t < len) { acc += zz[tr * C + r]; }
      }
      dl[r] = acc;
    }
    workgroupBarrier();
  }
  for (var r = lid; r < len; r += WG) {
    var acc = dl[r];
    for (var t = r; t < len; t++) {
      if (sg[t] != sg[r]) { break; }
      acc += zb[t];
      if (t + 1u < len && sg[t + 1u] == sg[t]) { acc += zr[t + 1u]; }
    }
    cw[u.columnDLogDecay + ci(bh, a + r, col)] = acc;
  }
}`;
}

/**
 * `column_gram_grads`: the Gram-matrix gradients summed over the columns, `dKq[t,s] = sum_j Gam_j[t,s] dO_tj W_sj`
 * (`s <= t`) and `dK[t,s] = -sum_j dR_tj W_sj a_tj Gp_j[t,s]` (`s < t`, regression only), same
 * segment only. One invocation per 4 x 4 block of `(t, s)`: per column it loads 4 rows' `t` values
 * and 4 rows' `s` values for 16 entries. Exponents are clamped at 0 (they are never positive inside
 * a segment) and masked entries multiplied by 0, so nothing overflows.
 */
function gramGradKernel(reg: boolean): string {
  const R = [0, 1, 2, 3];
  const each = (f: (r: number, c: number) => string, sep = "\n      ") =>
    R.flatMap((r) => R.map((c) => f(r, c))).join(sep);
  return `
${flatEntry("u.B * H * nck() * SB * SB")}
  let s0b = (idx % SB) * 4u;
  let t0b = ((idx / SB) % SB) * 4u;
  let bn = idx / (SB * SB);
  let n = bn % nck();
  let bh = bn / nck();
  let b = bh / H;
  let h = bh % H;
  let a = n * C;
  let len = min(C, u.T - a);
  ${R.map((r) => `let t${r} = a + min(t0b + ${r}u, len - 1u);`).join("\n  ")}
  ${R.map((r) => `let tm${r} = max(t${r}, a + 1u) - 1u;`).join("\n  ")}
  ${R.map((c) => `let s${c} = a + min(s0b + ${c}u, len - 1u);`).join("\n  ")}
  // 1 where (t, s) is a lower-triangle entry of one segment, 0 elsewhere; e: also s < t
  ${
    each((r, c) =>
      `let m${r}${c} = select(0.0, 1.0, t0b + ${r}u < len && s0b + ${c}u <= t0b + ${r}u && cw[u.startsInChunk + bh * u.T + s${c}] == cw[u.startsInChunk + bh * u.T + t${r}]);
  let e${r}${c} = select(0.0, m${r}${c}, s0b + ${c}u < t0b + ${r}u);`, "\n  ")
  }
  ${each((r, c) => `var q${r}${c} = 0.0;\n  var x${r}${c} = 0.0;`, "\n  ")}
  if (s0b <= t0b + 3u && t0b < len) {
    for (var col = 0u; col < DV; col++) {
      ${
    R.map((r) =>
      `let pt${r} = cw[u.columnLogDecaySum + ci(bh, t${r}, col)];
      let dt${r} = dout[dor(b, h, t${r}, col)];${
        reg
          ? `
      let rt${r} = cw[u.columnDRightHandSide + ci(bh, t${r}, col)] * cw[u.columnEraseGain + ci(bh, t${r}, col)];
      let pm${r} = cw[u.columnLogDecaySum + ci(bh, tm${r}, col)];`
          : ""
      }`
    ).join("\n      ")
  }
      ${
    R.map((c) =>
      `let ps${c} = cw[u.columnLogDecaySum + ci(bh, s${c}, col)];\n      let w${c} = cw[u.columnPseudoValues + ci(bh, s${c}, col)];`
    )
      .join("\n      ")
  }
      ${
    each((r, c) =>
      `q${r}${c} += m${r}${c} * exp(min(pt${r} - ps${c}, 0.0)) * dt${r} * w${c};${
        reg ? `\n      x${r}${c} -= e${r}${c} * exp(min(pm${r} - ps${c}, 0.0)) * rt${r} * w${c};` : ""
      }`
    )
  }
    }
  }
  ${
    each(
      (r, c) =>
        `if (t0b + ${r}u < C && s0b + ${c}u < C) {
    let k = kk(bh, n, t0b + ${r}u, s0b + ${c}u);
    cw[u.dQueryKeyGram + k] = q${r}${c};
    cw[u.dKeyGram + k] = x${r}${c};
  }`,
      "\n  ",
    )
  }
}`;
}

/** WGSL `stores(t, col, v)` for every entry `(t, col)` (tile-relative) of the invocation's blocks of `product`, `v` its value. */
function eachEntry(product: TileProduct, store: (t: string, col: string, v: string) => string): string {
  const g = product.grid.name;
  return eachTileRow(product.grid, (p, r) =>
    `if (${g}On${p}) {
    let tr = ${g}Row${p} * 4u + ${r}u;
    ${
      [0, 1, 2, 3].map((c) =>
        `{ let tc = ${g}Col${p} * 4u + ${c}u; ${
          store("tr", "tc", `${product.acc}${p}_${r}.${component(c)}`)
        } }`
      ).join("\n    ")
    }
  }`);
}

/** Throws where a loop's staged operands need more floats than its kernel's `stage` array holds. */
function checkStage(pass: PerColumnPass, loops: readonly (readonly StagedOperand[])[], floats: number) {
  for (const operands of loops) {
    if (stagedFloats(operands) > floats) {
      throw new RangeError(`${pass}: ${stagedFloats(operands)} staged floats, above its layout's ${floats}`);
    }
  }
}

/**
 * The staged `column_gram` ({@linkcode COLUMN_GRAM_STAGED}): one workgroup per `(b, h, chunk, Gram tile)`
 * (`columnGramLayout` of `chunk_wgsl.ts`: the whole `C x C` at `C <= 64`) computes `K = X X^T` and `Kq = Q X^T` as
 * 4 x 4 register tiles over the key entries, the key and query rows staged slice by slice (16-byte loads where
 * `Dk` and `Dv` are multiples of 4); a staged row past the chunk's `len` steps is 0, so are `K`'s rows and columns
 * there and `Kq`'s rows; `Kq` is stored 0 above the diagonal (`s > t`). With `queryKeyOnly` (falcon2a's split scans,
 * {@linkcode splitsColumnScan}: `K` feeds only the solve, which falcon2a has none of) it computes and stores `Kq` alone.
 */
function stagedGramKernel(s: ChunkShape, queryKeyOnly = false): string {
  const layout = columnGramLayout(s.C);
  const wg = layout.invocations;
  const T4 = layout.tile;
  const single = layout.side === 1;
  // entry (k, i): key entry k of the row of tile step i from `first`
  const rowsT = (value: string, first: string): StagedOperand => ({
    width: T4,
    along: "depth",
    value,
    valid: `${first} + i < len && k < DK`,
    quad: true,
  });
  const keys = rowsT("xp4(bh, i32(a + t0 + i), k)", "t0");
  const queries = rowsT("qn4(bh, a + t0 + i, k)", "t0");
  const columnKeys = rowsT("xp4(bh, i32(a + c0 + i), k)", "c0");
  if (queryKeyOnly) return queryKeyGramKernel(layout, queries, single ? keys : columnKeys);
  const operands = single ? [keys, queries] : [keys, queries, columnKeys];
  checkStage("column_gram", [operands], layout.stage);
  const grid: TileGrid = { name: "gram", rows: T4, cols: T4, invocations: wg };
  const keyGram: TileProduct = { acc: "kx", grid, a: 0, b: single ? 0 : 2 };
  const queryKeyGram: TileProduct = { acc: "kq", grid, a: 1, b: single ? 0 : 2 };
  const kqOf = (v: string) => v.replace(/^kx/, "kq");
  return `
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices
${chunkEntry(`${layout.tiles}u`, false, wg)}
  let t0 = (tile / ${layout.side}u) * ${T4}u;
  let c0 = (tile % ${layout.side}u) * ${T4}u;
  ${gridBlocks(grid)}
  ${declareAccumulators(keyGram)}
  ${declareAccumulators(queryKeyGram)}
  ${stagedLoop("DK", operands, [keyGram, queryKeyGram])}
  ${
    eachEntry(keyGram, (tr, tc, v) =>
      `let t = t0 + ${tr}; let sx = c0 + ${tc}; if (t < C && sx < C) {
      cw[u.keyGram + kk(bh, n, t, sx)] = ${v};
      cw[u.queryKeyGram + kk(bh, n, t, sx)] = select(0.0, ${kqOf(v)}, sx <= t);
    }`)
  }
}`;
}

/**
 * {@linkcode stagedGramKernel} of `Kq = Q X^T` alone (falcon2a's split scans): the query rows of the tile's rows and the
 * key rows of its columns staged slice by slice, `Kq` stored 0 above the diagonal.
 */
function queryKeyGramKernel(
  layout: ReturnType<typeof columnGramLayout>,
  queries: StagedOperand,
  columnKeys: StagedOperand,
): string {
  const operands = [queries, columnKeys];
  checkStage("column_gram", [operands], layout.stage);
  const grid: TileGrid = {
    name: "gram",
    rows: layout.tile,
    cols: layout.tile,
    invocations: layout.invocations,
  };
  const queryKeyGram: TileProduct = { acc: "kq", grid, a: 0, b: 1 };
  return `
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices
${chunkEntry(`${layout.tiles}u`, false, layout.invocations)}
  let t0 = (tile / ${layout.side}u) * ${layout.tile}u;
  let c0 = (tile % ${layout.side}u) * ${layout.tile}u;
  ${gridBlocks(grid)}
  ${declareAccumulators(queryKeyGram)}
  ${stagedLoop("DK", operands, [queryKeyGram])}
  ${
    eachEntry(queryKeyGram, (tr, tc, v) =>
      `let t = t0 + ${tr}; let sx = c0 + ${tc}; if (t < C && sx < C) {
      cw[u.queryKeyGram + kk(bh, n, t, sx)] = select(0.0, ${v}, sx <= t);
    }`)
  }
}`;
}

/**
 * The tiled `column_readout` ({@linkcode COLUMN_READOUT_TILED}): one workgroup per `(b, h, chunk, tile of rows x
 * value columns)` (`columnReadoutLayout` of `chunk_wgsl.ts`: the whole chunk and up to 64 columns per tile), 4 x 4
 * register tiles of `o[t, col]` over staged slices:
 * 1. `q_t.s_in[:, col]` over the key entries, the rows before the chunk's first start (`startsInChunk` 0);
 * 2. with `S0`, `q_t.S0[:, col]` for the rows after a start; then the sum times `exp(P[t, col])`;
 * 3. `sum_s Kq[t,s] exp(P[t,col] - P[s,col]) W[s,col]` over the chunk's steps: `Kq` staged masked to `s <= t` in
 *    `t`'s segment, `W` and `P` staged by column, the decay a per-term factor of the product (its exponent clamped at
 *    0 before `exp`: never positive inside a segment, and the masked terms are 0 whatever it is). With the whole
 *    chunk in one tile, a block skips the slices of steps past its rows.
 */
function tiledReadoutKernel(s: ChunkShape): string {
  const layout = columnReadoutLayout(s);
  const wg = layout.invocations;
  const [R4, V4] = [layout.rows, layout.cols];
  const queriesT = (base: string): StagedOperand => ({
    width: R4,
    along: "depth",
    value: "qn4(bh, a + r0 + i, k)",
    valid: `r0 + i < len && k < DK && sgw[r0 + i] ${base === "entering" ? "==" : "!="} 0u`,
    quad: true,
  });
  const byColumn = (value: string, valid: string): StagedOperand => ({
    width: V4,
    along: "width",
    value,
    valid: `${valid} && c0 + i < DV`,
  });
  const entering = byColumn("cw[u.entryState + si(bh, n, k, c0 + i)]", "k < DK");
  const initial = byColumn("s0[s0i(bh, k, c0 + i)]", "k < DK");
  // Kq[t, s] (entry (s, t - r0)): 0 past s <= t and outside t's segment
  const gramT: StagedOperand = {
    width: R4,
    along: "depth",
    value: "query_key_gram(bh, n, r0 + i, k)",
    valid: "r0 + i < len && k <= r0 + i && sgw[k] == sgw[r0 + i]",
  };
  const values = byColumn("cw[u.columnPseudoValues + ci(bh, a + k, c0 + i)]", "k < len");
  const decays = byColumn("cw[u.columnLogDecaySum + ci(bh, a + k, c0 + i)]", "k < len");
  const loops = [[queriesT("entering"), entering], [queriesT("initial"), initial], [gramT, values, decays]];
  checkStage("column_readout", loops, layout.stage);
  const grid: TileGrid = { name: "out", rows: R4, cols: V4, invocations: wg };
  const inter: TileProduct = { acc: "o", grid, a: 0, b: 1 };
  const intra: TileProduct = {
    acc: "o",
    grid,
    a: 0,
    b: 1,
    lowerA: layout.rowTiles === 1,
    weight: { operand: 2, factor: (p, r, v) => `exp(min(pt${p}_${r} - ${v}, vec4<f32>(0.0)))` },
  };
  // P[t, col] of row r of block p (clamped into the chunk and the columns: finite where nothing is stored)
  const decayRows = eachTileRow(grid, (p, r) => {
    const t = `a + min(r0 + outRow${p} * 4u + ${r}u, len - 1u)`;
    const at = (c: number) =>
      `cw[u.columnLogDecaySum + ci(bh, ${t}, min(c0 + outCol${p} * 4u + ${c}u, DV - 1u))]`;
    return `let pt${p}_${r} = vec4<f32>(${[0, 1, 2, 3].map(at).join(", ")});
  o${p}_${r} *= exp(pt${p}_${r});`;
  });
  return `
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices
var<workgroup> sgw: array<u32, C>; // sequence starts in a..t (0: the entering state is t's base)
// Kq[t, s] of chunk n (the staged loads name their depth row kk)
fn query_key_gram(bh: u32, n: u32, t: u32, s: u32) -> f32 { return cw[u.queryKeyGram + kk(bh, n, t, s)]; }
${chunkEntry(`${layout.tiles}u`, false, wg)}
  let h = bh % H;
  let r0 = (tile / ${layout.colTiles}u) * ${R4}u;
  let c0 = (tile % ${layout.colTiles}u) * ${V4}u;
  for (var k = lid; k < len; k += ${wg}u) { sgw[k] = u32(cw[u.startsInChunk + bh * u.T + a + k]); }
  workgroupBarrier();
  ${gridBlocks(grid)}
  ${declareAccumulators(inter)}
  // 1. the rows whose base is the entering state
  ${stagedLoop("DK", loops[0], [inter])}
  // 2. the rows whose base is S0 (none without one), then exp(P_t) times the sum
  let s0Depth = select(0u, DK, u.hasS0 != 0u);
  ${stagedLoop("s0Depth", loops[1], [inter])}
  ${decayRows}
  // 3. the intra-chunk part
  ${stagedLoop(layout.rowTiles === 1 ? "len" : `min(len, r0 + ${R4}u)`, loops[2], [intra])}
  ${
    eachEntry(intra, (tr, tc, v) =>
      `let t = r0 + ${tr}; let col = c0 + ${tc}; if (t < len && col < DV) { out[dor(b, h, a + t, col)] = ${v}; }`)
  }
}`;
}

/**
 * falcon2a's `column_state_increment` ({@linkcode splitsColumnScan}): one workgroup per `(b, h, chunk, tile of key rows
 * x value columns)` (`columnIncrementLayout` of `chunk_wgsl.ts`: up to 64 x 64, the whole state at `Dk, Dv <= 64`)
 * computes the chunk's state increment `sum_k Gam[e,k] x_k W_k[col]` (the exit step `e`'s segment; `Gam[e,k] W_k`
 * staged per column as one operand) as 4 x 4 register tiles over the chunk's steps, and stores it where
 * `column_increment_scan` reads it: in the slot of the next chunk's entering state (which that scan then
 * overwrites), the last chunk's in `finalState`.
 */
function stateIncrementKernel(s: ChunkShape): string {
  const layout = columnIncrementLayout(s);
  const wg = layout.invocations;
  const [R4, V4] = [layout.rows, layout.cols];
  // entry (k, i): key entry i0 + i of step k; decayed pseudo-value of column c0 + i at step k (0 outside e's segment)
  const keys: StagedOperand = {
    width: R4,
    along: "width",
    value: "xp4(bh, i32(a + k), i0 + i)",
    valid: "k < len && i0 + i < DK",
    quad: true,
  };
  const weights: StagedOperand = {
    width: V4,
    along: "width",
    value: "exit_weight(bh, a, ex, k, c0 + i)",
    valid: "k < len && c0 + i < DV && sgw[k] == sgw[ex]",
  };
  const operands = [keys, weights];
  checkStage("column_state_increment", [operands], layout.stage);
  const grid: TileGrid = { name: "inc", rows: R4, cols: V4, invocations: wg };
  const increment: TileProduct = { acc: "d", grid, a: 0, b: 1 };
  return `
var<workgroup> stage: array<vec4<f32>, ${layout.stage / 4}>; // the staged slices
var<workgroup> sgw: array<u32, C>; // sequence starts in a..t
// Gam[e,k] W_k of column col (step k in the exit step e's segment)
fn exit_weight(bh: u32, a: u32, e: u32, k: u32, col: u32) -> f32 {
  let pe = cw[u.columnLogDecaySum + ci(bh, a + e, col)];
  return exp(pe - cw[u.columnLogDecaySum + ci(bh, a + k, col)]) * cw[u.columnPseudoValues + ci(bh, a + k, col)];
}
${chunkEntry(`${layout.tiles}u`, false, wg)}
  let i0 = (tile / ${layout.colTiles}u) * ${R4}u;
  let c0 = (tile % ${layout.colTiles}u) * ${V4}u;
  // the exit step (the staged loads name their index e)
  let ex = len - 1u;
  for (var k = lid; k < len; k += ${wg}u) { sgw[k] = u32(cw[u.startsInChunk + bh * u.T + a + k]); }
  workgroupBarrier();
  ${gridBlocks(grid)}
  ${declareAccumulators(increment)}
  ${stagedLoop("len", operands, [increment])}
  // the next chunk's entering-state slot (the last chunk's: finalState)
  let last = n + 1u == nck();
  ${
    eachEntry(increment, (tr, tc, v) =>
      `let i = i0 + ${tr}; let col = c0 + ${tc}; if (i < DK && col < DV) {
      cw[select(u.entryState + si(bh, n + 1u, i, col), u.finalState + s0i(bh, i, col), last)] = ${v};
    }`)
  }
}`;
}

/**
 * falcon2a's `column_increment_scan` ({@linkcode splitsColumnScan}): one invocation per state element `(b, h, i, col)`
 * walks the chunks in order: stores the entering state `s_in` of chunk `n`, then its exit state
 * `exp(P_e) base_e + increment` (`base_e`: `s_in` where the chunk has no start, else `S0` or 0), the increment read
 * from the slot `column_state_increment` left it in (the next chunk's entering state, or `finalState`); the next
 * chunk's reads are issued before the store, so they are in flight while it waits on the state.
 */
const INCREMENT_SCAN = `
${flatEntry("u.B * H * DK * DV")}
  let col = idx % DV;
  let i = (idx / DV) % DK;
  let bh = idx / (DK * DV);
  var st = select(0.0, init[idx], u.hasInit != 0u);
  let sz = select(0.0, s0[idx], u.hasS0 != 0u);
  // chunk n's exit step e: its log-decay sum, whether its segment began at a start, the increment
  var e = min(C, u.T) - 1u;
  var pe = cw[u.columnLogDecaySum + ci(bh, e, col)];
  var fromS0 = cw[u.startsInChunk + bh * u.T + e] != 0.0;
  var inc = cw[select(u.entryState + si(bh, 1u, i, col), u.finalState + idx, nck() == 1u)];
  for (var n = 0u; n < nck(); n++) {
    let p = pe;
    let z = fromS0;
    let d = inc;
    if (n + 1u < nck()) {
      let a = (n + 1u) * C;
      e = a + min(C, u.T - a) - 1u;
      pe = cw[u.columnLogDecaySum + ci(bh, e, col)];
      fromS0 = cw[u.startsInChunk + bh * u.T + e] != 0.0;
      inc = cw[select(u.entryState + si(bh, n + 2u, i, col), u.finalState + idx, n + 2u == nck())];
    }
    cw[u.entryState + si(bh, n, i, col)] = st;
    st = exp(p) * select(st, sz, z) + d;
  }
  cw[u.finalState + idx] = st;
}`;

/**
 * falcon2a's `column_gradient_scan` ({@linkcode splitsColumnScan}): one invocation per state element `(b, h, i, col)`
 * walks the chunks in reverse from `G = 0` after the last: stores `G` (`dExitState` of chunk `n`), then with the
 * readout's parts `columnDBaseReadout` of the chunk (`sum exp(P_t) q_t dO_t`, split by base) and the exit's
 * `exp(P_e) G` (on the exit step's base) the gradient of the entering state (the `G` of chunk `n - 1`) and the chunk's
 * share of `dS0`; ends with `dCarryState` (the first chunk's) and `dS0`. The additive rule has no right-hand-side
 * term (`a = 0`), so no chunk step enters; the earlier chunk's reads are issued before the store.
 */
const GRADIENT_SCAN = `
${flatEntry("u.B * H * DK * DV")}
  let col = idx % DV;
  let i = (idx / DV) % DK;
  let bh = idx / (DK * DV);
  var g = 0.0;
  var ds = 0.0;
  // chunk n's exit step e: its log-decay sum, whether its segment began at a start, the readout parts of the chunk
  var n = nck() - 1u;
  var e = u.T - 1u;
  var pe = cw[u.columnLogDecaySum + ci(bh, e, col)];
  var fromS0 = cw[u.startsInChunk + bh * u.T + e] != 0.0;
  var o = u.columnDBaseReadout + (bh * nck() + n) * 2u * DK * DV + i * DV + col;
  var r0 = cw[o];
  var r1 = cw[o + DK * DV];
  for (var rn = 0u; rn < nck(); rn++) {
    let p = pe;
    let z = fromS0;
    let d0 = r0;
    let d1 = r1;
    if (n > 0u) {
      e = n * C - 1u;
      pe = cw[u.columnLogDecaySum + ci(bh, e, col)];
      fromS0 = cw[u.startsInChunk + bh * u.T + e] != 0.0;
      o = u.columnDBaseReadout + (bh * nck() + n - 1u) * 2u * DK * DV + i * DV + col;
      r0 = cw[o];
      r1 = cw[o + DK * DV];
    }
    cw[u.dExitState + si(bh, n, i, col)] = g;
    let ce = exp(p) * g;
    ds += d1 + select(0.0, ce, z);
    g = d0 + select(ce, 0.0, z);
    n = max(n, 1u) - 1u;
  }
  out[u.gDC + idx] = g;
  out[u.gDS0 + idx] = ds;
}`;

/**
 * Value columns per workgroup of the per-column scans `column_state_scan` and `column_reverse_scan` (a power of
 * two): each chunk's keys `X` are staged once in workgroup memory for all of them, so `X` and `K` are read
 * `Dv / COLUMN_SCAN_COLUMNS` times per `(b, h)` instead of `Dv` times. 1 generates the single-column kernels
 * (one workgroup of {@linkcode CHUNK_WG} invocations per column, `X` and `K` read from storage per column).
 * {@linkcode columnScanTiling} takes fewer where the workgroup memory does not hold them.
 */
export const COLUMN_SCAN_COLUMNS = 32;

/**
 * Whether the grouped column scans load each chunk's step arrays (`sg, pl, pp, ga`: sequence starts, `P`, `Pp`, `a`)
 * one chunk ahead into registers ({@linkcode prefetchedStepArrays}), so the storage round trip overlaps the chunk
 * before; false: `load_columns` at each chunk's start (loads, then stores, in a loop of run-time trip count).
 */
export const COLUMN_SCAN_STEP_PREFETCH: boolean = true;

/**
 * The workgroup arrays of the grouped column scans, declared as 4-vectors (`packWorkgroupArrays`: their few
 * thousand scalars took llvmpipe minutes to compile).
 */
const COLUMN_SCAN_ARRAYS = {
  state: ["sc", "sg", "pl", "pp", "ga", "wv", "xsl"],
  reverse: ["gs", "sg", "pl", "pp", "ga", "dr", "xsl"],
} as const;

/**
 * Invocations per workgroup of the grouped column scans at most (`CHUNK_WG` per column up to this, and up to the
 * device's `maxComputeInvocationsPerWorkgroup`): with 32 columns, 16 row lanes per column at 512 (8 at 256). The scans
 * are bound by each invocation's serial share of a chunk's rows, so more lanes per column run them faster: on the
 * H200 (2026-12-04 04:18 UTC, falcon2, 8x4096x8x64) 512 took `column_state_scan` from 3.38 to 2.56 ms at C = 64 and to
 * 1.87 ms at C = 32 (2.50 at 256); 1024 (32 lanes) was slower, 4.35 ms at C = 64 (docs/performance.md "Eleventh
 * round").
 */
export const COLUMN_SCAN_WG_MAX = 512;

/**
 * Workgroup bytes the grouped column scans take at most, whatever the device allows (48 KiB: more would only
 * cut the workgroups an H200 SM holds, not the reuse of a staged key).
 */
export const COLUMN_SCAN_SHARED_MAX = 49152;

/** The layout of a grouped column scan (`CS > 1`) at shape `s` (`SW` invocations per workgroup). */
export function columnScanLayout(s: Pick<ChunkShape, "dk" | "C" | "CS" | "CX" | "SW">) {
  const WG = s.SW;
  // invocations per column (row lanes): the invocation lid serves column lid % CS, rows lid / CS + RL m
  const RL = WG / s.CS;
  const slices = Math.ceil(s.C / s.CX);
  // staged rows per slice, whole 4-row blocks (the rows past the chunk's end staged as 0)
  const CX4 = roundUp4(s.CX);
  // stride of a staged key row: odd, so the rows the lanes of a warp read lie in distinct banks
  const XS = COLUMN_SCAN_VEC4_DOTS ? vec4RowStride(s.dk) : s.dk | 1;
  // rows of the step arrays that the slices' 4-row blocks read (zero past the chunk's end)
  const WR = slices * CX4;
  // sg (WR), pl, pp, ga (C x CS), the pseudo-values / right-hand sides (WR x CS), the state columns (Dk x CS), a slice of X
  const floats = WR + 3 * s.C * s.CS + WR * s.CS + columnStateFloats(s) + CX4 * XS;
  return { WG, RL, slices, CX4, XS, WR, floats };
}

/**
 * The tiling of the per-column scans at key size `dk` and chunk size `C` on a device with `sharedBytes` of
 * workgroup memory and `invocations` per workgroup at most (`maxComputeInvocationsPerWorkgroup`; WebGPU's default
 * limit 256 where not given): `CS` value columns per workgroup ({@linkcode COLUMN_SCAN_COLUMNS}, halved until the
 * arrays fit {@linkcode COLUMN_SCAN_SHARED_MAX} and the device), `CX` chunk rows of `X` per staged slice (the whole
 * chunk where it fits, else the most whole 4-row blocks, at least one) and `SW` invocations per workgroup
 * (`CHUNK_WG` per column, up to {@linkcode COLUMN_SCAN_WG_MAX} and the largest power of two within `invocations`);
 * `CS = 1` (and `CX = SW = 0`): the single-column kernels.
 */
export function columnScanTiling(
  d: { dk: number; dv: number; C: number },
  sharedBytes: number,
  invocations = 256,
  columns: number = COLUMN_SCAN_COLUMNS,
): { CS: number; CX: number; SW: number } {
  if (!Number.isInteger(Math.log2(columns))) {
    throw new RangeError(`COLUMN_SCAN_COLUMNS = ${columns}: expected a power of two`);
  }
  const limit = Math.floor(Math.min(sharedBytes, COLUMN_SCAN_SHARED_MAX) / 4) - 16;
  const slices = [d.C];
  for (let cx = Math.ceil(d.C / 4) * 4 - 4; cx >= 4; cx -= 4) slices.push(cx);
  const widestGroup = Math.min(COLUMN_SCAN_WG_MAX, 2 ** Math.floor(Math.log2(Math.max(invocations, 1))));
  // no more columns than the power of two that holds Dv (the rest would be guard columns)
  const most = Math.min(columns, widestGroup, 2 ** Math.ceil(Math.log2(Math.max(d.dv, 1))));
  for (let CS = most; CS > 1; CS >>= 1) {
    const SW = Math.min(CHUNK_WG * CS, widestGroup);
    const widest = slices.find((cx) => columnScanLayout({ ...d, CS, CX: cx, SW }).floats <= limit);
    if (widest === undefined) continue;
    // as many slices as the widest that fits takes, evened out (less padding past the chunk's end)
    const n = Math.ceil(d.C / widest);
    return { CS, CX: n === 1 ? d.C : roundUp4(Math.ceil(d.C / n)), SW };
  }
  return { CS: 1, CX: 0, SW: 0 };
}

/** `0..n-1`. */
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i);

/** `n` copies of `f(r)` (the rows `lane + r RL` an invocation owns), joined at `indent`. */
function laneRows(n: number, f: (r: number) => string, indent = "\n    "): string {
  return upTo(n).map(f).join(indent);
}

/**
 * WGSL adding to the vec4 `acc` the dot product of staged key row `row` (a float offset into `xsl`) with the
 * column `at(i)` (a WGSL value per key index), written out 4 key indices per step (4 partial sums).
 */
function stagedRowDot(acc: string, row: string, at: (i: string) => string, dk: number): string {
  const dk4 = dk - (dk % 4);
  const v = (f: (m: number) => string) => `vec4<f32>(${upTo(4).map(f).join(", ")})`;
  const main = dk4 > 0
    ? `for (var i = 0u; i < ${dk4}u * one; i += 4u) {
          ${acc} += ${v((m) => `xsl[${row} + i + ${m}u]`)} * ${v((m) => at(`i + ${m}u`))};
        }`
    : "";
  const rest = upTo(dk % 4).map((m) => `${acc}.x += xsl[${row} + ${dk4 + m}u] * ${at(`${dk4 + m}u`)};`);
  return [main, ...rest].filter((x) => x !== "").join("\n        ");
}

/**
 * Whether the grouped column scans take the dot products of their right-hand sides (`x_t.base_t`, `x_t.G`) 4 key
 * indices per workgroup load: a staged key row's stride a multiple of 4 ({@linkcode vec4RowStride}) and the state
 * columns `sc` / `gs` with 4 key rows of a column adjacent (element `(i, col)` at `((i >> 2) CS + col) 4 + (i & 3)`),
 * so each step of the dot product reads two 4-vectors, and the exit sums address a staged row's entries as
 * components of its 4-vectors (the index split hoisted out of the loop); false: 8 scalar loads per step (a staged
 * row's stride odd, the state columns at `i CS + col`), each access through `packWorkgroupArrays`' index split. Needs
 * `CS % 4 == 0` (else the earlier form).
 */
export const COLUMN_SCAN_VEC4_DOTS: boolean = true;

/** Whether a grouped scan at shape `s` takes the 4-vector dot products ({@linkcode COLUMN_SCAN_VEC4_DOTS}). */
function vec4Dots(s: Pick<ChunkShape, "CS">): boolean {
  return COLUMN_SCAN_VEC4_DOTS && s.CS % 4 === 0;
}

/**
 * The stride of a staged key row in the 4-vector dot products: `Dk` rounded up to a multiple of 4, and 4 more where
 * that is a multiple of 8 (rows of adjacent row lanes then start in other banks).
 */
function vec4RowStride(dk: number): number {
  const r = roundUp4(dk);
  return r % 8 === 0 ? r + 4 : r;
}

/** Floats of a grouped scan's state columns (`sc` / `gs`: `Dk` rows, rounded up to 4 in the 4-vector form). */
function columnStateFloats(s: Pick<ChunkShape, "dk" | "CS">): number {
  return (vec4Dots(s) ? roundUp4(s.dk) : s.dk) * s.CS;
}

/**
 * The grouped scans' state column `name` (`sc` or `gs`) at key row `i` (WGSL) of the invocation's column: the
 * earlier text `name[i CS + col]`, or in the 4-vector layout ({@linkcode COLUMN_SCAN_VEC4_DOTS}) its component.
 */
function stateAt(s: Pick<ChunkShape, "CS">, name: string, i: string, plain: string): string {
  return vec4Dots(s) ? `${name}.v4[((${i}) >> 2u) * CS + col][(${i}) & 3u]` : plain;
}

/**
 * WGSL adding to the vec4 `acc` the dot product of staged key row `tt` with a state column in the 4-vector form
 * ({@linkcode COLUMN_SCAN_VEC4_DOTS}): `at4(i4)` the column's key indices `4 i4 ..` as a 4-vector, `at(i)` one (for
 * the last `Dk % 4`).
 */
function stagedRowDot4(
  acc: string,
  tt: string,
  at4: (i4: string) => string,
  at: (i: string) => string,
  dk: number,
): string {
  const dk4 = dk - (dk % 4);
  const main = dk4 > 0
    ? `for (var i4 = 0u; i4 < ${dk4 / 4}u * one; i4++) {
          ${acc} += xsl.v4[${tt} * XS4 + i4] * ${at4("i4")};
        }`
    : "";
  const rest = upTo(dk % 4).map((m) => `${acc}.x += xsl[${tt} * XS + ${dk4 + m}u] * ${at(`${dk4 + m}u`)};`);
  return [main, ...rest].filter((x) => x !== "").join("\n        ");
}

/** The grouped column scans' step-array load (the form without {@linkcode COLUMN_SCAN_STEP_PREFETCH}). */
const LOAD_COLUMNS =
  `// the chunk's step arrays, step k of column col at k * CS + col: sg (sequence starts in a..t), pl (P), pp (Pp), ga (a)
fn load_columns(lid: u32, lane: u32, col: u32, cc: u32, bh: u32, a: u32, len: u32) {
  workgroupBarrier();
  for (var k = lid; k < len; k += SWG) { sg[k] = u32(cw[u.startsInChunk + bh * u.T + a + k]); }
  for (var k = lane; k < len; k += RL) {
    let km = max(k, 1u) - 1u;
    let j = k * CS + col;
    pl[j] = cw[u.columnLogDecaySum + ci(bh, a + k, cc)];
    ga[j] = cw[u.columnEraseGain + ci(bh, a + k, cc)];
    let same = k > 0u && cw[u.startsInChunk + bh * u.T + a + k] == cw[u.startsInChunk + bh * u.T + a + km];
    pp[j] = select(0.0, cw[u.columnLogDecaySum + ci(bh, a + km, cc)], same);
  }
  workgroupBarrier();
}
`;

/**
 * The shared head of both grouped column scans: constants, workgroup arrays, the step-array load `load_columns`,
 * the slice staging `stage_x` and the entry point up to the invocation's column (`col` in the group, `c` in the
 * state, `cc` clamped to the last column for loads, `live` where it exists) and key rows `i0, i1, ..` (clamped).
 */
function columnScanHead(s: ChunkShape, values: string): string {
  const L = columnScanLayout(s);
  const loads = Math.ceil((L.CX4 * s.dk) / L.WG);
  const RI = Math.ceil(s.dk / L.RL);
  return `
const CS = ${s.CS}u;
const SWG = ${L.WG}u;
const RL = ${L.RL}u;
const CX = ${s.CX}u;
const CX4 = ${L.CX4}u;
const XS = ${L.XS}u;
${vec4Dots(s) ? `const XS4 = ${L.XS / 4}u;\n` : ""}const WR = ${L.WR}u;
var<workgroup> sg: array<u32, ${L.WR}>;
var<workgroup> pl: array<f32, ${s.C * s.CS}>;
var<workgroup> pp: array<f32, ${s.C * s.CS}>;
var<workgroup> ga: array<f32, ${s.C * s.CS}>;
var<workgroup> ${values}: array<f32, ${L.WR * s.CS}>;
var<workgroup> xsl: array<f32, ${L.CX4 * L.XS}>;
${
    COLUMN_SCAN_STEP_PREFETCH
      ? ""
      : LOAD_COLUMNS
  }// rows x0.. of the chunk's keys into xsl (row r at r * XS), 0 past its end: coalesced loads, all issued before the stores
fn stage_x(lid: u32, bh: u32, a: u32, len: u32, x0: u32) {
  ${
    upTo(loads).map((m) =>
      `let q${m} = lid + ${m * L.WG}u;
  let v${m} = select(0.0, xp(bh, i32(a + min(x0 + q${m} / DK, len - 1u)), q${m} % DK), x0 + q${m} / DK < len);`
    ).join("\n  ")
  }
  ${
    upTo(loads).map((m) => {
      const store = `xsl[(q${m} / DK) * XS + q${m} % DK] = v${m};`;
      return (m + 1) * L.WG > L.CX4 * s.dk ? `if (q${m} < CX4 * DK) { ${store} }` : store;
    }).join("\n  ")
  }
}
@compute @workgroup_size(SWG)
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wgid = gid.y * nwg.x + gid.x;
  let ncg = (DV + CS - 1u) / CS;
  if (wgid >= u.B * H * ncg) { return; }
  let bh = wgid / ncg;
  let col = lid % CS;
  let lane = lid / CS;
  let c = (wgid % ncg) * CS + col;
  let cc = min(c, DV - 1u);
  let live = c < DV;
  // 1, unknown to the compiler: the key and slice loops keep their trip counts at run time (llvmpipe unrolls loops
  // of known trip count, which took it three times as long to compile these kernels; a GPU unrolls them anyway)
  let one = min(u.B, 1u);
  ${laneRows(RI, (r) => `let i${r} = min(lane + ${r * L.RL}u, DK - 1u);`, "\n  ")}`;
}

/**
 * The grouped column scans' step arrays with {@linkcode COLUMN_SCAN_STEP_PREFETCH}: each invocation holds in
 * registers its share of the next chunk's storage loads (the values `load_columns` reads), issued at the start of
 * the chunk before, so a chunk's arrays are stored without waiting on storage. `first` is the WGSL of the scan's
 * first chunk, `next` of the chunk after `n` and `hasNext` whether there is one. `init` (before the chunk loop)
 * declares the registers and issues the first chunk's loads; `load` (at the start of chunk `n`, with its `a` and
 * `len`) stores the chunk's arrays from them between two barriers and issues the next chunk's loads.
 */
function prefetchedStepArrays(s: ChunkShape, first: string, next: string, hasNext: string) {
  const L = columnScanLayout(s);
  const RK = Math.ceil(s.C / L.RL);
  const RG = Math.ceil(s.C / L.WG);
  const names = ["pl", "ga", "pm", "st", "sm"];
  const loads = (chunk: string, indent: string) =>
    `{
  let a = (${chunk}) * C;
  let len = min(C, u.T - a);
  ${
      upTo(RG).map((g) =>
        `if (lid + ${g * L.WG}u < len) { pf_sg${g} = cw[u.startsInChunk + bh * u.T + a + lid + ${
          g * L.WG
        }u]; }`
      ).join("\n  ")
    }
  ${
      upTo(RK).map((r) =>
        `{
    let k = lane + ${r * L.RL}u;
    if (k < len) {
      let km = max(k, 1u) - 1u;
      pf_pl${r} = cw[u.columnLogDecaySum + ci(bh, a + k, cc)];
      pf_ga${r} = cw[u.columnEraseGain + ci(bh, a + k, cc)];
      pf_pm${r} = cw[u.columnLogDecaySum + ci(bh, a + km, cc)];
      pf_st${r} = cw[u.startsInChunk + bh * u.T + a + k];
      pf_sm${r} = cw[u.startsInChunk + bh * u.T + a + km];
    }
  }`
      ).join("\n  ")
    }
}`.replaceAll("\n", `\n${indent}`);
  const init = `// the step arrays of each chunk (sg, pl, pp, ga), loaded into registers one chunk ahead
  ${upTo(RG).map((g) => `var pf_sg${g} = 0.0;`).join("\n  ")}
  ${upTo(RK).map((r) => names.map((v) => `var pf_${v}${r} = 0.0;`).join(" ")).join("\n  ")}
  ${loads(first, "  ")}`;
  const load = `// the chunk's step arrays from the registers, then the next chunk's loads
    workgroupBarrier();
    ${
    upTo(RG).map((g) => `if (lid + ${g * L.WG}u < len) { sg[lid + ${g * L.WG}u] = u32(pf_sg${g}); }`).join(
      "\n    ",
    )
  }
    ${
    upTo(RK).map((r) =>
      `{
      let k = lane + ${r * L.RL}u;
      if (k < len) {
        let j = k * CS + col;
        pl[j] = pf_pl${r};
        ga[j] = pf_ga${r};
        pp[j] = select(0.0, pf_pm${r}, k > 0u && pf_st${r} == pf_sm${r});
      }
    }`
    ).join("\n    ")
  }
    if (${hasNext}) ${loads(next, "    ")}
    workgroupBarrier();`;
  return { init, load };
}

/**
 * WGSL looping `body` over the slices of the chunk `a..a+len` (`x0` their first row), staging each into `xsl`
 * (`restage` false: the slice the last loop staged is still there, as when the chunk is one slice).
 */
function overSlices(s: ChunkShape, body: string, restage = true): string {
  const stage = restage || columnScanLayout(s).slices > 1;
  return `for (var x0 = 0u; x0 < len; x0 += CX) {
      ${stage ? "workgroupBarrier();\n      stage_x(lid, bh, a, len, x0);\n      workgroupBarrier();" : ""}
      ${body}
    }`;
}

/** WGSL of the slice rows `k = x0 + tt` an invocation owns in `overSlices` (`body` where `k < len`). */
function sliceRows(s: ChunkShape, body: string): string {
  const L = columnScanLayout(s);
  return laneRows(Math.ceil(s.CX / L.RL), (r) =>
    `{
        let tt = lane + ${r * L.RL}u;
        let k = x0 + tt;
        if (tt < CX && k < len) {
          ${body}
        }
      }`, "\n      ");
}

/**
 * WGSL accumulating, over the staged slices, `acc{r} += sum_k xsl[k, i{r}] * vals(k)` for the invocation's key
 * rows (`vals`: WGSL declaring the vec4s named in `terms` for the 4 rows `x0 + k..` from a WGSL row index;
 * `terms`: the accumulators and their vec4 factors).
 */
function keyRowSums(s: ChunkShape, vals: (row: (m: number) => string) => string, terms: [string, string][]) {
  const L = columnScanLayout(s);
  const RI = Math.ceil(s.dk / L.RL);
  const row = (m: number) => `(x0 + k + ${m}u)`;
  // in the 4-vector form a staged row is XS4 4-vectors, key index i at [i >> 2][i & 3] of it
  const v4 = vec4Dots(s);
  const decl = laneRows(RI, (r) =>
    [
      ...terms.map(([acc]) => `var ${acc}${r} = vec4<f32>(0.0);`),
      ...(v4 ? [`let iq${r} = i${r} >> 2u;`, `let ir${r} = i${r} & 3u;`] : []),
    ].join("\n    "));
  const staged = (m: number, r: number) =>
    v4 ? `xsl.v4[(k + ${m}u) * XS4 + iq${r}][ir${r}]` : `xsl[(k + ${m}u) * XS + i${r}]`;
  const sums = laneRows(RI, (r) =>
    `{
          let xv = vec4<f32>(${upTo(4).map((m) => staged(m, r)).join(", ")});
          ${terms.map(([acc, g]) => `${acc}${r} += xv * ${g};`).join("\n          ")}
        }`, "\n        ");
  return `${decl}
    ${
    overSlices(
      s,
      `for (var k = 0u; k < CX4 * one; k += 4u) {
        ${vals(row)}
        ${sums}
      }`,
      false,
    )
  }`;
}

/**
 * The per-invocation rows of a grouped column scan at shape `s`: its layout `L`, the key rows `RI` and chunk rows
 * `RK` an invocation owns (`lane + RL m`), and `keyRows(body)`: WGSL running `body` for each of its key rows `i`
 * below `DK` (`$r` in `body` is the row's number `m`).
 */
function columnScanRows(s: ChunkShape) {
  const L = columnScanLayout(s);
  const RI = Math.ceil(s.dk / L.RL);
  const RK = Math.ceil(s.C / L.RL);
  const keyRows = (body: string) =>
    laneRows(
      RI,
      (r) =>
        `{\n      let i = lane + ${r * L.RL}u;\n      if (i < DK) { ${
          body.replaceAll("$r", `${r}`)
        } }\n    }`,
    );
  return { L, RI, RK, keyRows };
}

/**
 * `column_state_scan` with `CS > 1` columns per workgroup (`columnScanLayout`: `RL` invocations per column, each
 * owning chunk rows and key rows `lane + RL m`): per chunk the step arrays of the group's columns, then per slice
 * of `X` staged once for all of them the right-hand sides `R_t` (and `x_t.base_t`), the forward substitution
 * (falcon2) as a sweep with one barrier per step for all the columns (each invocation loads its rows' next `K`
 * entries one step ahead, the group's columns of a row in adjacent lanes), `Gam[e,k] W_k` in place of `W`, and the
 * exit state per `(i, column)` from the staged slices in 4 partial sums.
 */
function columnStateScanKernel(s: ChunkShape, reg: boolean): string {
  const { L, RI, RK, keyRows } = columnScanRows(s);
  const sc = (i: string) => stateAt(s, "sc", i, `sc[(${i}) * CS + col]`);
  const sc4 = (i4: string) => `sc.v4[(${i4}) * CS + col]`;
  const s04 = (i4: string) => `vec4<f32>(${upTo(4).map((m) => s0c(`(${i4}) * 4u + ${m}u`)).join(", ")})`;
  const s0c = (i: string) => `s0[s0i(bh, ${i}, cc)]`;
  const sweep = reg && COLUMN_SWEEP !== "shared" ? forwardRegisterSweep(s) : undefined;
  const steps = COLUMN_SCAN_STEP_PREFETCH
    ? prefetchedStepArrays(s, "0u", "n + 1u", "n + 1u < nck()")
    : undefined;
  return `
var<workgroup> sc: array<f32, ${columnStateFloats(s)}>;
${columnScanHead(s, "wv")}
  ${
    laneRows(RI, (r) =>
      `if (lane + ${r * L.RL}u < DK) { ${
        stateAt(s, "sc", `i${r}`, `sc[i${r} * CS + col]`)
      } = select(0.0, init[s0i(bh, i${r}, cc)], u.hasInit != 0u); }`, "\n  ")
  }
  ${steps ? `${steps.init}\n  ` : ""}for (var n = 0u; n < nck(); n++) {
    let a = n * C;
    let len = min(C, u.T - a);
    let e = len - 1u;
    ${steps ? steps.load : "load_columns(lid, lane, col, cc, bh, a, len);"}${sweep ? sweep.prefetch : ""}
    ${
    keyRows(
      `if (live) { cw[u.entryState + si(bh, n, i, c)] = ${stateAt(s, "sc", "i", "sc[i * CS + col]")}; }`,
    )
  }
    // right-hand side R_t = b_t y_t - a_t exp(Pp_t) x_t.base_t, per staged slice of X
    ${
    overSlices(
      s,
      sliceRows(
        s,
        `let j = k * CS + col;
          let t = a + k;${sweep ? sweep.early : ""}
          var acc = vec4<f32>(0.0);
          var xs = 0.0;
          if (sg[k] == 0u) {
            ${
          vec4Dots(s) ? stagedRowDot4("acc", "tt", sc4, sc, s.dk) : stagedRowDot("acc", "tt * XS", sc, s.dk)
        }
            xs = acc.x + acc.y + acc.z + acc.w;
          } else if (u.hasS0 != 0u) {
            ${
          vec4Dots(s) ? stagedRowDot4("acc", "tt", s04, s0c, s.dk) : stagedRowDot("acc", "tt * XS", s0c, s.dk)
        }
            xs = acc.x + acc.y + acc.z + acc.w;
          }
          if (live) { cw[u.columnKeyDotBase + ci(bh, t, c)] = xs; }
          wv[j] = ${
          sweep ? "wg * yv" : "cw[u.columnWriteGain + ci(bh, t, cc)] * yp(bh, i32(t), cc)"
        } - ga[j] * exp(pp[j]) * xs;`,
      ),
    )
  }
    workgroupBarrier();
    ${
    sweep
      ? sweep.sweep
      : reg
      ? `// forward substitution as a sweep over the steps, all the group's columns at once: once W_s is final,
    // every later row of its segment drops A[k,s] W_s; each invocation loads its rows' next K entries one step ahead
    var kc: array<f32, ${RK}>;
    ${
        laneRows(RK, (r) =>
          `{ let k = lane + ${
            r * L.RL
          }u; kc[${r}] = select(0.0, cw[u.keyGram + kk(bh, n, 0u, min(k, C - 1u))], k < len); }`)
      }
    for (var sx = 0u; sx + 1u < len; sx++) {
      let w = wv[sx * CS + col];
      let ps = pl[sx * CS + col];
      let ss = sg[sx];
      ${
        laneRows(
          RK,
          (r) =>
            `{
        let k = lane + ${r * L.RL}u;
        var kn = 0.0;
        if (k > sx + 1u && k < len) { kn = cw[u.keyGram + kk(bh, n, sx + 1u, k)]; }
        if (k > sx && k < len && sg[k] == ss) {
          let j = k * CS + col;
          wv[j] -= ga[j] * exp(pp[j] - ps) * kc[${r}] * w;
        }
        kc[${r}] = kn;
      }`,
          "\n      ",
        )
      }
      workgroupBarrier();
    }`
      : ""
  }
    // W stored, then Gam[e,k] W_k in its place (0 past the chunk's end, for the slices' whole 4-row blocks)
    for (var k = lane; k < WR; k += RL) {
      let j = k * CS + col;
      var g = 0.0;
      if (k < len) {
        let w = wv[j];
        if (live) { cw[u.columnPseudoValues + ci(bh, a + k, c)] = w; }
        g = select(0.0, exp(pl[e * CS + col] - pl[j]), sg[k] == sg[e]) * w;
      }
      wv[j] = g;
    }
    workgroupBarrier();
    // exit state: exp(P_e) base_e + sum_k Gam[e,k] x_k W_k, per (key row, column)
    ${
    keyRowSums(
      s,
      (row) => `let g = vec4<f32>(${upTo(4).map((m) => `wv[${row(m)} * CS + col]`).join(", ")});`,
      [["ex", "g"]],
    )
  }
    ${
    keyRows(`
        var v = ex$r.x + ex$r.y + ex$r.z + ex$r.w;
        let pe = exp(pl[e * CS + col]);
        if (sg[e] == 0u) { v += pe * ${
      stateAt(s, "sc", "i", "sc[i * CS + col]")
    }; } else if (u.hasS0 != 0u) { v += pe * s0[s0i(bh, i, cc)]; }
        ${stateAt(s, "sc", "i", "sc[i * CS + col]")} = v;
      `)
  }
  }
  ${
    laneRows(RI, (r) =>
      `if (live && lane + ${r * L.RL}u < DK) { cw[u.finalState + s0i(bh, i${r}, c)] = ${
        stateAt(s, "sc", `i${r}`, `sc[i${r} * CS + col]`)
      }; }`, "\n  ")
  }
}`;
}

/**
 * `column_reverse_scan` with `CS > 1` columns per workgroup (the layout of {@linkcode columnStateScanKernel}): per
 * chunk, from the last, `dExitState`, then per staged slice of `X` the pseudo-value gradients
 * `dW = readout part + Gam[e,k] x_k.G`, the back substitution `dR = (I + A)^-T dW` (falcon2) as a sweep with one
 * barrier per step for all the columns, and per `(i, column)` the gradients of the entering state and of `S0`
 * (`dBaseReadout` parts less `sum_k a_k exp(Pp_k) dR_k x_k`, split by base, in 4 partial sums); `dS0` builds up in
 * registers, `dCarryState` is the last `G`.
 */
function columnReverseScanKernel(s: ChunkShape, reg: boolean): string {
  const { L, RI, RK, keyRows } = columnScanRows(s);
  const gs = (i: string) => stateAt(s, "gs", i, `gs[(${i}) * CS + col]`);
  const gs4 = (i4: string) => `gs.v4[(${i4}) * CS + col]`;
  const sweep = reg && COLUMN_SWEEP !== "shared" ? backRegisterSweep(s) : undefined;
  const steps = COLUMN_SCAN_STEP_PREFETCH
    ? prefetchedStepArrays(s, "nck() - 1u", "n - 1u", "n > 0u")
    : undefined;
  return `
var<workgroup> gs: array<f32, ${columnStateFloats(s)}>;
${columnScanHead(s, "dr")}
  ${laneRows(RI, (r) => `var ds${r} = 0.0;`, "\n  ")}
  ${
    laneRows(RI, (r) =>
      `if (lane + ${r * L.RL}u < DK) { ${stateAt(s, "gs", `i${r}`, `gs[i${r} * CS + col]`)} = 0.0; }`, "\n  ")
  }
  ${steps ? `${steps.init}\n  ` : ""}for (var rn = 0u; rn < nck(); rn++) {
    let n = nck() - 1u - rn;
    let a = n * C;
    let len = min(C, u.T - a);
    let e = len - 1u;
    ${steps ? steps.load : "load_columns(lid, lane, col, cc, bh, a, len);"}${sweep ? sweep.prefetch : ""}
    ${
    keyRows(
      `if (live) { cw[u.dExitState + si(bh, n, i, c)] = ${stateAt(s, "gs", "i", "gs[i * CS + col]")}; }`,
    )
  }
    // dW = readout part + Gam[e,k] x_k.G, per staged slice of X
    ${
    overSlices(
      s,
      sliceRows(
        s,
        `let j = k * CS + col;${sweep ? sweep.early : ""}
          var xg = 0.0;
          if (sg[k] == sg[e]) {
            var acc = vec4<f32>(0.0);
            ${
          vec4Dots(s) ? stagedRowDot4("acc", "tt", gs4, gs, s.dk) : stagedRowDot("acc", "tt * XS", gs, s.dk)
        }
            xg = (acc.x + acc.y + acc.z + acc.w) * exp(pl[e * CS + col] - pl[j]);
          }
          dr[j] = ${sweep ? "dwr" : "cw[u.columnDPseudoValuesReadout + ci(bh, a + k, cc)]"} + xg;`,
      ),
    )
  }
    workgroupBarrier();
    ${
    sweep
      ? sweep.sweep
      : reg
      ? `// back substitution as a sweep over the steps, all the group's columns at once: once dR_t2 is final,
    // every earlier row of its segment drops A[t2,k] dR_t2 (K entries loaded one step ahead)
    var kc: array<f32, ${RK}>;
    ${
        laneRows(RK, (r) =>
          `{ let k = lane + ${
            r * L.RL
          }u; kc[${r}] = select(0.0, cw[u.keyGram + kk(bh, n, len - 1u, min(k, C - 1u))], k < len); }`)
      }
    for (var t2 = len - 1u; t2 > 0u; t2--) {
      let d = dr[t2 * CS + col];
      let gt = ga[t2 * CS + col];
      let pt = pp[t2 * CS + col];
      let st = sg[t2];
      ${
        laneRows(
          RK,
          (r) =>
            `{
        let k = lane + ${r * L.RL}u;
        var kn = 0.0;
        if (k + 1u < t2) { kn = cw[u.keyGram + kk(bh, n, t2 - 1u, k)]; }
        if (k < t2 && sg[k] == st) {
          let j = k * CS + col;
          dr[j] -= gt * exp(pt - pl[j]) * kc[${r}] * d;
        }
        kc[${r}] = kn;
      }`,
          "\n      ",
        )
      }
      workgroupBarrier();
    }`
      : ""
  }
    // dR stored, then a_k exp(Pp_k) dR_k in its place (0 past the chunk's end)
    for (var k = lane; k < WR; k += RL) {
      let j = k * CS + col;
      var rc = 0.0;
      if (k < len) {
        let d = dr[j];
        if (live) { cw[u.columnDRightHandSide + ci(bh, a + k, c)] = d; }
        rc = ga[j] * exp(pp[j]) * d;
      }
      dr[j] = rc;
    }
    workgroupBarrier();
    // gradient of the entering state (base s_in: rows before the chunk's first start) and of S0 (the others)
    ${
    keyRowSums(
      s,
      (row) =>
        `let g = vec4<f32>(${upTo(4).map((m) => `dr[${row(m)} * CS + col]`).join(", ")});
        let g0 = select(vec4<f32>(0.0), g, vec4<u32>(${
          upTo(4).map((m) => `sg[${row(m)}]`).join(", ")
        }) == vec4<u32>(0u));
        let g1 = g - g0;`,
      [["b0", "g0"], ["b1", "g1"]],
    )
  }
    ${
    keyRows(`
        let o = u.columnDBaseReadout + (bh * nck() + n) * 2u * DK * DV + i * DV + cc;
        var v0 = cw[o] - (b0$r.x + b0$r.y + b0$r.z + b0$r.w);
        var v1 = cw[o + DK * DV] - (b1$r.x + b1$r.y + b1$r.z + b1$r.w);
        let ce = exp(pl[e * CS + col]) * ${stateAt(s, "gs", "i", "gs[i * CS + col]")};
        if (sg[e] == 0u) { v0 += ce; } else { v1 += ce; }
        ds$r += v1;
        ${stateAt(s, "gs", "i", "gs[i * CS + col]")} = v0;
      `)
  }
  }
  ${
    laneRows(
      RI,
      (r) =>
        `if (live && lane + ${r * L.RL}u < DK) {
    out[u.gDC + s0i(bh, i${r}, c)] = ${stateAt(s, "gs", `i${r}`, `gs[i${r} * CS + col]`)};
    out[u.gDS0 + s0i(bh, i${r}, c)] = ds${r};
  }`,
      "\n  ",
    )
  }
}`;
}

/**
 * The form of falcon2's sweeps in the grouped column scans (`column_state_scan`'s forward substitution,
 * `column_reverse_scan`'s back substitution; falcon2a has none), the serial part of both (`C - 1` steps per chunk,
 * one barrier each). `"shared"`: every row's running right-hand side in workgroup memory, read and written back per
 * step with its step factors (`sg, pp, ga` or `pl`) and an `exp`, each row's next `K` entry loaded one step ahead.
 * `"registers"` ({@linkcode registerSweep}): each invocation keeps its rows' running right-hand sides, factors and
 * next coefficients in registers; a step reads its pivot from workgroup memory, takes one product per row, publishes
 * the row the next step pivots on and computes the next step's coefficients (their `exp`, only for the rows that take
 * an update) before the barrier, the `K` entries loaded {@linkcode COLUMN_SWEEP_AHEAD} steps ahead into a ring of
 * registers (the step loop unrolled by its length, so every slot is a named register; the first ring loaded before
 * the right-hand sides, whose own storage loads come before their dot products). On the H200 (2026-12-04 03:09 UTC,
 * 8x4096x8x64, C = 64) `"registers"` ran the scans in 3.36 / 3.02 ms (forward / back substitution) against
 * `"shared"`'s 5.51 / 5.48, and a blocked form of it (4 steps per barrier, a small triangular solve of the block's
 * pivots in every invocation; removed after the benchmark) in 3.50 / 3.29 (docs/performance.md "Tenth round").
 */
export const COLUMN_SWEEP: "shared" | "registers" = "registers";

/**
 * Slots of the `"registers"` sweeps' ring of `K` entries ({@linkcode COLUMN_SWEEP}): the steps ahead that a
 * step's entries are loaded, at most (at least 2, a multiple of {@linkcode COLUMN_SWEEP_LOAD_BATCH}).
 */
export const COLUMN_SWEEP_AHEAD = 8;

/**
 * Steps of the `"registers"` sweeps whose `K` entries are loaded together, at the last of them, for the steps
 * {@linkcode COLUMN_SWEEP_AHEAD} later (at least `COLUMN_SWEEP_AHEAD - COLUMN_SWEEP_LOAD_BATCH + 1` steps ahead of
 * their use). 1 loads at every step; more leave the loads in flight over fewer of the steps' barriers, in case a
 * barrier waits for them.
 */
export const COLUMN_SWEEP_LOAD_BATCH = 4;

/**
 * The register form of a sweep of the grouped column scans over the `len - 1` steps `q` of a chunk
 * (`COLUMN_SWEEP = "registers"`), as WGSL in two parts. `prefetch`, in the chunk loop before the right-hand sides
 * (so its loads overlap them): the clamped rows `kx{r}` of the invocation's rows `k{r} = lane + RL r` and the ring
 * `kr{p}_{r}` of their `K` entries for the first `D` steps. `sweep`, once the right-hand sides are in `values` (row
 * `k` of the column at `k * CS + col`): the running values `rv{r}`, the per-row factors `rowDecl(r)` and the
 * coefficients `c{r}` of step 0, then per step `rv{r} -= c{r} * values[pivot]` (the one product that waits for the
 * pivot), the row final after the step (`published(q)`) written back to `values`, the coefficients of the next step
 * (`coef`: from its pivot row `t`, the factors `factors(t)` declare and the ring slot `p` of its `K` entries, 0 where
 * the row takes no update; their `exp` off the path from one barrier to the next), at the last step of each batch of
 * `COLUMN_SWEEP_LOAD_BATCH` the batch's ring slots reloaded with the `K` entries of the steps `D` later (where the row
 * `takes` that step's update), and one barrier. The pivot of step `q` is row `pivotRow(q)`; `K` row `kRow(q)` holds
 * its entries (clamped into the chunk).
 */
function registerSweep(
  s: ChunkShape,
  values: string,
  sweep: {
    pivotRow: (q: string) => string;
    kRow: (q: string) => string;
    rowDecl: (r: number) => string;
    factors: (t: string) => string;
    coef: (r: number, p: number, t: string) => [string, string];
    published: (q: string) => string;
    takes: (r: number, t: string) => string;
  },
): { prefetch: string; sweep: string } {
  const { L, RK } = columnScanRows(s);
  const D = COLUMN_SWEEP_AHEAD;
  if (!Number.isInteger(D) || D < 2) {
    throw new RangeError(`COLUMN_SWEEP_AHEAD = ${D}: expected an integer >= 2`);
  }
  const G = COLUMN_SWEEP_LOAD_BATCH;
  if (!Number.isInteger(G) || G < 1 || D % G !== 0 || G >= D) {
    throw new RangeError(
      `COLUMN_SWEEP_LOAD_BATCH = ${G}: expected a divisor of COLUMN_SWEEP_AHEAD = ${D} below it`,
    );
  }
  // at the last step q of each batch, the ring slots of the batch's steps (all used: a step's slot serves the
  // coefficients computed the step before) take the K entries of the steps D later
  const reload = (p: number) =>
    upTo(G).map((i) =>
      `{
            let kn = ${sweep.kRow(`q + ${D - (G - 1) + i}u`)};
            ${
        rows(
          (r) =>
            `if (${sweep.takes(r, "kn")}) { kr${
              p - (G - 1) + i
            }_${r} = cw[u.keyGram + kk(bh, n, kn, kx${r})]; }`,
          "\n            ",
        )
      }
          }`
    ).join("\n          ");
  const rows = (f: (r: number) => string, indent = "\n    ") => laneRows(RK, f, indent);
  const coefs = (p: number, q: string, indent: string) =>
    `{
${indent}  let t = ${sweep.pivotRow(q)};
${indent}  ${sweep.factors("t").replaceAll("\n", `\n${indent}  `)}
${indent}  ${
      rows((r) => {
        const [takes, value] = sweep.coef(r, p, "t");
        return `c${r} = 0.0;\n${indent}  if (${takes}) { c${r} = ${value}; }`;
      }, `\n${indent}  `)
    }
${indent}}`;
  const steps = upTo(D).map((p) =>
    `{
        let q = q0 + ${p}u;
        if (q + 1u < len) {
          let w = ${values}[(${sweep.pivotRow("q")}) * CS + col];
          ${rows((r) => `rv${r} -= c${r} * w;`, "\n          ")}
          ${
      rows((r) => `if (k${r} == ${sweep.published("q")}) { ${values}[j${r}] = rv${r}; }`, "\n          ")
    }
          ${coefs((p + 1) % D, "q + 1u", "          ")}
          ${p % G === G - 1 ? reload(p) : ""}
          workgroupBarrier();
        }
      }`
  ).join("\n      ");
  const prefetch = `
    // the sweep's K entries of its first ${D} steps, loaded while the right-hand sides are built
    ${rows((r) => `let kx${r} = min(lane + ${r * L.RL}u, C - 1u);`)}
    ${
    upTo(D).map((p) =>
      rows((r) => `var kr${p}_${r} = cw[u.keyGram + kk(bh, n, ${sweep.kRow(`${p}u`)}, kx${r})];`)
    )
      .join("\n    ")
  }`;
  return {
    prefetch,
    sweep: `{
    ${
      rows((r) =>
        `let k${r} = lane + ${r * L.RL}u;
    let j${r} = kx${r} * CS + col;
    var rv${r} = ${values}[j${r}];
    ${sweep.rowDecl(r)}
    var c${r} = 0.0;`
      )
    }
    ${coefs(0, "0u", "    ")}
    for (var q0 = 0u; q0 + 1u < len; q0 += ${D}u) {
      ${steps}
    }
    }`,
  };
}

/** The rule-specific parts of a register sweep ({@linkcode registerSweep}). */
type SweepSpec = Parameters<typeof registerSweep>[2];

/**
 * The WGSL parts of a register sweep in its scan: `prefetch` and `sweep` ({@linkcode registerSweep}), and `early`,
 * the right-hand sides' own storage loads, at the start of a row's body (before its dot product with the base).
 */
interface RegisterSweepParts {
  prefetch: string;
  early: string;
  sweep: string;
}

/**
 * falcon2's forward substitution `(I + A) W = R` in the grouped `column_state_scan` as a register sweep
 * ({@linkcode COLUMN_SWEEP}): at step `q`, once `W_q` is final, every later row `k` of its segment drops
 * `a_k exp(Pp_k - P_q) K[k,q] W_q`, and row `q + 1` is final.
 */
function forwardRegisterSweep(s: ChunkShape): RegisterSweepParts {
  const parts: SweepSpec = {
    pivotRow: (q) => q,
    kRow: (q) => `min(${q}, C - 1u)`,
    rowDecl: (r) =>
      `let ok${r} = k${r} < len;
    let rg${r} = ga[j${r}];
    let rp${r} = pp[j${r}];
    let rs${r} = sg[kx${r}];`,
    factors: (t) =>
      `let ps = pl[${t} * CS + col];
let ss = sg[${t}];`,
    coef: (r, p, t) => [`k${r} > ${t} && ok${r} && rs${r} == ss`, `rg${r} * exp(rp${r} - ps) * kr${p}_${r}`],
    published: (q: string) => `${q} + 1u`,
    takes: (r: number, t: string) => `k${r} > ${t}`,
  };
  const { prefetch, sweep } = registerSweep(s, "wv", parts);
  return {
    prefetch,
    early: `
          // loaded before the dot product, whose loop they overlap
          let wg = cw[u.columnWriteGain + ci(bh, t, cc)];
          let yv = yp(bh, i32(t), cc);`,
    sweep:
      `// forward substitution as a sweep over the steps, all the group's columns at once: each invocation keeps its
    // rows' running right-hand sides, factors and next coefficients in registers, publishes the next step's pivot
    // in wv, and loads its rows' K entries ${COLUMN_SWEEP_AHEAD} steps ahead
    ${sweep}`,
  };
}

/**
 * falcon2's back substitution `dR = (I + A)^-T dW` in the grouped `column_reverse_scan` as a register sweep
 * ({@linkcode COLUMN_SWEEP}): at step `q`, pivot row `t2 = len - 1 - q`, once `dR_t2` is final, every earlier row
 * `k` of its segment drops `a_t2 exp(Pp_t2 - P_k) K[t2,k] dR_t2`, and row `t2 - 1` is final.
 */
function backRegisterSweep(s: ChunkShape): RegisterSweepParts {
  const parts: SweepSpec = {
    pivotRow: (q) => `len - 1u - min(${q}, len - 1u)`,
    kRow: (q) => `len - 1u - min(${q}, len - 1u)`,
    rowDecl: (r) =>
      `let rl${r} = pl[j${r}];
    let rs${r} = sg[kx${r}];`,
    factors: (t) =>
      `let gt = ga[${t} * CS + col];
let pt = pp[${t} * CS + col];
let st = sg[${t}];`,
    coef: (r, p, t) => [`k${r} < ${t} && rs${r} == st`, `gt * exp(pt - rl${r}) * kr${p}_${r}`],
    published: (q: string) => `len - 2u - ${q}`,
    takes: (r: number, t: string) => `k${r} < ${t}`,
  };
  const { prefetch, sweep } = registerSweep(s, "dr", parts);
  return {
    prefetch,
    early: `
          // loaded before the dot product, whose loop it overlaps
          let dwr = cw[u.columnDPseudoValuesReadout + ci(bh, a + k, cc)];`,
    sweep:
      `// back substitution as a sweep over the steps, all the group's columns at once: each invocation keeps its rows'
    // running dR, factors and next coefficients in registers, publishes the next step's pivot in dr, and loads its
    // rows' K entries ${COLUMN_SWEEP_AHEAD} steps ahead
    ${sweep}`,
  };
}
