/**
 * WGSL of the delta rules' sequential scans over the chunks of each `(b, h)`, float32:
 * - the factored scans of falcon1, deltanet and gated_deltanet, which apply each chunk's transition through its
 *   `[C, Dk]` factors, as fla's state scan ({@linkcode factoredScanKernel}):
 *   `delta_value_scan` (the entry states `S_n`, the pseudo-values `W_n = U0_n - V_n S_n` and the final state) and
 *   `delta_value_reverse_scan` (`G_{n-1} = [no start] exp(P_e) G_n - V_n^T (Xe_n G_n) + L_n`);
 * - the transition scans of falcon3, over its stored transitions `K_n` ({@linkcode scanKernel}):
 *   `delta_state_scan`: `S_{n+1} = K_n S_n + Bv_n` from `S_0 = init` (or 0), storing every entry state
 *   `S_n` (`entryState`) and the final state (`finalState`);
 *   `delta_reverse_scan`: `G_{n-1} = K_n^T G_n + L_n` from `G = 0` at the last chunk, storing every `G_n`
 *   (`dExitState`) and the gradient of the carried state (`gDC`).
 * `K_n` is `transitionMatrix [NCK, Dk, Dk]`, `Bv_n` / `L_n` are `chunkStateIncrement` / `reverseScanLink`
 * `[NCK, Dk, Dv]` (sections of the chunk workspace, `fast_weight_chunk_delta.ts`, `fast_weight_chunk_window_delta.ts`).
 * Every inner product over a panel is written out whole into 4 partial sums ({@linkcode panelProduct}).
 *
 * One workgroup per `(b, h)` and {@linkcode scanColumns} value columns: {@linkcode SCAN_ROW_LANES}
 * invocations per group of {@linkcode SCAN_LANE_COLUMNS} columns, each holding key rows `lane + 64 m`
 * of its columns. The columns of the state live in workgroup memory, a vec4 of an invocation's 4 columns per key
 * row (one broadcast load serves its 4 products of a transition entry; in branch scan-parallel's form of this
 * kernel 0.61 -> 0.50 ms per scan on the H200, 8x4096x8x64, 2026-12-02 17:09 UTC); every chunk's `K_n` goes
 * through workgroup memory in panels (`KP` columns of `K_n`, or `KP` rows for the transposed product), loaded
 * coalesced into registers one panel ahead (the next panel's loads, and the next chunk's `Bv` / `L`, overlap
 * the current products). Each transition entry loaded serves all the workgroup's columns: the scans are
 * bound by how often `K_n` is read (once per workgroup and chunk), which is why a workgroup takes many
 * columns (measured on the H200, 8x4096x8x64: 4 columns per workgroup 1.08 ms, 8 columns 0.69 ms).
 *
 * @module
 */

import type { ChunkShape } from "./chunk_wgsl.ts";

/** Invocations per column group of a scan workgroup (the key rows `lane + SCAN_ROW_LANES m`). */
export const SCAN_ROW_LANES = 64;

/** Value columns each invocation of a scan carries. */
export const SCAN_LANE_COLUMNS = 4;

/** Column groups per scan workgroup: the state columns in workgroup memory stay at 1024 floats. */
export function scanColumnGroups(dk: number): number {
  return Math.max(1, Math.min(4, Math.floor(256 / Math.max(dk, 64))));
}

/** Value columns per workgroup of the delta scans. */
export function scanColumns(dk: number): number {
  return SCAN_LANE_COLUMNS * scanColumnGroups(dk);
}

/**
 * Columns (or rows) per panel of a scan: at most 32, halved until `floats(kp)`, the panel's floats at `kp`, fit
 * 2304 (9 KiB).
 */
function panelSize(floats: (kp: number) => number): number {
  let kp = 32;
  while (kp > 1 && floats(kp) > 2304) kp >>= 1;
  return kp;
}

