/**
 * WGSL of the staged row kernels of the additive and delta families: `readout` (the outputs of a chunk)
 * and `query_grads` (`dq` of a chunk). Both are, per chunk, `Out = f (.) A S + (M (.) A B^T) V` with
 * `A` the chunk's rows (`q` or `dO`), `S` the decayed base state (`S_in`, or `S0` after a sequence start;
 * transposed for `dq`), `B` / `V` the pair rows the scores and the mix read (`x` and the values, or the
 * values and `x`) and `M` the masked decay weights:
 *
 * - readout: `o_t = exp(P_t) base_t^T q_t + sum_j (M[t,j] q_t.x_j) v_j`;
 * - query_grads: `dq_t = exp(P_t) base_t dO_t + sum_j (M[t,j] dO_t.v_j) x_j`, its base part also into `dqBase`.
 *
 * One workgroup of {@linkcode ROWS_WG} invocations per `(b, h, chunk)`. Every operand passes through
 * workgroup memory in slabs of `BK` (`ChunkShape.rowsSlab`) contracted entries, loaded so that
 * neighbouring invocations read neighbouring floats, and stored four rows or columns to a `vec4` so
 * that an invocation's 4 x 4 register tile takes two `vec4` reads per 16 products. The pair columns
 * are walked in panels of `PJ` (`ChunkShape.rowsPanel`): a panel's scores (`C x PJ`, masked) go to
 * workgroup memory, then its mix adds into the output tiles, which stay in registers from the base
 * part to the store. The base part scales the staged rows by `exp(P_t)` where step `t`'s base is
 * `S_in` (and, when the call has `S0`, by `exp(P_t)` where it is `S0`, against a second pass over `S0`),
 * so one register tile holds the whole output.
 *
 * @module
 */

import type { ChunkShape } from "./chunk_wgsl.ts";

/** Invocations of a staged row kernel's workgroup. */
export const ROWS_WG = 256;

/** Which of the two row kernels. */
export type RowsPass = "readout" | "query_grads";

/** Slab depth and pair panel of the staged row kernels. */
export interface RowsTiles {
  /** Contracted entries per staged slab. */
  readonly slab: number;
  /** Pair columns per panel (a multiple of 4). */
  readonly panel: number;
}

/** `ceil(n / 4)`. */
function quads(n: number): number {
  return Math.ceil(n / 4);
}

/** Workgroup floats of a staged row kernel (the chunk's `steps` floats of step arrays included). */
export function rowsKernelFloats(C: number, dk: number, dv: number, steps: number, t: RowsTiles): number {
  const c4 = quads(C);
  const wide = Math.max(quads(t.panel), quads(Math.max(dk, dv)));
  // staged rows, staged pair rows / base rows / mixed rows, the panel's scores
  return steps + 4 * (t.slab * c4 + t.slab * wide + t.panel * c4);
}

/**
 * The largest panel (at most 64 pair columns, and at most what keeps one score block per invocation)
 * and slab (16, 8 or 4, dividing the panel) whose workgroup arrays fit in `limitFloats`; null when none does.
 */
export function rowsTiles(
  C: number,
  pad: number,
  dk: number,
  dv: number,
  steps: number,
  limitFloats: number,
): RowsTiles | null {
  const c4 = quads(C);
  const widest = 4 * Math.max(1, Math.min(16, Math.floor(ROWS_WG / c4), quads(C + pad)));
  for (let panel = widest; panel >= 4; panel -= 4) {
    // the mix walks a panel slab by slab: whole slabs only
    for (const slab of [16, 8, 4].filter((b) => panel % b === 0)) {
      if (rowsKernelFloats(C, dk, dv, steps, { slab, panel }) <= limitFloats) return { slab, panel };
    }
  }
  return null;
}

