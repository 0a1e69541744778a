import assert from "node:assert/strict";
import { modelConfig } from "../model/config.ts";
import { additionConfig } from "../tasks/addition.ts";
import {
  type CheckpointState,
  decodeCheckpoint,
  encodeCheckpoint,
  loadCheckpoint,
  saveCheckpoint,
} from "./checkpoint.ts";
import { atomicWriteFile } from "./atomic_write.ts";
import { readSafetensors, writeSafetensors } from "./safetensors.ts";
import { versionOneTransformer } from "../convert/_test_checkpoints.ts";
import { createModel } from "../model/falcon_lm.ts";
import { createRefBackend } from "../rules/reference/backend.ts";

function state(step: number): CheckpointState {
  return {
    step,
    rngState: 4294967295,
    model: modelConfig({ vocabSize: 14, dModel: 8, heads: 2 }),
    task: additionConfig({ maxDigits: 3 }),
    train: { lr: 0.01, steps: 10 },
    params: {
      "embed": { shape: [14, 8], data: Float64Array.from({ length: 112 }, (_, i) => i / 7 + step) },
      "final_norm": { shape: [8], data: Float32Array.from({ length: 8 }, (_, i) => i) },
    },
    adamM: { embed: { shape: [14, 8], data: new Float64Array(112).fill(0.5) } },
    adamV: { embed: { shape: [14, 8], data: new Float64Array(112).fill(0.25) } },
  };
}

Deno.test("a checkpoint round-trips parameters (F64 and F32), optimizer moments, step, RNG state and configs", () => {
  const s = state(3);
  const back = decodeCheckpoint(encodeCheckpoint(s), "c.safetensors");
  assert.deepEqual(back, s);
  assert.ok(back.params.embed.data instanceof Float64Array);
  assert.ok(back.params.final_norm.data instanceof Float32Array);
  const { metadata, tensors } = readSafetensors(encodeCheckpoint(s), "c");
  assert.equal(metadata.format_version, "2");
  assert.ok("optimizer.m.embed" in tensors && "optimizer.v.embed" in tensors);
});

Deno.test("decodeCheckpoint rejects a plain safetensors file and a future format version, naming the field", () => {
  const plain = writeSafetensors({ w: { dtype: "F32", shape: [1], data: new Float32Array(1) } });
  assert.throws(
    () => decodeCheckpoint(plain, "p.safetensors"),
    /p\.safetensors: __metadata__\.format is undefined/,
  );
  const future = writeSafetensors({}, { format: "falcon-checkpoint", format_version: "99" });
  assert.throws(() => decodeCheckpoint(future, "f.safetensors"), /format_version "99" is not supported/);
  for (const version of ["0", "3", "1.5"]) {
    const bad = writeSafetensors({}, { format: "falcon-checkpoint", format_version: version });
    assert.throws(
      () => decodeCheckpoint(bad, "v.safetensors"),
      new RegExp(`format_version "${version}" is not supported \\(expected 1 to 2\\)`),
    );
  }
  const badStep = writeSafetensors({}, { format: "falcon-checkpoint", format_version: "1", step: "-1" });
  assert.throws(
    () => decodeCheckpoint(badStep, "s.safetensors"),
    /__metadata__\.step "-1" is not a non-negative integer/,
  );
});

Deno.test("saveCheckpoint replaces the file atomically and leaves no temporary file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/checkpoint.safetensors`;
    await saveCheckpoint(path, state(1));
    await saveCheckpoint(path, state(2));
    assert.equal((await loadCheckpoint(path)).step, 2);
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert.deepEqual(names, ["checkpoint.safetensors"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a failed atomic write leaves the target untouched and removes its temporary file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // the target is a non-empty directory, so the final rename fails after the data was written
    const target = `${dir}/target`;
    await Deno.mkdir(target);
    await Deno.writeTextFile(`${target}/keep`, "old");
    await assert.rejects(() => atomicWriteFile(target, new Uint8Array(100)));
    assert.equal(await Deno.readTextFile(`${target}/keep`), "old");
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert.deepEqual(names, ["target"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a version-1 Transformer checkpoint loads as the plain model it ran (shortConv false, qkNorm none)", async () => {
  const { bytes, plain } = await versionOneTransformer();
  const loaded = decodeCheckpoint(bytes, "v1.safetensors");
  assert.equal(loaded.model.shortConv, false);
  assert.equal(loaded.model.qkNorm, "none");
  assert.deepEqual(loaded.model, plain.model);
  // the stored config is what the model does: it defines exactly the file's tensors
  const model = createModel(createRefBackend(), loaded.model, 0);
  assert.deepEqual(model.parameters().map((p) => p.name).sort(), Object.keys(loaded.params).sort());
  assert.deepEqual(loaded.params, plain.params);
  assert.deepEqual(loaded.adamM, plain.adamM);
});

Deno.test("a version-1 fast-weight checkpoint loads unchanged; a version-2 Transformer keeps shortConv and qkNorm", () => {
  const fastWeight = {
    ...state(2),
    model: modelConfig({ vocabSize: 14, dModel: 8, heads: 2, qkNorm: "l2" }),
  };
  // version 1 stored no digest (and an edited file keeping one is refused)
  const { tensors, metadata: { content_digest: _, ...metadata } } = readSafetensors(
    encodeCheckpoint(fastWeight),
    "c",
  );
  const v1 = writeSafetensors(tensors, { ...metadata, format_version: "1" });
  assert.deepEqual(decodeCheckpoint(v1, "f1.safetensors"), fastWeight);
  for (
    const [shortConv, qkNorm] of [[true, "rms"], [false, "rms"], [true, "none"], [false, "none"]] as const
  ) {
    const transformer = {
      ...state(1),
      model: modelConfig({ mixer: "transformer", vocabSize: 14, dModel: 8, heads: 2, shortConv, qkNorm }),
    };
    assert.deepEqual(decodeCheckpoint(encodeCheckpoint(transformer), "t2.safetensors"), transformer);
  }
});

Deno.test("an addition task config saved before the format options loads as the old format (normalised)", () => {
  const old = { ...state(2), task: JSON.parse('{"task":"addition","maxDigits":3,"format":"msd"}') };
  const back = decodeCheckpoint(encodeCheckpoint(old), "old.safetensors");
  assert.deepEqual(back.task, additionConfig({ maxDigits: 3, format: "msd" }));
  assert.deepEqual(
    back.task.task === "addition" && [back.task.operandOrder, back.task.bos, back.task.indexHints],
    ["msd", false, 0],
  );
  // every option round-trips
  const options = additionConfig({
    maxDigits: 3,
    operandOrder: "lsd",
    bos: true,
    indexHints: 8,
    equalLength: true,
    curriculum: { startDigits: 1, fraction: 0.2 },
  });
  assert.deepEqual(decodeCheckpoint(encodeCheckpoint({ ...state(2), task: options }), "c").task, options);
  // an invalid stored config names the file and the field
  const bad = { ...state(2), task: { ...options, indexHints: 2 } };
  assert.throws(
    () => decodeCheckpoint(encodeCheckpoint(bad), "bad.safetensors"),
    /bad\.safetensors: __metadata__\.task_config: addition: indexHints must be 0 \(off\) or .*, got 2/,
  );
});
