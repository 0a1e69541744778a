import assert from "node:assert/strict";
import { decodeCheckpoint, encodeCheckpoint } from "../checkpoint/checkpoint.ts";
import { readSafetensors, writeSafetensors } from "../checkpoint/safetensors.ts";
import {
  listDir,
  tinyCheckpointBytes,
  tinyCheckpointState,
  tinyConfig,
  versionOneTransformer,
} from "./_test_checkpoints.ts";
import { convertCheckpoint } from "./convert.ts";
import { f16BitsToF32 } from "./dtype.ts";
import { CheckpointError } from "./errors.ts";
import { HF_FILES } from "./hf_export.ts";
import { inspectCheckpoint } from "./inspect.ts";
import { withTempDir } from "../testing/temp_dir.ts";

Deno.test("native -> hf -> native is bit-identical in f32 (and in f64) for every mixer family", async () => {
  await withTempDir(async (dir) => {
    const cases = [
      { mixer: "falcon2" as const, dtype: "f32" as const },
      { mixer: "falcon3a" as const, dtype: "f64" as const },
      { mixer: "mamba2" as const, dtype: "f32" as const, tieEmbeddings: false },
      { mixer: "transformer" as const, dtype: "f32" as const },
      { mixer: "gated_deltanet" as const, dtype: "f32" as const, parameterisation: "const" as const },
    ];
    for (const [i, { dtype, ...c }] of cases.entries()) {
      const original = await tinyCheckpointBytes(tinyConfig(c), { dtype });
      const native = `${dir}/${i}.safetensors`;
      await Deno.writeFile(native, original);
      const hf = await convertCheckpoint(native, `${dir}/${i}_hf`, { to: "hf" });
      assert.equal(hf.maxRelativeChange, 0);
      assert.deepEqual(hf.dtypes, [dtype]);
      const back = await convertCheckpoint(`${dir}/${i}_hf`, `${dir}/${i}_back.safetensors`, {
        to: "native",
      });
      assert.equal(back.maxRelativeChange, 0);
      const roundTrip = await Deno.readFile(`${dir}/${i}_back.safetensors`);
      assert.ok(
        roundTrip.length === original.length && roundTrip.every((b, j) => b === original[j]),
        `${c.mixer}: bytes differ`,
      );
    }
  });
});

Deno.test("hf export transposes [in, out] matrices to [out, in] and reshapes convolutions to [C, 1, 4]", async () => {
  await withTempDir(async (dir) => {
    const state = await tinyCheckpointState(tinyConfig({ mixer: "falcon1" }), { dtype: "f32" });
    await Deno.writeFile(`${dir}/n.safetensors`, encodeCheckpoint(state));
    await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/hf`, { to: "hf" });
    const { tensors } = readSafetensors(await Deno.readFile(`${dir}/hf/${HF_FILES.weights}`), "hf");
    const q = state.params["layers.1.mixer.q_proj"]; // [in, out] = [8, 8]
    const hq = tensors["model.layers.1.attn.q_proj.weight"];
    assert.deepEqual(hq.shape, [8, 8]);
    for (const [i, o] of [[0, 1], [3, 5], [7, 2]]) assert.equal(hq.data[o * 8 + i], q.data[i * 8 + o]);
    const beta = tensors["model.layers.0.attn.b_proj.weight"]; // native [D, H] = [8, 2]
    assert.deepEqual(beta.shape, [2, 8]);
    assert.equal(beta.data[1 * 8 + 3], state.params["layers.0.mixer.beta_proj"].data[3 * 2 + 1]);
    assert.deepEqual(tensors["model.layers.0.attn.k_conv1d.weight"].shape, [8, 1, 4]);
    assert.deepEqual(tensors["model.layers.0.mlp.down_proj.weight"].shape, [8, 16]);
    assert.deepEqual(tensors["model.embeddings.weight"].shape, [14, 8]);
    assert.ok(!("lm_head.weight" in tensors), "a tied head has no lm_head.weight");
    const config = JSON.parse(await Deno.readTextFile(`${dir}/hf/${HF_FILES.config}`));
    assert.equal(config.rule, "falcon1");
    assert.equal(config.hidden_size, 8);
    assert.equal(config.torch_dtype, "float32");
    assert.equal(typeof config.falcon_metadata.task_config, "string");
  });
});

Deno.test("a checkpoint with optimizer state: hf drops it, and the round trip equals --drop-optimizer", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeFile(
      `${dir}/n.safetensors`,
      await tinyCheckpointBytes(tinyConfig(), { dtype: "f32", optimizer: true }),
    );
    const hf = await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/hf`, { to: "hf" });
    assert.ok(
      hf.notes.some((n) => n.includes("optimizer state") && n.includes("dropped")),
      hf.notes.join("\n"),
    );
    await convertCheckpoint(`${dir}/hf`, `${dir}/back.safetensors`, { to: "native" });
    const kept = await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/kept.safetensors`, { to: "native" });
    assert.equal(kept.optimizerTensors, 2 * kept.tensors);
    assert.deepEqual(
      await Deno.readFile(`${dir}/kept.safetensors`),
      await Deno.readFile(`${dir}/n.safetensors`),
    );
    await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/dropped.safetensors`, {
      to: "native",
      dropOptimizer: true,
    });
    assert.deepEqual(
      await Deno.readFile(`${dir}/back.safetensors`),
      await Deno.readFile(`${dir}/dropped.safetensors`),
    );
    const loaded = decodeCheckpoint(await Deno.readFile(`${dir}/back.safetensors`), "back");
    assert.deepEqual(Object.keys(loaded.adamM), []);
    assert.equal(loaded.step, 12);
  });
});

