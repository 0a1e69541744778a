import { assertEquals } from "../../src/eval/_assert.ts";
import { writeTinyCheckpoint } from "../../src/eval/_tiny_checkpoint.ts";
import { loadEvalCheckpoint } from "../../src/eval/load.ts";
import { evaluateCheckpoints } from "../../src/eval/run.ts";
import { createRefBackend } from "../../src/rules/reference/backend.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../../src/tasks/mod.ts";
import { withTempDir } from "../../src/testing/temp_dir.ts";
import { formatOffsetRows, offsetRows } from "./hint_offsets.ts";

Deno.test("offsetRows() takes places 0..3, the pooled places and the 1-L average from a report at each offset", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/hinted.safetensors`;
    const task = additionConfig({ maxDigits: 2, operandOrder: "lsd", bos: true, indexHints: 8 });
    await writeTinyCheckpoint(path, task, ADDITION_VOCAB_SIZE + 1 + 8, { mixer: "falcon1a" }, 0);
    const checkpoint = await loadEvalCheckpoint(path, createRefBackend());
    const options = { task: "addition" as const, keys: [1, 2, 3], samples: 4, seed: 1, batchSize: 4 };
    for (const hintOffset of [0, 3]) {
      const report = await evaluateCheckpoints([checkpoint], { ...options, hintOffset });
      const [row] = offsetRows(report, hintOffset);
      const places = report.checkpoints[0].places!;
      assertEquals(row.offset, hintOffset);
      assertEquals(row.label, "falcon1a prefix s0");
      assertEquals(row.firstPlaces, [0, 1, 2, 3].map((p) => places.perPlace[p].digitAccuracy));
      assertEquals(row.belowTrainLength, places.inRange!.digitAccuracy);
      assertEquals(row.beyondTrainLength, places.extrapolation!.digitAccuracy);
      assertEquals(row.inDistribution, report.checkpoints[0].inDistribution!.digitAccuracy);
      const table = formatOffsetRows([row]).split("\n");
      assertEquals(table[1].startsWith(`falcon1a prefix s0 | ${hintOffset} | `), true);
      assertEquals(table[1].split(" | ").length, 9);
    }
  });
});
