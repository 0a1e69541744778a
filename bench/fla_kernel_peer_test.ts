/**
 * bench/fla_kernel_peer.py without fla or a GPU: `--naive` runs fla's semantics in plain PyTorch on
 * the CPU, so the script's options, rows and refusals are checked here; its timings on the H200 are
 * the peer of bench/gpu_bench.ts. Needs python3 with torch (the skip rule of src/testing/torch_python.ts).
 */

import { ok } from "node:assert/strict";
import { torchTest } from "../src/testing/torch_python.ts";

const SCRIPT = new URL("./fla_kernel_peer.py", import.meta.url).pathname;

async function runScript(
  python: string,
  args: string[],
): Promise<{ code: number; out: string; err: string }> {
  const out = await new Deno.Command(python, { args: [SCRIPT, ...args], env: { OMP_NUM_THREADS: "1" } })
    .output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, out: decode(out.stdout), err: decode(out.stderr) };
}

torchTest(
  "fla_kernel_peer.py --naive prints one timed row per op, dtype, shape and pass; bad options exit 2",
  async (python) => {
    const run = await runScript(python, [
      "--naive",
      "--shapes",
      "1x6x2x4,2x4x1x4",
      "--warmup",
      "0",
      "--reps",
      "1",
    ]);
    ok(run.code === 0, `exit ${run.code}: ${run.err}`);
    const rows = run.out.trim().split("\n").map((line) => JSON.parse(line));
    ok(rows.length === 3 * 2 * 2 * 2, `expected 24 rows, got ${rows.length}`);
    for (const row of rows) {
      ok(row.naive === true && row.timing_only === false, JSON.stringify(row));
      ok(row.tokens_per_second > 0 && row.seconds > 0, JSON.stringify(row));
      ok(
        Math.abs(row.tokens_per_second * row.seconds - row.B * row.T) < 1e-6 * row.B * row.T,
        JSON.stringify(row),
      );
    }
    ok(
      new Set(rows.map((r) => `${r.op}/${r.dtype}/${r.B}x${r.T}x${r.H}x${r.D}/${r.pass}`)).size === 24,
      "rows repeat",
    );
    for (
      const [args, message] of [
        [["--naive", "--shapes", "1x8x2"], "a shape is BxTxHxD with positive integers, got '1x8x2'"],
        [["--naive", "--ops", "chunk_gla"], "unknown op 'chunk_gla'"],
        [["--naive", "--dtypes", "fp16"], "unknown dtype 'fp16'"],
        [["--naive", "--reps", "0"], "--reps >= 1"],
      ] as const
    ) {
      const bad = await runScript(python, [...args]);
      ok(bad.code === 2 && bad.err.includes(message), `${args.join(" ")}: exit ${bad.code}, ${bad.err}`);
    }
  },
);