Deno.test("--dtype f16 and bf16 round to nearest even and report the largest relative change", async () => {
  await withTempDir(async (dir) => {
    const state = await tinyCheckpointState(tinyConfig(), { dtype: "f32" });
    await Deno.writeFile(`${dir}/n.safetensors`, encodeCheckpoint(state));
    const f16 = await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/f16`, { to: "hf", dtype: "f16" });
    assert.deepEqual(f16.dtypes, ["f16"]);
    const { tensors } = readSafetensors(await Deno.readFile(`${dir}/f16/${HF_FILES.weights}`), "f16");
    const embed = tensors["model.embeddings.weight"];
    assert.equal(embed.dtype, "F16");
    let worst = 0;
    const original = state.params.embed.data;
    for (let i = 0; i < original.length; i++) {
      const back = f16BitsToF32(embed.data[i] as number);
      worst = Math.max(worst, Math.abs(back - original[i]) / Math.abs(original[i]));
    }
    assert.ok(
      worst > 0 && worst <= f16.maxRelativeChange,
      `embed worst ${worst}, reported ${f16.maxRelativeChange}`,
    );
    const bf16 = await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/bf16`, { to: "hf", dtype: "bf16" });
    assert.ok(bf16.maxRelativeChange > f16.maxRelativeChange && bf16.maxRelativeChange <= 2 ** -8);
    // hf f16 -> native widens exactly to f32, with a note
    const back = await convertCheckpoint(`${dir}/f16`, `${dir}/back.safetensors`, { to: "native" });
    assert.deepEqual(back.dtypes, ["f32"]);
    assert.equal(back.maxRelativeChange, 0);
    assert.ok(back.notes.some((n) => n.includes("widened")));
  });
});

Deno.test("--to native with --dtype f16 is refused before anything is written", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeFile(`${dir}/n.safetensors`, await tinyCheckpointBytes());
    await assert.rejects(
      () => convertCheckpoint(`${dir}/n.safetensors`, `${dir}/o.safetensors`, { to: "native", dtype: "f16" }),
      (e: Error) =>
        e instanceof CheckpointError && /--dtype f16: native checkpoints hold F32 or F64/.test(e.message),
    );
    assert.deepEqual(await listDir(dir), ["n.safetensors"]);
  });
});

Deno.test("a version-0 native file (no format_version) is upgraded on load with a note per version", async () => {
  await withTempDir(async (dir) => {
    const current = await tinyCheckpointBytes(tinyConfig(), { dtype: "f32" });
    const { tensors, metadata } = readSafetensors(current, "v2");
    // version 0 had no content digest either
    const { format_version: _, content_digest: _digest, ...v0meta } = metadata;
    await Deno.writeFile(`${dir}/v0.safetensors`, writeSafetensors(tensors, v0meta));
    const report = await inspectCheckpoint(`${dir}/v0.safetensors`);
    assert.equal(report.version, 0);
    assert.ok(
      report.notes.some((n) => n.includes("version 0") && n.includes("version 1")),
      report.notes.join(),
    );
    const converted = await convertCheckpoint(`${dir}/v0.safetensors`, `${dir}/v2.safetensors`, {
      to: "native",
    });
    // 0 -> 1 -> 2; a falcon1 config is the same in every version
    assert.deepEqual(converted.notes, [
      "upgraded native format version 0 (no format_version key) to version 1",
      "upgraded native format version 1 to version 2",
    ]);
    assert.deepEqual(await Deno.readFile(`${dir}/v2.safetensors`), current);
  });
});

