import assert from "node:assert/strict";
import { runCli } from "../_run_in_process.ts";

const run = runCli;

Deno.test("falcon predict prints the greedy answer, its verdict, and JSON logits of the prompt", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const trained = await run(["train", "--rule", "transformer", "--steps", "2", "--out", dir]);
    assert.equal(trained.code, 0, trained.err);
    const ckpt = `${dir}/checkpoint.safetensors`;
    const r = await run(["predict", ckpt, "--prompt", "12+345="]);
    assert.equal(r.code, 0, r.err);
    const [line, verdict] = r.out.split("\n");
    assert.ok(line.startsWith("12+345="), line);
    assert.match(
      verdict,
      /^answer \S+: (right|wrong \(expected 357\))$|^answer \(none\): wrong \(expected 357\)$/,
    );
    const j = await run(["predict", ckpt, "--prompt", "12+345=", "--json"]);
    assert.equal(j.code, 0, j.err);
    const parsed = JSON.parse(j.out);
    assert.equal(parsed.task, "addition");
    assert.equal(parsed.promptLogits.length, 7);
    for (const row of parsed.promptLogits) assert.equal(row.length, 14);
    assert.equal(parsed.addition.expected, "357");
    assert.ok(parsed.tokens.length >= 1 && parsed.tokens.length <= 5);

    const bad: [string[], RegExp][] = [
      [[ckpt, "--prompt", "12-3="], /not an addition prompt/],
      [[ckpt, "--prompt", "12+3=", "--task", "mqar"], /is a checkpoint of task addition, not mqar/],
      [[`${dir}/missing.safetensors`, "--prompt", "1+2="], /checkpoint .*missing.safetensors does not exist/],
      [[`${dir}/metrics.jsonl`, "--prompt", "1+2="], /metrics.jsonl/],
      [[ckpt, "--prompt", "1+2=", "--max-tokens", "0"], /--max-tokens must be an integer >= 1/],
    ];
    for (const [args, pattern] of bad) {
      const b = await run(["predict", ...args]);
      assert.equal(b.code, 2, `${args.join(" ")}: exit ${b.code}\n${b.err}`);
      assert.match(b.err, pattern);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("falcon predict writes the prompt in the checkpoint's format (lsd operands, BOS, hints)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const trained = await run([
      "train",
      "--rule",
      "transformer",
      "--steps",
      "2",
      "--out",
      dir,
      "--operand-order",
      "lsd",
      "--bos",
      "--index-hints",
      "4",
    ]);
    assert.equal(trained.code, 0, trained.err);
    const ckpt = `${dir}/checkpoint.safetensors`;
    const r = await run(["predict", ckpt, "--prompt", "12+34="]);
    assert.equal(r.code, 0, r.err);
    const [line, verdict] = r.out.split("\n");
    // the generator writes h_0 before the first answer digit and h_1 before the second
    assert.match(line, /^\^\[0\]2\[1\]1\+\[0\]4\[1\]3=\[0\]\S\[1\]\S/);
    assert.match(verdict, /^answer \S+: (right|wrong \(expected 46\))$/);
    const j = JSON.parse((await run(["predict", ckpt, "--prompt", "12+34=", "--json"])).out);
    assert.equal(j.promptText, "^[0]2[1]1+[0]4[1]3=");
    assert.equal(j.promptLogits.length, 11);
    for (const row of j.promptLogits) assert.equal(row.length, 14 + 1 + 4);
    const long = await run(["predict", ckpt, "--prompt", "1234+1="]);
    assert.equal(long.code, 2);
    assert.match(long.err, /--prompt: addition: operands of 4 digits need 5 hint ids .* indexHints = 4/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("predict and eval say when --gpu-matmul f16 is not applied under --backend auto", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const trained = await run(["train", "--steps", "1", "--layers", "1", "--backend", "wasm", "--out", dir]);
    assert.equal(trained.code, 0, trained.err);
    const ckpt = `${dir}/checkpoint.safetensors`;
    for (
      const args of [
        ["predict", ckpt, "--prompt", "1+2="],
        ["eval", ckpt, "--lengths", "1", "--samples", "2"],
      ]
    ) {
      const r = await run([...args, "--backend", "auto", "--gpu-matmul", "f16"]);
      assert.equal(r.code, 0, r.err);
      // without a hardware adapter auto does not choose webgpu, and says f16 is not applied
      const chose = /backend auto: webgpu on /.test(r.err);
      assert.match(
        r.err,
        chose ? /backend auto: webgpu on / : /--gpu-matmul f16 ignored: backend auto did not choose webgpu/,
        args[0],
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