/** WGSL expressions of the operands of one row kernel (`t`: chunk step row, `j`: pair as i32). */
interface RowsOperands {
  /** `A(t, k)`: the chunk rows (`t` absolute). */
  rows: (t: string, k: string) => string;
  /** `B(j, k)`: the pair rows the scores contract with. */
  pairs: (j: string, k: string) => string;
  /** `V(j, c)`: the pair rows the scores mix. */
  mixed: (j: string, c: string) => string;
  /** `S(k, c)` of the entering state and of `S0` (`base` the entering state's offset in `cw`). */
  entering: (k: string, c: string) => string;
  initial: (k: string, c: string) => string;
  /** Contracted size of the scores and of the base part (`KA`) and output columns (`NC`), as WGSL. */
  KA: string;
  NC: string;
  /** Store statement of output entry `(t, c)` with value `v` (and `base` the base part alone). */
  store: (t: string, c: string, v: string, base: string) => string;
}

function operands(pass: RowsPass): RowsOperands {
  if (pass === "readout") {
    return {
      rows: (t, k) => `qn(bh, ${t}, ${k})`,
      pairs: (j, k) => `xp(bh, ${j}, ${k})`,
      mixed: (j, c) => `vp(bh, ${j}, ${c})`,
      entering: (k, c) => `cw[base + ${k} * DV + ${c}]`,
      initial: (k, c) => `s0[bh * DK * DV + ${k} * DV + ${c}]`,
      KA: "DK",
      NC: "DV",
      store: (t, c, v) => `out[((b * u.T + ${t}) * H + h) * DV + ${c}] = ${v};`,
    };
  }
  return {
    rows: (t, k) => `dout[((b * u.T + ${t}) * H + h) * DV + ${k}]`,
    pairs: (j, k) => `vp(bh, ${j}, ${k})`,
    mixed: (j, c) => `xp(bh, ${j}, ${c})`,
    entering: (k, c) => `cw[base + ${c} * DV + ${k}]`,
    initial: (k, c) => `s0[bh * DK * DV + ${c} * DV + ${k}]`,
    KA: "DV",
    NC: "DK",
    store: (t, c, v, base) =>
      `cw[u.dqBase + (bh * u.T + ${t}) * DK + ${c}] = ${base};\n        out[(bh * u.T + ${t}) * DK + ${c}] = ${v};`,
  };
}

/** `f(r, c)` over a 4 x 4 tile, joined. */
function each16(f: (r: number, c: number) => string, sep = "\n      "): string {
  return [0, 1, 2, 3].flatMap((r) => [0, 1, 2, 3].map((c) => f(r, c))).join(sep);
}

/**
 * WGSL of the staged `readout` / `query_grads` kernel (after the prelude and `chunkSteps`, which
 * declare the bindings, constants, `vp`, `m_of` and the step arrays). `s.rowsSlab` / `s.rowsPanel`
 * size the staging (see {@linkcode rowsTiles}).
 */
