import assert from "node:assert/strict";
import { additionOracle, uniformModel } from "../eval/_oracle.ts";
import { ADDITION_EOS_ID, ADDITION_PAD_ID, additionTestSet } from "../tasks/addition.ts";
import { teacherForcedAccuracy } from "./accuracy.ts";

Deno.test("teacherForcedAccuracy scores a perfect model 1 and a model wrong beyond its length 0", async () => {
  const oracle = additionOracle(2);
  const opts = { eosId: ADDITION_EOS_ID, padId: ADDITION_PAD_ID, batchSize: 7 };
  const inside = await teacherForcedAccuracy(oracle, [
    ...additionTestSet(1, 10, 0),
    ...additionTestSet(2, 10, 0),
  ], opts);
  assert.deepEqual(inside, { examples: 20, tokens: inside.tokens, tokenAccuracy: 1, exactMatch: 1 });
  assert.ok(inside.tokens >= 10 * 1 + 10 * 2);
  const beyond = await teacherForcedAccuracy(oracle, additionTestSet(3, 10, 0), opts);
  assert.equal(beyond.tokenAccuracy, 0);
  assert.equal(beyond.exactMatch, 0);
});

Deno.test("teacherForcedAccuracy of uniform logits picks token 0: right only where the digit is 0", async () => {
  const set = additionTestSet(4, 20, 1);
  let zeros = 0;
  let digits = 0;
  for (const ex of set) {
    for (let i = 0; i < ex.tokens.length; i++) {
      if (ex.loss[i] && ex.tokens[i] !== ADDITION_EOS_ID) {
        digits++;
        if (ex.tokens[i] === 0) zeros++;
      }
    }
  }
  const r = await teacherForcedAccuracy(uniformModel(14), set, { eosId: ADDITION_EOS_ID });
  assert.equal(r.tokens, digits);
  assert.equal(r.tokenAccuracy, zeros / digits);
  assert.equal(r.exactMatch, 0); // EOS is never token 0
});