Deno.test("a version-1 Transformer converts to the version-2 file of the plain model it ran, native and hf", async () => {
  await withTempDir(async (dir) => {
    const { bytes, plain } = await versionOneTransformer();
    await Deno.writeFile(`${dir}/v1.safetensors`, bytes);
    const report = await inspectCheckpoint(`${dir}/v1.safetensors`);
    assert.equal(report.version, 1);
    assert.ok(
      report.notes.some((n) => /Transformer.*shortConv false, qkNorm "none"/.test(n)),
      report.notes.join(),
    );
    await convertCheckpoint(`${dir}/v1.safetensors`, `${dir}/v2.safetensors`, { to: "native" });
    assert.deepEqual(await Deno.readFile(`${dir}/v2.safetensors`), encodeCheckpoint(plain));
    await convertCheckpoint(`${dir}/v1.safetensors`, `${dir}/hf`, { to: "hf" });
    const config = JSON.parse(await Deno.readTextFile(`${dir}/hf/${HF_FILES.config}`));
    assert.deepEqual([config.falcon_format_version, config.use_short_conv, config.qk_norm], [
      2,
      false,
      "none",
    ]);
  });
});

Deno.test("a version-1 hf Transformer export loads plain; a version-2 one with use_short_conv needs its conv tensors", async () => {
  await withTempDir(async (dir) => {
    const plain = await tinyCheckpointState(
      tinyConfig({ mixer: "transformer", shortConv: false, qkNorm: "none" }),
      {
        dtype: "f32",
      },
    );
    await Deno.writeFile(`${dir}/n.safetensors`, encodeCheckpoint(plain));
    await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/hf`, { to: "hf" });
    const path = `${dir}/hf/${HF_FILES.config}`;
    const config = JSON.parse(await Deno.readTextFile(path));
    // what a version-1 export of that model said: the defaults, which version 1 ignored
    const asWritten = { ...config, falcon_format_version: 1, use_short_conv: true, qk_norm: "rms" };
    await Deno.writeTextFile(path, JSON.stringify(asWritten));
    const report = await inspectCheckpoint(`${dir}/hf`);
    assert.equal(report.version, 1);
    assert.ok(
      report.notes.some((n) => n.includes("version 1") && n.includes("Transformer")),
      report.notes.join(),
    );
    await convertCheckpoint(`${dir}/hf`, `${dir}/back.safetensors`, { to: "native" });
    assert.deepEqual(await Deno.readFile(`${dir}/back.safetensors`), encodeCheckpoint(plain));
    await Deno.writeTextFile(path, JSON.stringify({ ...asWritten, falcon_format_version: 2 }));
    await assert.rejects(
      () => convertCheckpoint(`${dir}/hf`, `${dir}/o.safetensors`, { to: "native" }),
      (e: Error) => e instanceof CheckpointError && e.message.includes("model.layers.0.attn.q_conv1d.weight"),
    );
  });
});

Deno.test("a native file from a newer falcon or with a non-integer version is refused, naming the field", async () => {
  await withTempDir(async (dir) => {
    const { tensors, metadata } = readSafetensors(await tinyCheckpointBytes(), "x");
    for (
      const [version, pattern] of [["3", /format_version 3 is newer/], [
        "1.5",
        /format_version "1.5" is not an integer/,
      ]]
    ) {
      await Deno.writeFile(
        `${dir}/v.safetensors`,
        writeSafetensors(tensors, { ...metadata, format_version: version as string }),
      );
      await assert.rejects(() => inspectCheckpoint(`${dir}/v.safetensors`), pattern as RegExp);
    }
  });
});

Deno.test("an hf export whose config.json no longer matches its tensors is refused, listing the names", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeFile(`${dir}/n.safetensors`, await tinyCheckpointBytes(tinyConfig({ mixer: "falcon1" })));
    await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/hf`, { to: "hf" });
    const path = `${dir}/hf/${HF_FILES.config}`;
    const config = JSON.parse(await Deno.readTextFile(path));
    await Deno.writeTextFile(path, JSON.stringify({ ...config, use_output_gate: false, rule: "linear" }));
    await assert.rejects(
      () => convertCheckpoint(`${dir}/hf`, `${dir}/o.safetensors`, { to: "native" }),
      (e: Error) =>
        e instanceof CheckpointError && e.message.includes(`${dir}/hf/model.safetensors`) &&
        e.message.includes("model.layers.0.attn.g_proj.weight") &&
        e.message.includes("model.layers.0.attn.l_proj.bias"),
    );
    await Deno.writeTextFile(path, JSON.stringify({ ...config, norm_eps: 1e-5 }));
    await assert.rejects(
      () => convertCheckpoint(`${dir}/hf`, `${dir}/o.safetensors`, { to: "native" }),
      /field norm_eps/,
    );
    await Deno.writeTextFile(path, JSON.stringify({ ...config, num_heads: 3 }));
    await assert.rejects(
      () => convertCheckpoint(`${dir}/hf`, `${dir}/o.safetensors`, { to: "native" }),
      /num_heads|heads/,
    );
    assert.deepEqual(await listDir(dir), ["hf", "n.safetensors"]);
  });
});

