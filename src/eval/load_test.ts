import { assertEquals, assertRejects } from "./_assert.ts";
import { loadEvalCheckpoint } from "./load.ts";
import { writeTinyCheckpoint } from "./_tiny_checkpoint.ts";
import { InputError } from "../errors.ts";
import { writeSafetensors } from "../checkpoint/mod.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../tasks/mod.ts";

Deno.test("loadEvalCheckpoint() rebuilds the saved model: same logits, meta from the configs", async () => {
  const path = await Deno.makeTempFile({ suffix: ".safetensors" });
  try {
    const model = await writeTinyCheckpoint(path, additionConfig({ maxDigits: 5 }), ADDITION_VOCAB_SIZE, {
      mixer: "falcon3a",
    });
    const loaded = await loadEvalCheckpoint(path, createRefBackend());
    assertEquals(loaded.meta, { path, mixer: "falcon3a", alignment: "prefix", seed: 7, trainLength: 5 });
    const batch = { B: 1, T: 5, ids: Int32Array.of(1, 10, 2, 11, 3), starts: Uint8Array.of(1, 0, 0, 0, 0) };
    assertEquals([...await loaded.model.logits(batch)], [...await model.logits(batch)]);
  } finally {
    await Deno.remove(path);
  }
});

Deno.test("loadEvalCheckpoint() names the file when it is missing or not a falcon checkpoint", async () => {
  const backend = createRefBackend();
  const path = await Deno.makeTempFile({ suffix: ".safetensors" });
  try {
    await Deno.writeFile(path, writeSafetensors({}, { format: "pt" }));
    await assertRejects(
      () => loadEvalCheckpoint(path, backend),
      InputError,
      `${path} is not a falcon checkpoint`,
    );
    await Deno.writeTextFile(path, "hello");
    await assertRejects(
      () => loadEvalCheckpoint(path, backend),
      InputError,
      `${path} is not a falcon checkpoint`,
    );
  } finally {
    await Deno.remove(path);
  }
  await assertRejects(() => loadEvalCheckpoint(`${path}.gone`, backend), InputError, "does not exist");
});
