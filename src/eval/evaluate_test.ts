import { assertEquals, assertRejects } from "./_assert.ts";
import {
  BITS,
  type EvalProgress,
  evaluateModels,
  type ScoringModel,
  TEACHER_FORCED,
  type TestGroup,
} from "./evaluate.ts";
import type { Batch } from "../model/types.ts";

/** A one-row batch of `T` positions, all scored, targets `target`, ids tagged with `tag`. */
function batchOf(tag: number, targets: number[]): Batch {
  const T = targets.length;
  return {
    B: 1,
    T,
    ids: new Int32Array(T).fill(tag),
    targets: Int32Array.from(targets),
    weights: new Float32Array(T).fill(1),
    starts: Uint8Array.from({ length: T }, (_, t) => (t === 0 ? 1 : 0)),
  };
}

/** A fake model that always predicts token `answer` (one-hot logits) and records the batch tags it saw. */
function constantModel(answer: number, vocabSize: number, seen: number[]): ScoringModel {
  return {
    config: { vocabSize },
    logits(batch) {
      seen.push(batch.ids[0]);
      const out = new Float32Array(batch.B * batch.T * vocabSize);
      for (let i = 0; i < batch.B * batch.T; i++) out[i * vocabSize + answer] = 1;
      return Promise.resolve(out);
    },
  };
}

Deno.test("evaluateModels() scores every model on the same batches, one batch alive at a time", async () => {
  let alive = 0;
  let maxAlive = 0;
  const group = (key: number, targetsPerBatch: number[][]): TestGroup => ({
    key,
    batchCount: targetsPerBatch.length,
    *batches() {
      for (let i = 0; i < targetsPerBatch.length; i++) {
        alive++;
        maxAlive = Math.max(maxAlive, alive);
        yield batchOf(key * 10 + i, targetsPerBatch[i]);
        alive--;
      }
    },
  });
  // group 1: batches [1,1] and [0,1]; group 2: one batch [0,0,1]
  const groups = [group(1, [[1, 1], [0, 1]]), group(2, [[0, 0, 1]])];
  const seenA: number[] = [];
  const seenB: number[] = [];
  const progress: EvalProgress[] = [];
  const [a, b] = await evaluateModels(
    [constantModel(1, 2, seenA), constantModel(0, 2, seenB)],
    groups,
    TEACHER_FORCED,
    (p) => progress.push(p),
  );
  assertEquals(seenA, [10, 11, 20]);
  assertEquals(seenB, seenA);
  assertEquals(maxAlive, 1);
  // model A predicts 1 everywhere: group 1 has 3 of 4 right, 1 of 2 sequences exact; group 2 has 1 of 3, none exact
  assertEquals(a.get(1), { tokens: 4, correctTokens: 3, sequences: 2, exactSequences: 1 });
  assertEquals(a.get(2), { tokens: 3, correctTokens: 1, sequences: 1, exactSequences: 0 });
  // model B predicts 0 everywhere
  assertEquals(b.get(1), { tokens: 4, correctTokens: 1, sequences: 2, exactSequences: 0 });
  assertEquals(b.get(2), { tokens: 3, correctTokens: 2, sequences: 1, exactSequences: 0 });
  assertEquals(progress.map((p) => p.done), [1, 2, 3, 4, 5, 6]);
  assertEquals(progress.every((p) => p.total === 6), true);
  assertEquals(progress.map((p) => p.key), [1, 1, 1, 1, 2, 2]);
});

Deno.test("evaluateModels() with BITS sums bits per group: one-hot logit 1 over 2 tokens", async () => {
  const [tallies] = await evaluateModels(
    [constantModel(0, 2, [])],
    [{ key: 0, batchCount: 1, batches: () => [batchOf(0, [0, 1])] }],
    BITS,
  );
  // p(0) = e / (e + 1), p(1) = 1 / (e + 1)
  const expected = -Math.log2(Math.E / (Math.E + 1)) - Math.log2(1 / (Math.E + 1));
  const bits = tallies.get(0)!.bits;
  if (Math.abs(bits - expected) > 1e-6) throw new Error(`bits ${bits}, expected ${expected}`);
});

Deno.test("evaluateModels() rejects duplicate group keys and an empty model list", async () => {
  const g = { key: 4, batchCount: 0, batches: () => [] };
  await assertRejects(
    () => evaluateModels([constantModel(0, 2, [])], [g, g], TEACHER_FORCED),
    RangeError,
    "key 4",
  );
  await assertRejects(() => evaluateModels([], [g], TEACHER_FORCED), RangeError, "at least one model");
});