/** What a scan reads and writes besides the transitions. */
interface ScanSides {
  /** Walk the chunks from the last one, with `K_n^T`. */
  reverse: boolean;
  /** WGSL of the starting value of entry `(i, c)` (`i` key row, `c` value column). */
  start: (i: string, c: string) => string;
  /** Section (uniform field) stored per chunk: the state entering it (`entryState` / `dExitState`). */
  stored: string;
  /** Section added per chunk (`chunkStateIncrement` / `reverseScanLink`). */
  addend: string;
  /** WGSL storing the end value `v` of entry `(i, c)`. */
  end: (i: string, c: string, v: string) => string;
}

/** `delta_state_scan`. */
export function deltaStateScanKernel(s: ChunkShape): string {
  return scanKernel(s, {
    reverse: false,
    start: (i, c) => `select(0.0, init[(bh * DK + ${i}) * DV + ${c}], u.hasInit != 0u)`,
    stored: "u.entryState",
    addend: "u.chunkStateIncrement",
    end: (i, c, v) => `cw[u.finalState + (bh * DK + ${i}) * DV + ${c}] = ${v};`,
  });
}

/** `delta_reverse_scan`. */
export function deltaReverseScanKernel(s: ChunkShape): string {
  return scanKernel(s, {
    reverse: true,
    start: () => "0.0",
    stored: "u.dExitState",
    addend: "u.reverseScanLink",
    end: (i, c, v) => `out[u.gDC + (bh * DK + ${i}) * DV + ${c}] = ${v};`,
  });
}

/**
 * Entry point header of a scan workgroup (`scanKernel`, `factoredScanKernel`): its `(b, h)` (`bh`), the invocation's
 * lane, its column group's rows in `col` (from `slot0`), its first column `c0` and the 4 columns `cc0..cc3` (clamped
 * to the last), and its key rows `i0, i1, ..` (`lane + SCAN_ROW_LANES m`).
 */
function scanEntry(s: ChunkShape): string {
  const SC = scanColumns(s.dk);
  const WG = SCAN_ROW_LANES * scanColumnGroups(s.dk);
  const Q = [...Array(SCAN_LANE_COLUMNS).keys()];
  const M = [...Array(Math.ceil(s.dk / SCAN_ROW_LANES)).keys()];
  return `@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wgid = gid.y * nwg.x + gid.x;
  let ncg = (DV + ${SC - 1}u) / ${SC}u;
  if (wgid >= u.B * H * ncg) { return; }
  let bh = wgid / ncg;
  let lane = lid % ${SCAN_ROW_LANES}u;
  // this invocation's column group's rows in col, and its first column in the state (c0)
  let slot0 = (lid / ${SCAN_ROW_LANES}u) * DK;
  let c0 = (wgid % ncg) * ${SC}u + (lid / ${SCAN_ROW_LANES}u) * ${SCAN_LANE_COLUMNS}u;
  ${Q.map((q) => `let cc${q} = min(c0 + ${q}u, DV - 1u);`).join("\n  ")}
  ${M.map((m) => `let i${m} = lane + ${m * SCAN_ROW_LANES}u;`).join("\n  ")}`;
}

