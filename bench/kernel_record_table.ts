/**
 * The table of a chunk-kernel record (`bench/kernel_record.sh`) for docs/performance.md: per rule the
 * forward and forward + backward tokens/s of `gpu_bench.ts` at the bench shape (the figures of record, one sync per
 * batch, and the streamed ones), the recomputing pair, the forward batch's device span, both figures at the
 * `addition` mixer shape, and the ratios of the figures of record to the nearest fla op of the same call.
 *
 *   deno run --allow-read bench/kernel_record_table.ts RECORD_DIR
 *
 * RECORD_DIR holds `gpu_bench_8x4096x8x64.json`, `gpu_bench_32x128x4x64.json` and `fla_kernel_peer.jsonl`
 * (a file that is absent leaves its columns empty). Prints markdown to stdout.
 *
 * @module
 */

/** One rule's figures in a `gpu_bench.ts` report (the fields the table reads). */
export interface BenchRow {
  rule: string;
  error?: string;
  forward_tokens_per_s?: number;
  forward_streamed_tokens_per_s?: number;
  forward_backward_tokens_per_s?: number;
  forward_backward_streamed_tokens_per_s?: number;
  forward_backward_recompute_tokens_per_s?: number;
  forward_batch_span_ms?: number;
}

/** One line of `fla_kernel_peer.py`. */
export interface PeerRow {
  op: string;
  dtype: string;
  pass: string;
  tokens_per_second: number;
}

/** The fla op nearest each rule, and the dtype the record times it in. */
export const NEAREST_FLA_OP: Readonly<Record<string, { op: string; dtype: string }>> = {
  falcon1: { op: "chunk_gated_delta_rule", dtype: "fp32" },
  gated_deltanet: { op: "chunk_gated_delta_rule", dtype: "fp32" },
  deltanet: { op: "chunk_delta_rule", dtype: "bf16" },
  falcon1a: { op: "chunk_simple_gla", dtype: "fp32" },
  mamba2: { op: "chunk_simple_gla", dtype: "fp32" },
  retnet: { op: "chunk_simple_gla", dtype: "fp32" },
  linear: { op: "chunk_simple_gla", dtype: "fp32" },
  falcon3a: { op: "chunk_simple_gla", dtype: "fp32" },
};

/** Tokens/s as `12.34M` or `720k`; an empty cell where absent. */
export function tokens(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return "";
  return x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : `${Math.round(x / 1e3)}k`;
}

/** The markdown table of `bench` (bench shape), `small` (mixer shape) and `peer` (fla's lines). */
export function recordTable(bench: BenchRow[], small: BenchRow[], peer: PeerRow[]): string {
  const fla = (rule: string, pass: string) => {
    const near = NEAREST_FLA_OP[rule];
    return near && peer.find((p) => p.op === near.op && p.dtype === near.dtype && p.pass === pass);
  };
  const header = [
    "rule",
    "fwd, 8x4096x8x64",
    "streamed",
    "fwd+bwd",
    "streamed",
    "recomputing fwd+bwd",
    "forward batch span ms",
    "fwd, 32x128x4x64",
    "fwd+bwd",
    "of fla (fwd / fwd+bwd)",
  ];
  const rows = bench.map((r) => {
    if (r.error) return [r.rule, `error: ${r.error}`, ...header.slice(2).map(() => "")];
    const s = small.find((x) => x.rule === r.rule);
    const [f, fb] = [fla(r.rule, "fwd"), fla(r.rule, "fwd+bwd")];
    const near = NEAREST_FLA_OP[r.rule];
    const ratio = f && fb && r.forward_tokens_per_s && r.forward_backward_tokens_per_s
      ? `${(r.forward_tokens_per_s / f.tokens_per_second).toFixed(2)} / ${
        (r.forward_backward_tokens_per_s / fb.tokens_per_second).toFixed(2)
      } of \`${near.op}\` ${near.dtype}`
      : near
      ? `(no \`${near.op}\` ${near.dtype} line)`
      : "no fla op";
    return [
      r.rule,
      tokens(r.forward_tokens_per_s),
      tokens(r.forward_streamed_tokens_per_s),
      tokens(r.forward_backward_tokens_per_s),
      tokens(r.forward_backward_streamed_tokens_per_s),
      tokens(r.forward_backward_recompute_tokens_per_s),
      r.forward_batch_span_ms === undefined ? "" : r.forward_batch_span_ms.toFixed(2),
      tokens(s?.forward_tokens_per_s),
      tokens(s?.forward_backward_tokens_per_s),
      ratio,
    ];
  });
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n") + "\n";
}

async function readJson<T>(path: string, pick: (x: unknown) => T, absent: T): Promise<T> {
  try {
    return pick(JSON.parse(await Deno.readTextFile(path)));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return absent;
    throw new Error(`${path}: ${e instanceof Error ? e.message : e}`);
  }
}

if (import.meta.main) {
  const dir = Deno.args[0];
  if (!dir) {
    console.error("usage: deno run --allow-read bench/kernel_record_table.ts RECORD_DIR");
    Deno.exit(2);
  }
  const results = (x: unknown) => (x as { fastWeight: { results: BenchRow[] } }).fastWeight.results;
  const bench = await readJson(`${dir}/gpu_bench_8x4096x8x64.json`, results, []);
  const small = await readJson(`${dir}/gpu_bench_32x128x4x64.json`, results, []);
  let peer: PeerRow[] = [];
  try {
    peer = (await Deno.readTextFile(`${dir}/fla_kernel_peer.jsonl`)).split("\n").filter((l) =>
      l.startsWith("{")
    )
      .map((l) => JSON.parse(l));
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  if (bench.length === 0) {
    console.error(`${dir}/gpu_bench_8x4096x8x64.json: no results (absent, or the bench failed)`);
    Deno.exit(2);
  }
  console.log(recordTable(bench, small, peer));
}