Deno.test("the converted native checkpoint loads with the checkpoint reader and keeps every config", async () => {
  await withTempDir(async (dir) => {
    const state = await tinyCheckpointState(tinyConfig({ mixer: "retnet" }), {
      dtype: "f64",
      optimizer: true,
    });
    await Deno.writeFile(`${dir}/n.safetensors`, encodeCheckpoint(state));
    await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/o.safetensors`, { to: "native", dtype: "f32" });
    const loaded = decodeCheckpoint(await Deno.readFile(`${dir}/o.safetensors`), "o");
    assert.deepEqual(loaded.model, state.model);
    assert.deepEqual(loaded.task, state.task);
    assert.deepEqual(loaded.train, state.train);
    assert.ok(loaded.params.embed.data instanceof Float32Array);
    assert.ok(
      loaded.adamM.embed.data instanceof Float32Array,
      "optimizer moments follow their parameter's dtype",
    );
    assert.deepEqual(loaded.params.embed.data, Float32Array.from(state.params.embed.data));
  });
});

Deno.test("a hostile config.json is refused naming config.json and the field", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeFile(`${dir}/n.safetensors`, await tinyCheckpointBytes());
    await convertCheckpoint(`${dir}/n.safetensors`, `${dir}/hf`, { to: "hf" });
    const path = `${dir}/hf/${HF_FILES.config}`;
    const config = JSON.parse(await Deno.readTextFile(path));
    const cases: [string, RegExp][] = [
      ["{ rule: falcon1 ", /config\.json: not JSON/],
      ["[1, 2]", /config\.json: not a JSON object/],
      [JSON.stringify({ ...config, model_type: "llama" }), /config\.json: model_type is "llama"/],
      [
        JSON.stringify({ ...config, falcon_format_version: 7 }),
        /falcon_format_version 7 is not supported \(expected 1 to 2\)/,
      ],
      [JSON.stringify({ ...config, vocab_size: undefined }), /config\.json: missing field vocab_size/],
      [JSON.stringify({ ...config, rule: "falcon9" }), /config\.json: .*mixer "falcon9"/],
      [
        JSON.stringify({ ...config, window: 0 }),
        /config\.json: field window: window must be an integer >= 1/,
      ],
      [JSON.stringify({ ...config, torch_dtype: "int8" }), /field torch_dtype "int8"/],
      [JSON.stringify({ ...config, falcon_metadata: { step: 3 } }), /falcon_metadata\.step must be a string/],
    ];
    for (const [text, pattern] of cases) {
      await Deno.writeTextFile(path, text);
      await assert.rejects(() => inspectCheckpoint(`${dir}/hf`), pattern, text);
      await assert.rejects(
        () => convertCheckpoint(`${dir}/hf`, `${dir}/o.safetensors`, { to: "native" }),
        pattern,
      );
    }
    assert.deepEqual(await listDir(dir), ["hf", "n.safetensors"]);
  });
});