function scanKernel(s: ChunkShape, sides: ScanSides): string {
  const groups = scanColumnGroups(s.dk);
  const WG = SCAN_ROW_LANES * groups;
  // transition panels: KP columns of K (stride KP + 1) or KP rows
  const KP = panelSize((kp) => s.dk * (kp + 1));
  const Q = [...Array(SCAN_LANE_COLUMNS).keys()];
  const M = [...Array(Math.ceil(s.dk / SCAN_ROW_LANES)).keys()];
  // the panel entries each invocation loads (entry e = lid + r WG)
  const P = [...Array(Math.ceil((s.dk * KP) / WG)).keys()];
  const { reverse } = sides;
  // forward: columns p0.. of K, entry e = (row e / KP, column e % KP), kept at stride KP + 1 (no bank conflicts);
  // reverse: rows p0.. of K, entry e = (row e / DK, column e % DK), kept as loaded (row i reads column i)
  const panelFloats = reverse ? KP * s.dk : s.dk * (KP + 1);
  const panelEntry = reverse
    ? `let j = e / DK;
  let i = e % DK;
  if (j >= ${KP}u || p0 + j >= DK) { return 0.0; }
  return cw[u.transitionMatrix + (base + p0 + j) * DK + i];`
    : `let i = e / ${KP}u;
  let j = e % ${KP}u;
  if (i >= DK || p0 + j >= DK) { return 0.0; }
  return cw[u.transitionMatrix + (base + i) * DK + p0 + j];`;
  const panelSlot = reverse
    ? (e: string) => e
    : (e: string) => `((${e}) / ${KP}u) * ${KP + 1}u + (${e}) % ${KP}u`;
  const panelRead = reverse
    ? (i: string, j: string) => `panel[${j} * DK + ${i}]`
    : (i: string, j: string) => `panel[${i} * ${KP + 1}u + ${j}]`;
  const chunkAt = (k: string) => (reverse ? `nck() - 1u - ${k}` : k);
  // per key row of the invocation: the statements, given its row m
  const eachRow = (body: (m: number) => string) =>
    M.map((m) =>
      `if (i${m} < DK) {
      ${body(m)}
    }`
    ).join("\n    ");
  // the invocation's 4 columns as a vec4 (from one expression per column)
  const columns = (entry: (q: number) => string) => `vec4<f32>(${Q.map(entry).join(", ")})`;
  // per column of row m's entry e (the vec4 of its 4 columns): the statement on e[q] where the column exists
  const eachColumn = (m: number, store: (q: number, e: string) => string) =>
    `let e = col[slot0 + i${m}];
      ${Q.map((q) => `if (c0 + ${q}u < DV) { ${store(q, `e[${q}]`)} }`).join("\n      ")}`;
  const addend = (base: string, m: number) =>
    columns((q) => `cw[${sides.addend} + (${base} + i${m}) * DV + cc${q}]`);
  return `
// key row i of each column group's 4 columns at (group DK + i)
var<workgroup> col: array<vec4<f32>, ${groups * s.dk}>;
var<workgroup> panel: array<f32, ${panelFloats}>;
// entry e of the panel at p0 of the transition at row offset base (0 past its rows and columns)
fn panel_entry(base: u32, p0: u32, e: u32) -> f32 {
  ${panelEntry}
}
${scanEntry(s)}
  ${M.map((m) => `var ad${m} = vec4<f32>(0.0);`).join(" ")}
  {
    let base = (bh * nck() + ${chunkAt("0u")}) * DK;
    ${
    eachRow((m) =>
      `col[slot0 + i${m}] = ${columns((q) => sides.start(`i${m}`, `cc${q}`))};
      ad${m} = ${addend("base", m)};`
    )
  }
  }
  // the next panel, loaded into registers while the current one is in use
  ${
    P.map((r) => `var pf${r} = panel_entry((bh * nck() + ${chunkAt("0u")}) * DK, 0u, lid + ${r * WG}u);`)
      .join("\n  ")
  }
  workgroupBarrier();
  for (var k = 0u; k < nck(); k++) {
    let base = (bh * nck() + ${chunkAt("k")}) * DK;
    ${M.map((m) => `var v${m} = ad${m};`).join(" ")}
    ${eachRow((m) => eachColumn(m, (q, e) => `cw[${sides.stored} + (base + i${m}) * DV + cc${q}] = ${e};`))}
    for (var p0 = 0u; p0 < DK; p0 += ${KP}u) {
      workgroupBarrier();
      ${
    P.map((r) => `if (lid + ${r * WG}u < DK * ${KP}u) { panel[${panelSlot(`lid + ${r * WG}u`)}] = pf${r}; }`)
      .join("\n      ")
  }
      workgroupBarrier();
      // prefetch: this chunk's next panel, or the next chunk's first panel and addend
      let last = p0 + ${KP}u >= DK;
      if (!last || k + 1u < nck()) {
        let nextBase = select(base, (bh * nck() + ${chunkAt("(k + 1u)")}) * DK, last);
        let nextP0 = select(p0 + ${KP}u, 0u, last);
        ${P.map((r) => `pf${r} = panel_entry(nextBase, nextP0, lid + ${r * WG}u);`).join("\n        ")}
        if (last) {
          ${eachRow((m) => `ad${m} = ${addend("nextBase", m)};`)}
        }
      }
      ${
    M.map((m) =>
      `if (i${m} < DK) {
        ${
        panelProduct(
          `v${m}`,
          "+=",
          KP,
          (j) => `${panelRead(`i${m}`, j)} * col[slot0 + ${clampedIndex(`p0 + ${j}`, s.dk, KP)}]`,
        )
      }
      }`
    ).join("\n      ")
  }
    }
    workgroupBarrier();
    ${eachRow((m) => `col[slot0 + i${m}] = v${m};`)}
    workgroupBarrier();
  }
  ${eachRow((m) => eachColumn(m, (q, e) => sides.end(`i${m}`, `cc${q}`, e)))}
}`;
}

