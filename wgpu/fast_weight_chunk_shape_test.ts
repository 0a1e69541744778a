/**
 * Host-side sizing of the chunk-parallel kernels: tiles that fit the workgroup memory, a RangeError
 * naming the chunk size when nothing fits, and work spread over `B*H*chunks*tiles` workgroups.
 */

import { ruleConfig } from "../src/rules/config.ts";
import { chunkShape } from "./fast_weight_chunk.ts";
import {
  CHUNK_PASSES,
  CHUNK_WG,
  chunkSharedFloats,
  chunkWork,
  WINDOW_SOLVE,
  WINDOW_SOLVE_COLUMNS,
  WINDOW_SOLVE_PREFETCH_COLUMNS,
  type WindowSolveForm,
  windowSweepFloats,
} from "./shaders/chunk_wgsl.ts";
import { scanColumns } from "./shaders/chunk_delta_scans.ts";
import {
  DIRECT_ROWS_TILE_MAX,
  PAIR_COLUMN_TILE_MAX,
  pairColumnInvocations,
  pairColumnLayout,
  type PairColumnPass,
  pairColumnTail,
  pairColumnTiling,
  ROWS_TILE_MAX,
  rowsKernelForm,
  rowsLayout,
  rowsTileMax,
  SOLVE_INPUT_GRADS_ROWS_MAX,
  WINDOW_TILE_ROWS,
} from "./shaders/chunk_wgsl.ts";
import { STAGED_WG } from "./shaders/chunk_staged_tiles.ts";
import { COLUMN_SCAN_WG_MAX, columnScanLayout } from "./shaders/fast_weight_chunk_per_column.ts";
import { windowSlots } from "./shaders/fast_weight_recurrent.ts";

const WEBGPU_DEFAULT_SHARED = 16384;

Deno.test("chunkShape picks the largest tiles whose workgroup arrays fit", () => {
  for (const rule of ["falcon1a", "falcon3a", "falcon2"] as const) {
    const config = ruleConfig(rule);
    const d = { B: 8, T: 4096, H: 8, dk: 128, dv: 128 };
    const s = chunkShape(config, d, 64, WEBGPU_DEFAULT_SHARED);
    const f = chunkSharedFloats(config, s);
    const limit = WEBGPU_DEFAULT_SHARED / 4 - 16;
    if (f.rows > limit || f.cols > limit || f.local > limit || f.pairs > limit) {
      throw new Error(`${rule}: tiles overflow: ${JSON.stringify(f)}`);
    }
    const bigger = chunkSharedFloats(config, { ...s, RC: s.RC * 2 });
    if (s.RC < 16 && bigger.cols <= limit) {
      throw new Error(`${rule}: RC = ${s.RC} is not the largest that fits`);
    }
    // readout and query_grads: up to their kernel form's rows for the pair-column rules, 16 for the per-column ones
    const rows = rule === "falcon2" ? 16 : rowsTileMax(windowSlots(config) - 1);
    if (s.R > rows || (s.R < rows && chunkSharedFloats(config, { ...s, R: 2 * s.R }).rows <= limit)) {
      throw new Error(`${rule}: R = ${s.R} is not the largest (up to ${rows}) that fits`);
    }
  }
  const small = chunkShape(
    ruleConfig("linear"),
    { B: 1, T: 3, H: 1, dk: 2, dv: 2 },
    1,
    WEBGPU_DEFAULT_SHARED,
  );
  if (small.R !== 1 || small.RC !== 1) throw new Error(`C = 1: tiles ${small.R}, ${small.RC}, expected 1, 1`);
});

