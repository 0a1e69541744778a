/**
 * WGSL of the delta rules' sequential scans over the chunks of each `(b, h)` (falcon1, deltanet,
 * gated_deltanet, falcon3), float32:
 * - `delta_state_scan`: `S_{n+1} = K_n S_n + Bv_n` from `S_0 = init` (or 0), storing every entry state
 *   `S_n` (`entryState`) and the final state (`finalState`);
 * - `delta_reverse_scan`: `G_{n-1} = K_n^T G_n + L_n` from `G = 0` at the last chunk, storing every `G_n`
 *   (`dExitState`) and the gradient of the carried state (`gDC`).
 * `K_n` is `transitionMatrix [NCK, Dk, Dk]`, `Bv_n` / `L_n` are `chunkStateIncrement` / `reverseScanLink`
 * `[NCK, Dk, Dv]` (sections of the chunk workspace, `fast_weight_chunk_delta.ts`).
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

/** Transition columns (or rows) per panel: at most 32, as many as keep the panel within 2304 floats (9 KiB). */
function scanPanelSize(dk: number): number {
  let kp = 32;
  while (kp > 1 && dk * (kp + 1) > 2304) kp >>= 1;
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

function scanKernel(s: ChunkShape, sides: ScanSides): string {
  const groups = scanColumnGroups(s.dk);
  const SC = scanColumns(s.dk);
  const WG = SCAN_ROW_LANES * groups;
  const KP = scanPanelSize(s.dk);
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
    ? (i: string) => `panel[j * DK + ${i}]`
    : (i: string) => `panel[${i} * ${KP + 1}u + j]`;
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
@compute @workgroup_size(${WG})
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
  ${M.map((m) => `let i${m} = lane + ${m * SCAN_ROW_LANES}u;`).join("\n  ")}
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
        for (var j = 0u; j < ${KP}u; j++) {
          v${m} += ${panelRead(`i${m}`)} * col[slot0 + min(p0 + j, DK - 1u)];
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