/**
 * What a factored scan ({@linkcode deltaValueScanKernel}, {@linkcode deltaValueReverseScanKernel}) reads and
 * writes. Each chunk applies its transition through two products with `[C, Dk]` factors of the chunk (sections
 * laid out `[BH, NCK, C, Dk]`): `Y = F S` (`F` by rows, over the state's key rows), then
 * `S' = [no start] exp(P_e) S ± H^T Y + addend` (`H` by columns, over the chunk's steps).
 */
interface FactoredScanSides extends Omit<ScanSides, "addend"> {
  /** Section of `F`, the first product's factor. */
  first: string;
  /** Section of `H`, the second product's factor. */
  second: string;
  /** WGSL vec4 of the first product's addend at chunk row `t` (the 4 columns of the invocation): `Y = addend - F S`; none: `Y = F S`. */
  firstAddend?: (t: string) => string;
  /** WGSL storing entry `(t, c)` of `Y` as `v`, or none. */
  firstStore?: (t: string, c: string, v: string) => string;
  /** Whether the second product is subtracted. */
  subtractSecond: boolean;
  /** WGSL vec4 of the addend of key row `i` (the 4 columns of the invocation). */
  addend: (i: string) => string;
}

/**
 * `delta_value_scan`: the delta rules' forward scan with the transition left in its factors (no `K_n` or `Bv_n`
 * pass): per chunk, from its entry state `S_n`, the pseudo-values `W = U0 - V S_n` (stored: the readout's values)
 * and `S_{n+1} = [no start] exp(P_e) S_n + [start] exp(P_e) S0 + Xe^T W`, `Xe` the exit-weighted keys
 * (`exitKeys`: `Gam[e, t] x_t`, written by `solve`). Two products of `C x Dk x 16` per chunk and workgroup
 * against one of `Dk x Dk x 16` for `delta_state_scan`, but it reads no transition.
 */
export function deltaValueScanKernel(s: ChunkShape): string {
  const component = (v: string) =>
    `vec4<f32>(${[0, 1, 2, 3].map((q) => v.replaceAll("CC", `cc${q}`)).join(", ")})`;
  return factoredScanKernel(s, {
    reverse: false,
    start: (i, c) => `select(0.0, init[(bh * DK + ${i}) * DV + ${c}], u.hasInit != 0u)`,
    stored: "u.entryState",
    end: (i, c, v) => `cw[u.finalState + (bh * DK + ${i}) * DV + ${c}] = ${v};`,
    first: "u.pseudoValuesStateFactor",
    second: "u.exitKeys",
    firstAddend: (t) => component(`cw[u.pseudoValuesConstant + (ch * C + ${t}) * DV + CC]`),
    firstStore: (t, c, v) => `cw[u.pseudoValues + (bh * u.T + a + ${t}) * DV + ${c}] = ${v};`,
    subtractSecond: false,
    addend: (i) =>
      `select(vec4<f32>(0.0), dec * ${
        component(`s0[(bh * DK + ${i}) * DV + CC]`)
      }, bk == 1u && u.hasS0 != 0u)`,
  });
}