Deno.test("chunkShape rejects a chunk size that does not fit, naming it", () => {
  let message = "";
  try {
    chunkShape(ruleConfig("falcon1a"), { B: 1, T: 8192, H: 1, dk: 64, dv: 64 }, 4096, WEBGPU_DEFAULT_SHARED);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  if (!message.includes("chunkSize = 4096")) {
    throw new Error(`expected a RangeError naming chunkSize, got "${message}"`);
  }
});

Deno.test("chunk passes spread over B*H*chunks*tiles workgroups, not B*H", () => {
  const config = ruleConfig("falcon3a");
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  const s = chunkShape(config, d, 64, WEBGPU_DEFAULT_SHARED);
  const BH = d.B * d.H;
  const chunks = BH * Math.ceil(d.T / 64);
  // (falcon3a's 67 pair columns at RC = 16 leave 3 for the pair-column tails: a workgroup per chunk each)
  for (const pass of CHUNK_PASSES) {
    const groups = chunkWork(pass, s, config.window - 1, d.B, d.T);
    // the scans over chunks: one invocation per state element (additive: B*H*Dk*Dv/64 workgroups)
    // or one workgroup per scanColumns(Dk) value columns (delta: an invocation per key row), or one per
    // value column (the per-column rules' column_state_scan and column_reverse_scan: an invocation per chunk row or key row)
    // (falcon2a's column_increment_scan and column_gradient_scan likewise)
    const floor = pass === "state_scan" || pass === "reverse_scan" || pass === "reverse_scan_no_s0" ||
        pass === "column_increment_scan" || pass === "column_gradient_scan"
      ? (BH * d.dk * d.dv) / 64
      : pass === "delta_state_scan" || pass === "delta_reverse_scan" || pass === "delta_value_scan" ||
          pass === "delta_value_reverse_scan"
      ? BH * Math.ceil(d.dv / scanColumns(d.dk))
      : pass === "column_state_scan" || pass === "column_reverse_scan"
      ? BH * d.dv
      : pass === "chunk_steps"
      // one invocation per chunk (a walk over its steps)
      ? chunks / 64
      : chunks;
    if (groups < floor) throw new Error(`${pass}: ${groups} workgroups, expected at least ${floor}`);
  }
});

Deno.test("chunkShape sizes falcon3's tiles by its W instance rows per step", () => {
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  const limit = WEBGPU_DEFAULT_SHARED / 4 - 16;
  const s = chunkShape(ruleConfig("falcon3"), d, 64, WEBGPU_DEFAULT_SHARED);
  const f = chunkSharedFloats(ruleConfig("falcon3"), s);
  if (Object.values(f).some((x) => x > limit)) throw new Error(`tiles overflow: ${JSON.stringify(f)}`);
  // window_row_grads and window_solve_input_grads take WINDOW_TILE_ROWS instance rows (whole steps) where the memory allows more
  for (const window of [1, 2, 4]) {
    const big = chunkShape(ruleConfig("falcon3", { window }), d, 64, 49152);
    const steps = WINDOW_TILE_ROWS / window;
    if (big.RC !== steps || big.RP !== steps) {
      throw new Error(`window ${window}: RC = ${big.RC}, RP = ${big.RP}, expected ${steps} steps`);
    }
  }
  // the solve stages W rows x C W columns: window 8 at C = 64 does not fit 16 KiB
  let message = "";
  try {
    chunkShape(ruleConfig("falcon3", { window: 8 }), d, 64, WEBGPU_DEFAULT_SHARED);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  if (!message.includes("chunkSize = 64")) {
    throw new Error(`expected a RangeError naming chunkSize, got "${message}"`);
  }
});

Deno.test("chunkShape gives pair_column_grads up to 64 pair columns per workgroup, as many as fit", () => {
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  for (const rule of ["falcon1a", "falcon1"] as const) {
    const config = ruleConfig(rule);
    // the H200's (and WebGPU's default) workgroup memory: 49152 and 16384 bytes
    for (const [shared, expected] of [[49152, PAIR_COLUMN_TILE_MAX], [WEBGPU_DEFAULT_SHARED, 16]]) {
      const s = chunkShape(config, d, 64, shared);
      const limit = shared / 4 - 16;
      const cols = chunkSharedFloats(config, s).cols;
      if (s.RC !== expected || cols > limit) {
        throw new Error(
          `${rule} at ${shared} bytes: RC = ${s.RC} (${cols} floats), expected ${expected} within ${limit}`,
        );
      }
      if (s.RC < PAIR_COLUMN_TILE_MAX && chunkSharedFloats(config, { ...s, RC: 2 * s.RC }).cols <= limit) {
        throw new Error(`${rule} at ${shared} bytes: RC = ${s.RC} is not the largest that fits`);
      }
    }
  }
});

Deno.test("chunkShape gives the staged readout and query_grads the whole chunk where it fits, falcon3a's direct ones 16 rows", () => {
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  for (const rule of ["falcon1a", "falcon3a", "falcon1", "gated_deltanet"] as const) {
    const config = ruleConfig(rule);
    const pad = windowSlots(config) - 1;
    const form = rowsKernelForm(pad);
    if (form !== (rule === "falcon3a" ? "direct" : "staged")) {
      throw new Error(`${rule}: ${form} rows kernels`);
    }
    // the H200's and llvmpipe's workgroup memory, then WebGPU's default
    for (
      const [shared, staged] of [[49152, ROWS_TILE_MAX], [32768, ROWS_TILE_MAX], [WEBGPU_DEFAULT_SHARED, 32]]
    ) {
      const expected = form === "staged" ? staged : DIRECT_ROWS_TILE_MAX;
      const s = chunkShape(config, d, 64, shared);
      const limit = shared / 4 - 16;
      const rows = chunkSharedFloats(config, s).rows;
      if (s.R !== expected || rows > limit) {
        throw new Error(
          `${rule} at ${shared} bytes: R = ${s.R} (${rows} floats), expected ${expected} within ${limit}`,
        );
      }
      // the whole chunk: one workgroup of STAGED_WG invocations
      if (form === "staged" && s.R === 64 && rowsLayout(s).invocations !== STAGED_WG) {
        throw new Error(`${rule} at ${shared} bytes: ${JSON.stringify(rowsLayout(s))}`);
      }
    }
  }
});

Deno.test("chunkShape gives the delta rules' solve_input_grads the whole chunk where it fits, fewer rows within 16 KiB", () => {
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  for (const rule of ["falcon1", "deltanet", "gated_deltanet"] as const) {
    const config = ruleConfig(rule);
    // the H200's (and llvmpipe's) workgroup memory, then WebGPU's default
    for (const [shared, expected] of [[49152, SOLVE_INPUT_GRADS_ROWS_MAX], [WEBGPU_DEFAULT_SHARED, 16]]) {
      const s = chunkShape(config, d, 64, shared);
      const limit = shared / 4 - 16;
      const pairs = chunkSharedFloats(config, s).pairs;
      if (s.RP !== expected || pairs > limit) {
        throw new Error(
          `${rule} at ${shared} bytes: RP = ${s.RP} (${pairs} floats), expected ${expected} within ${limit}`,
        );
      }
      if (
        s.RP < SOLVE_INPUT_GRADS_ROWS_MAX && chunkSharedFloats(config, { ...s, RP: 2 * s.RP }).pairs <= limit
      ) {
        throw new Error(`${rule} at ${shared} bytes: RP = ${s.RP} is not the largest that fits`);
      }
    }
  }
});

Deno.test("pair-column tiles: whole RC tiles, then the rest in one tail tile of the next power of two below RC", () => {
  // (columns, RC) -> RT: falcon3a at C = 64 (67 = 64 + 3) and C = 3 (6 = 4 + 2), the pad-0 rules at C = 3
  // (3 = 2 + 1); no tail where RC divides the columns, or where the rest needs RC itself (7 = 4 + 3)
  for (
    const [cols, RC, RT] of [[67, 64, 4], [67, 16, 4], [6, 4, 2], [3, 2, 1], [19, 16, 4], [64, 64, 0], [
      7,
      4,
      0,
    ]]
  ) {
    if (pairColumnTail(cols, RC) !== RT) {
      throw new Error(`${cols} columns at RC = ${RC}: RT = ${pairColumnTail(cols, RC)}, expected ${RT}`);
    }
  }
  // every column in exactly one tile: the main pipeline's [0, first), the tail's from there
  for (let cols = 1; cols <= 80; cols++) {
    for (let RC = 1; RC <= 64; RC *= 2) {
      const s = { C: cols, RC, RT: pairColumnTail(cols, RC) };
      const main = pairColumnTiling("pair_column_grads", s, 0);
      const tail = pairColumnTiling("pair_column_grads_tail", s, 0);
      const label = `${cols} columns at RC = ${RC}, RT = ${s.RT}`;
      if (s.RT === 0) {
        if (main.tiles !== Math.ceil(cols / RC) || tail.tiles !== 0) {
          throw new Error(`${label}: tiles ${main.tiles}, ${tail.tiles}`);
        }
        continue;
      }
      if (s.RT >= RC || main.first !== 0 || main.tiles * RC !== tail.first || tail.tiles !== 1) {
        throw new Error(`${label}: main ${JSON.stringify(main)}, tail ${JSON.stringify(tail)}`);
      }
      if (tail.first + s.RT < cols || tail.first + s.RT / 2 >= cols) {
        throw new Error(
          `${label}: a tail of ${s.RT} from ${tail.first} is not the smallest that holds the rest`,
        );
      }
    }
  }
});

Deno.test("chunkShape gives falcon3a at C = 64 a pair-column tail of 4 columns (67 = 64 + 3), the pad-0 rules none", () => {
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  const chunks = d.B * d.H * Math.ceil(d.T / 64);
  for (const [rule, RT] of [["falcon3a", 4], ["falcon1a", 0], ["falcon1", 0]] as const) {
    const config = ruleConfig(rule);
    const pad = windowSlots(config) - 1;
    const passes: [PairColumnPass, PairColumnPass][] = rule === "falcon1"
      ? [["pair_column_grads", "pair_column_grads_tail"], ["readout_dw", "readout_dw_tail"]]
      : [["pair_column_grads", "pair_column_grads_tail"]];
    for (const shared of [49152, WEBGPU_DEFAULT_SHARED]) {
      const s = chunkShape(config, d, 64, shared);
      const label = `${rule} at ${shared} bytes (RC = ${s.RC})`;
      if (s.RT !== RT) throw new Error(`${label}: RT = ${s.RT}, expected ${RT}`);
      for (const [pass, tailPass] of passes) {
        // the main pipeline: the whole tiles; the tail: one workgroup per chunk, none without a tail
        const main = chunkWork(pass, s, pad, d.B, d.T);
        const tail = chunkWork(tailPass, s, pad, d.B, d.T);
        if (main !== chunks * Math.floor((64 + pad) / s.RC) || tail !== (RT ? chunks : 0)) {
          throw new Error(`${label} ${pass}: ${main} and ${tail} workgroups`);
        }
      }
      if (!RT) continue;
      // the tail: 64 invocations (a 4 x 4 block each of its largest product), its workgroup arrays within the main one's
      const tailShape = { ...s, RC: s.RT };
      const wg = pairColumnInvocations(s, s.RT, true);
      if (wg !== 64 || pairColumnInvocations(s, s.RC, false) !== STAGED_WG) {
        throw new Error(`${label}: ${wg} tail invocations, expected 64`);
      }
      const tailFloats = pairColumnLayout(tailShape, "additive", wg).floats;
      const mainFloats = pairColumnLayout(s, "additive").floats;
      if (tailFloats > mainFloats) {
        throw new Error(`${label}: tail ${tailFloats} floats above the main ${mainFloats}`);
      }
    }
  }
});

Deno.test("chunkShape gives falcon3's sweep window_solve the columns that fit (WS), and 0 (serial) otherwise", () => {
  const d = { B: 8, T: 4096, H: 8, dk: 64, dv: 64 };
  const ws = (rule: "falcon3" | "falcon1", C: number, window = 4, shared = WEBGPU_DEFAULT_SHARED) =>
    chunkShape(ruleConfig(rule, rule === "falcon3" ? { window } : {}), d, C, shared).WS;
  const form = WINDOW_SOLVE as WindowSolveForm;
  const sweep = form !== "serial";
  // the register sweeps' columns at C = 64 and 128 (16 register rows of 32 columns at C = 128)
  const registerColumns = form === "sweep_prefetch"
    ? Math.min(WINDOW_SOLVE_PREFETCH_COLUMNS, 32)
    : Math.min(WINDOW_SOLVE_COLUMNS, 8);
  // C = 64: the preset; C = 128 (512 rows): sweep_shared halves its columns until they fit; C = 300 at window 1 (48 KiB): more
  // pairs than the sweep's invocations
  const cases: [number, number, number, number][] = [
    [
      64,
      4,
      form === "sweep_shared" ? Math.min(WINDOW_SOLVE_COLUMNS, 8) : registerColumns,
      WEBGPU_DEFAULT_SHARED,
    ],
    [128, 4, form === "sweep_shared" ? 2 : registerColumns, WEBGPU_DEFAULT_SHARED],
    [300, 1, 0, 49152],
  ];
  for (const [C, window, expected, shared] of cases) {
    const got = ws("falcon3", C, window, shared);
    if (got !== (sweep ? expected : 0)) throw new Error(`C = ${C}, window ${window}: WS = ${got}`);
    if (
      got > 0 &&
      windowSweepFloats(form as Exclude<WindowSolveForm, "serial">, window, C, got) > shared / 4 - 16
    ) {
      throw new Error(`C = ${C}: the sweep overflows`);
    }
  }
  if (ws("falcon1", 64) !== 0) throw new Error("falcon1 has no window_solve");
  // the grid: one workgroup per WS columns of U0 | V
  const s = chunkShape(ruleConfig("falcon3"), d, 64, WEBGPU_DEFAULT_SHARED);
  const per = s.WS > 0 ? s.WS : 64;
  if (chunkWork("window_solve", s, 3, 8, 4096) !== 64 * 64 * Math.ceil(128 / per)) {
    throw new Error("window_solve grid");
  }
});

Deno.test("the per-column scans take CHUNK_WG invocations per column, up to COLUMN_SCAN_WG_MAX and the device's limit", () => {
  const d = { B: 1, T: 4096, H: 8, dk: 64, dv: 64 };
  // the limit as a device states it -> the scans' workgroup size (the largest power of two within it)
  const cases = [[256, 256], [300, 256], [512, 512], [1024, Math.min(1024, COLUMN_SCAN_WG_MAX)]] as const;
  for (const [limit, expected] of cases) {
    for (const rule of ["falcon2", "falcon2a"] as const) {
      const s = chunkShape(ruleConfig(rule), d, 64, 49152, limit);
      const L = columnScanLayout(s);
      if (s.SW !== expected || L.WG !== expected || L.RL * s.CS !== expected || s.CS > expected) {
        throw new Error(
          `${rule}, limit ${limit}: CS = ${s.CS}, SW = ${s.SW}, RL = ${L.RL}; expected SW = ${expected}`,
        );
      }
    }
  }
  // WebGPU's default limit where none is given; no scan workgroups for the other rules
  if (chunkShape(ruleConfig("falcon2"), d, 64, 49152).SW !== 256) {
    throw new Error("expected SW = 256 by default");
  }
  if (chunkShape(ruleConfig("falcon1"), d, 64, 49152, 1024).SW !== 0) {
    throw new Error("expected SW = 0 for falcon1");
  }
  // few value columns: one workgroup of CHUNK_WG lanes per column, up to the limit
  const narrow = chunkShape(ruleConfig("falcon2"), { ...d, dv: 2 }, 64, 49152, 1024);
  if (narrow.CS !== 2 || narrow.SW !== 2 * CHUNK_WG) {
    throw new Error(`Dv = 2: CS = ${narrow.CS}, SW = ${narrow.SW}; expected 2, ${2 * CHUNK_WG}`);
  }
});
