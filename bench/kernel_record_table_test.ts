import { equal, ok } from "node:assert/strict";
import { recordTable, tokens } from "./kernel_record_table.ts";

Deno.test("kernel_record_table: figures, streamed columns and ratios to the rule's nearest fla op", () => {
  const table = recordTable(
    [
      {
        rule: "falcon1a",
        forward_tokens_per_s: 19e6,
        forward_streamed_tokens_per_s: 27.35e6,
        forward_backward_tokens_per_s: 7.83e6,
        forward_backward_streamed_tokens_per_s: 9.1e6,
        forward_backward_recompute_tokens_per_s: 6.97e6,
        forward_batch_span_ms: 1.0341,
      },
      { rule: "falcon2", forward_tokens_per_s: 7.62e6, forward_backward_tokens_per_s: 720e3 },
      { rule: "falcon1", forward_tokens_per_s: 12e6, forward_backward_tokens_per_s: 4e6 },
      { rule: "falcon3", error: "workspace above the binding limit" },
    ],
    [{ rule: "falcon1a", forward_tokens_per_s: 3.8e6, forward_backward_tokens_per_s: 2.63e6 }],
    [
      { op: "chunk_simple_gla", dtype: "fp32", pass: "fwd", tokens_per_second: 76e6 },
      { op: "chunk_simple_gla", dtype: "fp32", pass: "fwd+bwd", tokens_per_second: 15.66e6 },
      { op: "chunk_simple_gla", dtype: "bf16", pass: "fwd", tokens_per_second: 1e9 },
    ],
  );
  const lines = table.trim().split("\n");
  equal(lines.length, 2 + 4);
  equal(
    lines[2],
    "| falcon1a | 19.00M | 27.35M | 7.83M | 9.10M | 6.97M | 1.03 | 3.80M | 2.63M | 0.25 / 0.50 of `chunk_simple_gla` fp32 |",
  );
  ok(lines[3].startsWith("| falcon2 | 7.62M |  | 720k |") && lines[3].endsWith("| no fla op |"), lines[3]);
  ok(lines[4].endsWith("| (no `chunk_gated_delta_rule` fp32 line) |"), lines[4]);
  ok(lines[5].startsWith("| falcon3 | error: workspace above the binding limit |"), lines[5]);
});

Deno.test("kernel_record_table: tokens/s cells", () => {
  equal(tokens(12_345_678), "12.35M");
  equal(tokens(719_600), "720k");
  equal(tokens(undefined), "");
  equal(tokens(NaN), "");
});