/**
 * `delta_value_reverse_scan`: `delta_reverse_scan` with the transposed transition left in its factors:
 * `G_{n-1} = [no start] exp(P_e) G_n - V^T (Xe G_n) + L_n`.
 */
export function deltaValueReverseScanKernel(s: ChunkShape): string {
  return factoredScanKernel(s, {
    reverse: true,
    start: () => "0.0",
    stored: "u.dExitState",
    end: (i, c, v) => `out[u.gDC + (bh * DK + ${i}) * DV + ${c}] = ${v};`,
    first: "u.exitKeys",
    second: "u.pseudoValuesStateFactor",
    subtractSecond: true,
    addend: (i) =>
      `vec4<f32>(${
        [0, 1, 2, 3].map((q) => `cw[u.reverseScanLink + (ch * DK + ${i}) * DV + cc${q}]`).join(", ")
      })`,
  });
}

/**
 * WGSL of `acc op= sum_{j < kp} term(j)`, unrolled whole into 4 partial sums. On the H200 (8x4096x8x64, falcon1,
 * 2026-12-02 18:24 UTC) `delta_value_scan` / `delta_value_reverse_scan` took 0.97 / 0.85 ms as a loop of one term
 * per step, 0.76 / 0.65 as a loop of 4 terms into 4 partial sums and 0.71 / 0.58 unrolled whole.
 */
function panelProduct(acc: string, op: string, kp: number, term: (j: string) => string): string {
  const parts = [0, 1, 2, 3].slice(0, Math.min(4, kp));
  const terms = Array.from({ length: kp }, (_, j) => `part${j % 4} += ${term(`${j}u`)};`);
  return `{
          ${parts.map((p) => `var part${p} = vec4<f32>(0.0);`).join(" ")}
          ${terms.join("\n          ")}
          ${acc} ${op} ${
    parts.length === 4 ? "(part0 + part1) + (part2 + part3)" : parts.map((p) => `part${p}`).join(" + ")
  };
        }`;
}

/** WGSL index `i` clamped below `n` unless every panel of `kp` ends within `n`. */
function clampedIndex(i: string, n: number, kp: number): string {
  return n % kp === 0 ? i : `min(${i}, ${n - 1}u)`;
}

/**
 * A factored scan. One workgroup per `(b, h)` and {@linkcode scanColumns} value columns, laid out as the
 * transition scans' ({@linkcode scanKernel}): per column group {@linkcode SCAN_ROW_LANES} invocations with 4
 * columns each, the state's columns (`col`) and `Y`'s (`ycol`) in workgroup memory as vec4 of a group's 4 columns.
 * Per chunk the panels run in order: the first factor's `KP` columns at a time (all `C` rows, kept at stride
 * `KP + 1`), then the second's `KP` rows at a time; each is loaded coalesced into registers one panel ahead (the
 * next chunk's first panel during the current chunk's last one). The first product takes the chunk rows
 * `lane + 64 m` of the invocation's columns, the second the key rows `lane + 64 m`. Factor rows past the chunk's
 * end read as 0. Measured on the H200 (8x4096x8x64, falcon1, 2026-12-02 18:17 UTC, the products still loops):
 * `delta_value_scan` 1.00 ms at 16 columns per workgroup against 1.59 at 8, and 1.35 with whole-chunk panels
 * (`KP = 64`, 2 panels per chunk instead of 4, 24.7 KiB of workgroup memory).
 */
