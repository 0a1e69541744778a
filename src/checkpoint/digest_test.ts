import assert from "node:assert/strict";
import { tinyCheckpointState, tinyConfig } from "../convert/_test_checkpoints.ts";
import { decodeCheckpoint, encodeCheckpoint } from "./checkpoint.ts";
import { contentDigest, DIGEST_KEY, verifyContentDigest, withContentDigest } from "./digest.ts";
import { readSafetensors, writeSafetensors } from "./safetensors.ts";

const encoder = new TextEncoder();

/** Replace the first occurrence of `from` by `to` (same length) in `bytes`. */
function replaceAscii(bytes: Uint8Array, from: string, to: string): Uint8Array {
  assert.equal(from.length, to.length);
  const needle = encoder.encode(from);
  outer: for (let i = 0; i + needle.length <= bytes.length; i++) {
    for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
    const out = bytes.slice();
    out.set(encoder.encode(to), i);
    return out;
  }
  throw new Error(`"${from}" not found`);
}

Deno.test("encodeCheckpoint stores a sha256 content digest that decodeCheckpoint verifies", async () => {
  const state = await tinyCheckpointState(tinyConfig({ mixer: "falcon3a" }), { optimizer: true });
  const bytes = encodeCheckpoint(state);
  const { metadata } = readSafetensors(bytes, "c");
  assert.match(metadata[DIGEST_KEY], /^sha256:[0-9a-f]{64}$/);
  assert.equal(metadata[DIGEST_KEY], contentDigest(bytes));
  assert.deepEqual(verifyContentDigest(bytes, "c"), { state: "verified", digest: metadata[DIGEST_KEY] });
  assert.deepEqual(decodeCheckpoint(bytes, "c").model, state.model);
});

Deno.test("a JSON-valid edit of the metadata (falcon3a -> falcon1a) is refused, naming the file", async () => {
  const bytes = encodeCheckpoint(await tinyCheckpointState(tinyConfig({ mixer: "falcon3a" })));
  const edited = replaceAscii(bytes, "falcon3a", "falcon1a");
  // still a well-formed container whose config parses: only the digest tells
  assert.equal(JSON.parse(readSafetensors(edited, "e").metadata.model_config).mixer, "falcon1a");
  assert.throws(() => decodeCheckpoint(edited, "runs/x/checkpoint.safetensors"), {
    name: "SafetensorsError",
    message: /^runs\/x\/checkpoint\.safetensors: content digest mismatch: .*content_digest is "sha256:/,
  });
});

Deno.test("a flipped weight byte is refused", async () => {
  const bytes = encodeCheckpoint(await tinyCheckpointState(tinyConfig()));
  const flipped = bytes.slice();
  flipped[flipped.length - 3] ^= 0x10;
  assert.throws(() => decodeCheckpoint(flipped, "w.safetensors"), /w\.safetensors: content digest mismatch/);
});

Deno.test("a checkpoint without a digest (written before digests) still loads; its status is absent", async () => {
  const state = await tinyCheckpointState(tinyConfig());
  const { tensors, metadata: { [DIGEST_KEY]: _, ...metadata } } = readSafetensors(
    encodeCheckpoint(state),
    "c",
  );
  const old = writeSafetensors(tensors, metadata);
  assert.deepEqual(verifyContentDigest(old, "old"), { state: "absent" });
  assert.deepEqual(decodeCheckpoint(old, "old").params, state.params);
  // and adding the digest to it gives exactly what the writer writes now
  assert.deepEqual(withContentDigest(old), encodeCheckpoint(state));
});

Deno.test("the digest does not depend on how the header JSON is spaced", async () => {
  const bytes = encodeCheckpoint(await tinyCheckpointState(tinyConfig()));
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  let text = JSON.stringify(header, null, 2);
  while ((8 + text.length) % 8 !== 0) text += " ";
  const h = encoder.encode(text);
  const spaced = new Uint8Array(8 + h.length + bytes.length - 8 - n);
  new DataView(spaced.buffer).setBigUint64(0, BigInt(h.length), true);
  spaced.set(h, 8);
  spaced.set(bytes.subarray(8 + n), 8 + h.length);
  assert.equal(verifyContentDigest(spaced, "spaced").state, "verified");
});
