/**
 * THE LEARNING TEST: the `tiny` preset learns addition with a Falcon rule (falcon1, prefix
 * alignment, seed 0). At the small test level (the default) it trains on the WASM backend with one
 * thread (about 20 s here; WASM is checked against the float64 reference op by op and form by form
 * elsewhere); at `FALCON_TEST_LEVEL=full` on the float64 reference backend itself (about 4-5 minutes on
 * 2 CPU cores, the long pole of the suite when it ran at every level).
 *
 * Asserted: the mean loss of the last 10 steps is at most 1/5 of the first 10 steps' (a fall by a
 * factor >= 5; chance is ln 14 = 2.64 nats), and the in-distribution teacher-forced digit accuracy
 * (100 examples per operand length 1-2, both operands of that length) is at least 75% (chance 10%).
 * Measured when written (deterministic for a given model implementation): loss 2.81 -> 0.11
 * (x25); digit accuracy 100% at 1 digit, 90% at 2 digits, 94% over both; exact match 89%.
 */

import assert from "node:assert/strict";
import type { Backend } from "../rules/backend.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { testLevelFromEnv } from "../testing/level.ts";
import { createWasmBackend } from "../wasm/backend.ts";
import { ADDITION_EOS_ID, ADDITION_PAD_ID, additionTestSet } from "../tasks/addition.ts";
import { teacherForcedAccuracy } from "./accuracy.ts";
import { planRun } from "./plan.ts";
import { train } from "./trainer.ts";

/** Loss must fall by at least this factor (first 10 steps' mean over last 10 steps' mean). */
const LOSS_FALL_FACTOR = 5;
/** In-distribution digit accuracy floor. */
const DIGIT_ACCURACY_FLOOR = 0.75;

const LEVEL = testLevelFromEnv();

Deno.test(`the tiny preset learns addition with falcon1 (${LEVEL === "full" ? "float64 reference" : "WASM, 1 thread"}): loss falls x5 and digit accuracy >= 75%`, async () => {
  const dir = await Deno.makeTempDir();
  const wasm = LEVEL === "full" ? null : await createWasmBackend({ threads: 1 });
  const backend: Backend = wasm ?? createRefBackend();
  try {
    const setup = await planRun({
      task: "addition",
      mixer: "falcon1",
      alignment: "prefix",
      preset: "tiny",
      seed: 0,
      outDir: dir,
      resume: false,
      explicit: new Set(),
      backend,
    });
    const result = await train(setup);
    assert.equal(result.status, "completed");
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    const first = mean(result.losses.slice(0, 10));
    const last = mean(result.losses.slice(-10));
    const maxDigits = setup.task.task === "addition" ? setup.task.maxDigits : 0;
    const examples = Array.from({ length: maxDigits }, (_, i) => additionTestSet(i + 1, 100, 0)).flat();
    const acc = await teacherForcedAccuracy(result.model, examples, {
      eosId: ADDITION_EOS_ID,
      padId: ADDITION_PAD_ID,
    });
    console.log(
      `tiny/falcon1: loss ${first.toFixed(3)} -> ${last.toFixed(3)} (x${(first / last).toFixed(2)}), ` +
        `digit accuracy ${(100 * acc.tokenAccuracy).toFixed(1)}%, exact ${
          (100 * acc.exactMatch).toFixed(1)
        }%, ` +
        `${result.parameterCount} parameters, ${result.elapsedSeconds.toFixed(0)} s, ` +
        `peak RSS ${(result.peakRssBytes / 2 ** 20).toFixed(0)} MiB`,
    );
    assert.ok(
      first / last >= LOSS_FALL_FACTOR,
      `loss fell only x${(first / last).toFixed(2)} (${first} -> ${last})`,
    );
    assert.ok(
      acc.tokenAccuracy >= DIGIT_ACCURACY_FLOOR,
      `digit accuracy ${acc.tokenAccuracy} below the floor ${DIGIT_ACCURACY_FLOOR}`,
    );
  } finally {
    wasm?.close();
    await Deno.remove(dir, { recursive: true });
  }
});
