/**
 * Host-side sizing of the chunk-parallel kernels: tiles that fit the workgroup memory, a RangeError
 * naming the chunk size when nothing fits, and work spread over `B*H*chunks*tiles` workgroups.
 */

import { ruleConfig } from "../src/rules/config.ts";
import { chunkShape } from "./fast_weight_chunk.ts";
import { CHUNK_PASSES, chunkSharedFloats, chunkWork } from "./shaders/chunk_wgsl.ts";
import { scanColumns } from "./shaders/chunk_delta_scans.ts";
import { PAIR_COLUMN_TILE_MAX, SOLVE_INPUT_GRADS_ROWS_MAX, WINDOW_TILE_ROWS } from "./shaders/chunk_wgsl.ts";

const WEBGPU_DEFAULT_SHARED = 16384;

Deno.test("chunkShape picks the largest tiles (up to 16) whose workgroup arrays fit", () => {
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
    if (s.R !== 16) throw new Error(`${rule}: R = ${s.R}, expected 16 at C = 64`);
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
  for (const pass of CHUNK_PASSES) {
    const groups = chunkWork(pass, s, config.window - 1, d.B, d.T);
    // the scans over chunks: one invocation per state element (additive: B*H*Dk*Dv/64 workgroups)
    // or one workgroup per scanColumns(Dk) value columns (delta: an invocation per key row), or one per
    // value column (the per-column rules' column_state_scan and column_reverse_scan: an invocation per chunk row or key row)
    const floor = pass === "state_scan" || pass === "reverse_scan"
      ? (BH * d.dk * d.dv) / 64
      : pass === "delta_state_scan" || pass === "delta_reverse_scan"
      ? BH * Math.ceil(d.dv / scanColumns(d.dk))
      : pass === "column_state_scan" || pass === "column_reverse_scan"
      ? BH * d.dv
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