export function stagedRowsKernel(pass: RowsPass, s: ChunkShape, pad: number): string {
  const op = operands(pass);
  const BK = s.rowsSlab;
  const PJ = s.rowsPanel;
  const C4 = quads(s.C);
  const PJ4 = PJ / 4;
  const NCn = pass === "readout" ? s.dv : s.dk;
  const NC4 = quads(NCn);
  const WIDE = Math.max(PJ4, NC4);
  // output tiles per invocation (4 x 4 each): all of C x NC over the workgroup
  const outSets = Math.ceil((C4 * NC4) / ROWS_WG);
  const panels = Math.ceil((s.C + pad) / PJ);
  const sets = [...Array(outSets).keys()];
  const acc = (i: number, r: number, c: number) => `o${i}_${r}${c}`;
  // the base part (one slab pass over S_in or S0, rows scaled by their factor)
  const basePass = (which: "entering" | "initial", factor: string) => `
  for (var k0 = 0u; k0 < ${op.KA}; k0 += BK) {
    workgroupBarrier();
    for (var e = lid; e < BK * C4; e += ROWS_WG) {
      let kk = e % BK;
      let t4 = e / BK;
      let k = k0 + kk;
      var v = vec4<f32>(0.0);
      for (var r = 0u; r < 4u; r++) {
        let tt = 4u * t4 + r;
        if (tt < len && k < ${op.KA}) { v[r] = ${factor} * ${op.rows("a + tt", "k")}; }
      }
      stRows[kk * C4 + t4] = v;
    }
    for (var e = lid; e < BK * NC4 * 4u; e += ROWS_WG) {
      ${
    pass === "readout"
      ? "let col = e % (NC4 * 4u); let kk = e / (NC4 * 4u);"
      : "let kk = e % BK; let col = e / BK;"
  }
      let k = k0 + kk;
      var v = 0.0;
      if (k < ${op.KA} && col < ${op.NC}) { v = ${op[which]("k", "col")}; }
      stWide[kk * WIDE + col / 4u][col % 4u] = v;
    }
    workgroupBarrier();
    ${
    sets.map((i) =>
      `if (ob${i} < C4 * NC4) {
      for (var kk = 0u; kk < BK; kk++) {
        let av = stRows[kk * C4 + ob${i} / NC4];
        let bv = stWide[kk * WIDE + ob${i} % NC4];
        ${each16((r, c) => `${acc(i, r, c)} += av[${r}] * bv[${c}];`)}
      }
    }`
    ).join("\n    ")
  }
  }`;
  return `
const ROWS_WG = ${ROWS_WG}u;
const BK = ${BK}u;
const PJ = ${PJ}u;
const PJ4 = ${PJ4}u;
const C4 = ${C4}u;
const NC4 = ${NC4}u;
const WIDE = ${WIDE}u;
// staged rows [kk][4 rows], staged pair / base / mixed rows [kk][4 columns], a panel's scores [pair][4 rows]
var<workgroup> stRows: array<vec4<f32>, ${BK * C4}>;
var<workgroup> stWide: array<vec4<f32>, ${BK * WIDE}>;
var<workgroup> scores: array<vec4<f32>, ${PJ * C4}>;
@compute @workgroup_size(${ROWS_WG})
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wgid = gid.y * nwg.x + gid.x;
  // every invocation reaches every barrier: a workgroup past the last chunk does no work but returns here, uniformly
  if (wgid >= u.B * H * nck()) { return; }
  let n = wgid % nck();
  let bh = wgid / nck();
  let b = bh / H;
  let h = bh % H;
  let a = n * C;
  let len = min(C, u.T - a);
  load_chunk(lid, bh, b, a, len);
  let base = u.entryState + (bh * nck() + n) * DK * DV;
  let j0 = i32(a) - i32(PAD);
  let ncol = len + PAD;
  ${sets.map((i) => `let ob${i} = lid + ${i * ROWS_WG}u;`).join("\n  ")}
  ${sets.map((i) => each16((r, c) => `var ${acc(i, r, c)} = 0.0;`, " ")).join("\n  ")}
  // base part: exp(P_t) times the base of step t's segment (the entering state, S0 after a start, zero after a cut)
  ${basePass("entering", "select(0.0, exp(cp[tt]), base_kind(tt) == 0u)")}
  if (u.hasS0 != 0u) {
    ${basePass("initial", "select(0.0, exp(cp[tt]), base_kind(tt) == 1u)")}
  }
  ${
    pass === "query_grads"
      ? `// the base part alone (dqBase) is stored with the total below: keep a copy
  ${sets.map((i) => each16((r, c) => `let q${i}_${r}${c} = ${acc(i, r, c)};`, " ")).join("\n  ")}`
      : ""
  }
  // the pair columns in panels: masked scores of the panel into workgroup memory, then their mix
  for (var p0 = 0u; p0 < ${panels}u * PJ; p0 += PJ) {
    let sb = lid;
    let st4 = sb / PJ4;
    let sj4 = sb % PJ4;
    ${each16((r, c) => `var e${r}${c} = 0.0;`, " ")}
    for (var k0 = 0u; k0 < ${op.KA}; k0 += BK) {
      workgroupBarrier();
      for (var e = lid; e < BK * C4; e += ROWS_WG) {
        let kk = e % BK;
        let t4 = e / BK;
        let k = k0 + kk;
        var v = vec4<f32>(0.0);
        for (var r = 0u; r < 4u; r++) {
          let tt = 4u * t4 + r;
          if (tt < len && k < ${op.KA}) { v[r] = ${op.rows("a + tt", "k")}; }
        }
        stRows[kk * C4 + t4] = v;
      }
      for (var e = lid; e < BK * PJ; e += ROWS_WG) {
        let kk = e % BK;
        let jj = p0 + e / BK;
        let k = k0 + kk;
        var v = 0.0;
        if (jj < ncol && k < ${op.KA}) { v = ${op.pairs("j0 + i32(jj)", "k")}; }
        stWide[kk * WIDE + (e / BK) / 4u][(e / BK) % 4u] = v;
      }
      workgroupBarrier();
      if (st4 < C4) {
        for (var kk = 0u; kk < BK; kk++) {
          let av = stRows[kk * C4 + st4];
          let bv = stWide[kk * WIDE + sj4];
          ${each16((r, c) => `e${r}${c} += av[${r}] * bv[${c}];`)}
        }
      }
    }
    workgroupBarrier();
    if (st4 < C4) {
      ${
    [0, 1, 2, 3].map((c) =>
      `{
        let jj = p0 + 4u * sj4 + ${c}u;
        var w = vec4<f32>(0.0);
        ${
        [0, 1, 2, 3].map((r) =>
          `{
          let tt = 4u * st4 + ${r}u;
          if (tt < len && jj < ncol && jj <= tt + PAD) { w[${r}] = m_of(tt, j0 + i32(jj), a) * e${r}${c}; }
        }`
        ).join("\n        ")
      }
        scores[(4u * sj4 + ${c}u) * C4 + st4] = w;
      }`
    ).join("\n      ")
  }
    }
    // the panel's mix: out += scores (C x PJ) times the panel's mixed rows (PJ x NC), BK pairs at a time
    for (var k0 = 0u; k0 < PJ; k0 += BK) {
      workgroupBarrier();
      for (var e = lid; e < BK * NC4 * 4u; e += ROWS_WG) {
        let col = e % (NC4 * 4u);
        let kk = e / (NC4 * 4u);
        let jj = p0 + k0 + kk;
        var v = 0.0;
        if (jj < ncol && col < ${op.NC}) { v = ${op.mixed("j0 + i32(jj)", "col")}; }
        stWide[kk * WIDE + col / 4u][col % 4u] = v;
      }
      workgroupBarrier();
      ${
    sets.map((i) =>
      `if (ob${i} < C4 * NC4) {
        for (var kk = 0u; kk < BK; kk++) {
          let av = scores[(k0 + kk) * C4 + ob${i} / NC4];
          let bv = stWide[kk * WIDE + ob${i} % NC4];
          ${each16((r, c) => `${acc(i, r, c)} += av[${r}] * bv[${c}];`)}
        }
      }`
    ).join("\n      ")
  }
    }
  }
  ${
    sets.map((i) =>
      `if (ob${i} < C4 * NC4) {
    let tr0 = (ob${i} / NC4) * 4u;
    let c0 = (ob${i} % NC4) * 4u;
    ${
        each16((r, c) =>
          `{
      let tt = tr0 + ${r}u;
      let col = c0 + ${c}u;
      if (tt < len && col < ${op.NC}) {
        ${op.store("a + tt", "col", acc(i, r, c), pass === "query_grads" ? `q${i}_${r}${c}` : "")}
      }
    }`, "\n    ")
      }
  }`
    ).join("\n  ")
  }
}`;
}