function factoredScanKernel(s: ChunkShape, sides: FactoredScanSides): string {
  const groups = scanColumnGroups(s.dk);
  const WG = SCAN_ROW_LANES * groups;
  // the first factor's KP columns (stride KP + 1) or the second's KP rows
  const KP = panelSize((kp) => Math.max(s.C * (kp + 1), kp * s.dk));
  const NP1 = Math.ceil(s.dk / KP);
  const NP2 = Math.ceil(s.C / KP);
  const Q = [...Array(SCAN_LANE_COLUMNS).keys()];
  const M = [...Array(Math.ceil(s.dk / SCAN_ROW_LANES)).keys()];
  const MC = [...Array(Math.ceil(s.C / SCAN_ROW_LANES)).keys()];
  const P = [...Array(Math.ceil((Math.max(s.C, s.dk) * KP) / WG)).keys()];
  const panelFloats = Math.max(s.C * (KP + 1), KP * s.dk);
  const chunkAt = (k: string) => (sides.reverse ? `nck() - 1u - ${k}` : k);
  const eachRow = (rows: number[], name: string, bound: string, body: (m: number) => string) =>
    rows.map((m) =>
      `if (${name}${m} < ${bound}) {
      ${body(m)}
    }`
    ).join("\n    ");
  const keyRows = (body: (m: number) => string) => eachRow(M, "i", "DK", body);
  const chunkRows = (body: (m: number) => string) => eachRow(MC, "t", "C", body);
  const eachColumn = (e: string, store: (q: number, v: string) => string) =>
    Q.map((q) => `if (c0 + ${q}u < DV) { ${store(q, `${e}[${q}]`)} }`).join("\n      ");
  const panelStore = (first: boolean) =>
    P.map((r) => {
      const e = `lid + ${r * WG}u`;
      return first
        ? `if (${e} < C * ${KP}u) { panel[((${e}) / ${KP}u) * ${KP + 1}u + (${e}) % ${KP}u] = pf${r}; }`
        : `if (${e} < DK * ${KP}u) { panel[${e}] = pf${r}; }`;
    }).join("\n      ");
  const prefetch = (ch: string, len: string, q: string) =>
    P.map((r) => `pf${r} = panel_entry(${ch}, ${len}, ${q}, lid + ${r * WG}u);`).join("\n        ");
  const sign = sides.subtractSecond ? "-=" : "+=";
  return `
const NP1 = ${NP1}u; // panels of the first factor per chunk
const NP2 = ${NP2}u; // panels of the second factor per chunk
// key row i of each column group's 4 columns at (group DK + i); chunk row t of Y's at (group C + t)
var<workgroup> col: array<vec4<f32>, ${groups * s.dk}>;
var<workgroup> ycol: array<vec4<f32>, ${groups * s.C}>;
var<workgroup> panel: array<f32, ${panelFloats}>;
fn chunk_len(n: u32) -> u32 { return min(C, u.T - n * C); }
// entry e of panel q of chunk ch (b h NCK + n, len steps): the first factor's columns q KP.., else the
// second's rows (q - NP1) KP..; 0 past the chunk's steps and the keys
fn panel_entry(ch: u32, len: u32, q: u32, e: u32) -> f32 {
  if (q < NP1) {
    let t = e / ${KP}u;
    let j = q * ${KP}u + e % ${KP}u;
    if (t >= len || j >= DK) { return 0.0; }
    return cw[${sides.first} + (ch * C + t) * DK + j];
  }
  let t = (q - NP1) * ${KP}u + e / DK;
  if (e / DK >= ${KP}u || t >= len) { return 0.0; }
  return cw[${sides.second} + (ch * C + t) * DK + e % DK];
}
${scanEntry(s)}
  let yslot0 = (lid / ${SCAN_ROW_LANES}u) * C;
  ${MC.map((m) => `let t${m} = lane + ${m * SCAN_ROW_LANES}u;`).join("\n  ")}
  ${
    keyRows((m) =>
      `col[slot0 + i${m}] = vec4<f32>(${Q.map((q) => sides.start(`i${m}`, `cc${q}`)).join(", ")});`
    )
  }
  let first = ${chunkAt("0u")};
  ${
    P.map((r) => `var pf${r} = panel_entry(bh * nck() + first, chunk_len(first), 0u, lid + ${r * WG}u);`)
      .join("\n  ")
  }
  workgroupBarrier();
  for (var k = 0u; k < nck(); k++) {
    let n = ${chunkAt("k")};
    let ch = bh * nck() + n;
    let a = n * C;
    let len = chunk_len(n);
    let dec = cw[u.chunkDecay + ch];
    let bk = u32(cw[u.exitBaseKind + ch]);
    ${
    keyRows((m) =>
      `let e = col[slot0 + i${m}];
      ${eachColumn("e", (q, v) => `cw[${sides.stored} + (ch * DK + i${m}) * DV + cc${q}] = ${v};`)}`
    )
  }
    // the addends, loaded before the products that hide their latency
    ${M.map((m) => `var v${m} = vec4<f32>(0.0);`).join(" ")}
    ${keyRows((m) => `v${m} = ${sides.addend(`i${m}`)};`)}
    ${MC.map((m) => `var fa${m} = vec4<f32>(0.0);`).join(" ")}
    ${
    sides.firstAddend ? chunkRows((m) => `if (t${m} < len) { fa${m} = ${sides.firstAddend!(`t${m}`)}; }`) : ""
  }
    // Y = F S, the first factor's panels
    ${MC.map((m) => `var y${m} = vec4<f32>(0.0);`).join(" ")}
    for (var q = 0u; q < NP1; q++) {
      workgroupBarrier();
      ${panelStore(true)}
      workgroupBarrier();
      ${prefetch("ch", "len", "q + 1u")}
      let p0 = q * ${KP}u;
      ${
    MC.map((m) =>
      `if (t${m} < C) {
        ${
        panelProduct(
          `y${m}`,
          "+=",
          KP,
          (j) => `panel[t${m} * ${KP + 1}u + ${j}] * col[slot0 + ${clampedIndex(`p0 + ${j}`, s.dk, KP)}]`,
        )
      }
      }`
    ).join("\n      ")
  }
    }
    ${
    chunkRows((m) =>
      `let y = select(vec4<f32>(0.0), ${sides.firstAddend ? `fa${m} - y${m}` : `y${m}`}, t${m} < len);
      ycol[yslot0 + t${m}] = y;${
        sides.firstStore
          ? `
      if (t${m} < len) {
        ${eachColumn("y", (q, v) => sides.firstStore!(`t${m}`, `c0 + ${q}u`, v))}
      }`
          : ""
      }`
    )
  }
    // S' = base ${sides.subtractSecond ? "-" : "+"} H^T Y + addend, the second factor's panels
    ${keyRows((m) => `v${m} += select(0.0, dec, bk == 0u) * col[slot0 + i${m}];`)}
    for (var q = NP1; q < NP1 + NP2; q++) {
      workgroupBarrier();
      ${panelStore(false)}
      workgroupBarrier();
      if (q + 1u < NP1 + NP2) {
        ${prefetch("ch", "len", "q + 1u")}
      } else if (k + 1u < nck()) {
        let next = ${chunkAt("(k + 1u)")};
        ${prefetch("bh * nck() + next", "chunk_len(next)", "0u")}
      }
      let p0 = (q - NP1) * ${KP}u;
      ${
    M.map((m) =>
      `if (i${m} < DK) {
        ${
        panelProduct(
          `v${m}`,
          sign,
          KP,
          (j) => `panel[${j} * DK + i${m}] * ycol[yslot0 + ${clampedIndex(`p0 + ${j}`, s.C, KP)}]`,
        )
      }
      }`
    ).join("\n      ")
  }
    }
    ${keyRows((m) => `col[slot0 + i${m}] = v${m};`)}
  }
  ${
    keyRows((m) =>
      `let e = col[slot0 + i${m}];
      ${eachColumn("e", (q, v) => sides.end(`i${m}`, `cc${q}`, v))}`
    )
  }
}`;
}
