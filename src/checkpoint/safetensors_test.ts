import assert from "node:assert/strict";
import {
  MAX_HEADER_BYTES,
  readSafetensors,
  type SafeTensor,
  toFloat32,
  writeSafetensors,
} from "./safetensors.ts";

/** A file from a raw header object (or string) and a data buffer, as a hostile writer would make it. */
function craft(header: unknown, data: Uint8Array, headerLength?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === "string" ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, headerLength ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function rejects(bytes: Uint8Array, pattern: RegExp): void {
  assert.throws(() => readSafetensors(bytes, "bad.safetensors"), (e: Error) => {
    assert.match(e.message, /^bad\.safetensors: /);
    assert.match(e.message, pattern);
    return true;
  });
}

Deno.test("safetensors round trip keeps every dtype, shape, value and the metadata", () => {
  const tensors: Record<string, SafeTensor> = {
    f64: { dtype: "F64", shape: [2, 3], data: Float64Array.from([1.5, -2, Math.PI, 1e-300, -0, 7]) },
    f32: { dtype: "F32", shape: [3], data: Float32Array.from([0.1, 2, -3]) },
    i64: { dtype: "I64", shape: [2], data: BigInt64Array.from([-(2n ** 60n), 5n]) },
    i32: { dtype: "I32", shape: [1, 2], data: Int32Array.from([-7, 2 ** 31 - 1]) },
    u8: { dtype: "U8", shape: [3], data: Uint8Array.from([0, 128, 255]) },
    bf16: { dtype: "BF16", shape: [1], data: Uint16Array.from([0x3fc0]) }, // 1.5
    f16: { dtype: "F16", shape: [2], data: Uint16Array.from([0x3e00, 0xc000]) }, // 1.5, -2
    empty: { dtype: "F32", shape: [0, 4], data: new Float32Array(0) },
  };
  const bytes = writeSafetensors(tensors, { a: "1", b: '{"x":2}' });
  const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal((8 + headerLength) % 8, 0, "data buffer must start 8-byte aligned");
  const back = readSafetensors(bytes, "rt.safetensors");
  assert.deepEqual(back.metadata, { a: "1", b: '{"x":2}' });
  assert.deepEqual(Object.keys(back.tensors).sort(), Object.keys(tensors).sort());
  for (const [name, t] of Object.entries(tensors)) {
    assert.equal(back.tensors[name].dtype, t.dtype, name);
    assert.deepEqual(back.tensors[name].shape, t.shape, name);
    assert.deepEqual(
      Array.from(back.tensors[name].data as ArrayLike<unknown>),
      Array.from(t.data as ArrayLike<unknown>),
      name,
    );
  }
  assert.ok(Object.is(back.tensors.f64.data[4], -0));
  assert.deepEqual(Array.from(toFloat32(back.tensors.bf16)), [1.5]);
  assert.deepEqual(Array.from(toFloat32(back.tensors.f16)), [1.5, -2]);
  assert.throws(() => toFloat32(back.tensors.i32), /dtype I32 is not a floating-point type/);
});

Deno.test("writeSafetensors rejects data that does not match the shape", () => {
  assert.throws(
    () => writeSafetensors({ w: { dtype: "F32", shape: [2, 2], data: new Float32Array(3) } }),
    /tensor "w": data has 3 elements, shape \[2,2\] needs 4/,
  );
});

const good = { w: { dtype: "F32", shape: [2], data_offsets: [0, 8] } };
const eight = new Uint8Array(8);

Deno.test("readSafetensors accepts a hand-made valid file (control for the hostile cases)", () => {
  assert.deepEqual(Array.from(readSafetensors(craft(good, eight), "ok").tensors.w.data as Float32Array), [
    0,
    0,
  ]);
});

Deno.test("readSafetensors rejects a file shorter than the length prefix", () => {
  rejects(new Uint8Array(5), /file is 5 bytes, shorter than the 8-byte header length/);
});

Deno.test("readSafetensors rejects a header length beyond the file", () => {
  rejects(craft(good, eight, 10_000n), /header length 10000 runs past the end of the file/);
});

Deno.test("readSafetensors rejects a header length above 100 MB without allocating it", () => {
  rejects(
    craft(good, eight, BigInt(MAX_HEADER_BYTES) + 1n),
    /header length 100000001 exceeds the 100000000-byte limit/,
  );
  rejects(craft(good, eight, 2n ** 64n - 1n), /exceeds the 100000000-byte limit/);
});

Deno.test("readSafetensors rejects a header that is not JSON or not an object", () => {
  rejects(craft("{not json", eight), /header is not valid UTF-8 JSON/);
  rejects(craft("[1,2]", eight), /header is not a JSON object/);
  rejects(
    craft(new Uint8Array([0xff, 0xfe]).reduce((s, b) => s + String.fromCharCode(b), ""), eight),
    /not valid UTF-8 JSON|not a JSON object/,
  );
});

Deno.test("readSafetensors rejects offsets out of range", () => {
  rejects(
    craft({ w: { dtype: "F32", shape: [4], data_offsets: [0, 16] } }, eight),
    /tensor "w": data_offsets \[0, 16\] out of range of the 8-byte data buffer/,
  );
  rejects(
    craft({ w: { dtype: "F32", shape: [0], data_offsets: [8, 4] } }, eight),
    /tensor "w": data_offsets \[8, 4\] out of range/,
  );
  rejects(
    craft({ w: { dtype: "F32", shape: [2], data_offsets: [-8, 0] } }, eight),
    /tensor "w": data_offsets \[-8,0\] is not a pair of non-negative integers/,
  );
});

Deno.test("readSafetensors rejects overlapping tensors", () => {
  const header = {
    a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
    b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
  };
  rejects(craft(header, new Uint8Array(12)), /tensor "b": data_offsets \[4, 12\] overlap another tensor/);
});

Deno.test("readSafetensors rejects misaligned offsets", () => {
  const header = {
    a: { dtype: "U8", shape: [2], data_offsets: [0, 2] },
    b: { dtype: "F32", shape: [1], data_offsets: [2, 6] },
  };
  rejects(
    craft(header, new Uint8Array(6)),
    /tensor "b": data_offsets begin 2 is not a multiple of the F32 size 4/,
  );
});

Deno.test("readSafetensors rejects gaps and trailing bytes in the data buffer", () => {
  rejects(
    craft({ w: { dtype: "F32", shape: [1], data_offsets: [4, 8] } }, eight),
    /gap in the data buffer before offset 4/,
  );
  rejects(
    craft({ w: { dtype: "F32", shape: [1], data_offsets: [0, 4] } }, eight),
    /4 bytes after the last tensor/,
  );
});

Deno.test("readSafetensors rejects dtype or shape not matching the byte length", () => {
  rejects(
    craft({ w: { dtype: "F32", shape: [3], data_offsets: [0, 8] } }, eight),
    /tensor "w": data_offsets span 8 bytes, dtype F32 and shape \[3\] need 12/,
  );
  rejects(
    craft({ w: { dtype: "F64", shape: [2], data_offsets: [0, 8] } }, eight),
    /dtype F64 and shape \[2\] need 16/,
  );
  rejects(
    craft({ w: { dtype: "F32", shape: [2.5], data_offsets: [0, 8] } }, eight),
    /tensor "w": shape \[2.5\] is not a list of non-negative integers/,
  );
  rejects(craft({ w: { dtype: "F32", shape: "2", data_offsets: [0, 8] } }, eight), /shape "2" is not a list/);
});

Deno.test("readSafetensors rejects unknown dtypes and unknown fields", () => {
  rejects(
    craft({ w: { dtype: "F128", shape: [1], data_offsets: [0, 8] } }, eight),
    /tensor "w": dtype "F128" is not one of F64, F32/,
  );
  rejects(craft({ w: { ...good.w, extra: 1 } }, eight), /tensor "w": unknown field "extra"/);
  rejects(craft({ w: 3 }, eight), /tensor "w" is not an object/);
});

Deno.test("readSafetensors rejects non-string metadata", () => {
  rejects(
    craft({ __metadata__: { step: 3 }, ...good }, eight),
    /__metadata__.step is not a string \(got 3\)/,
  );
  rejects(craft({ __metadata__: [1], ...good }, eight), /__metadata__ is not an object/);
});

Deno.test("readSafetensors keeps a tensor named __proto__ as an ordinary entry", () => {
  const file = readSafetensors(craft(JSON.parse(`{"__proto__": ${JSON.stringify(good.w)}}`), eight), "p");
  assert.deepEqual(Object.keys(file.tensors), ["__proto__"]);
  assert.equal(Object.getPrototypeOf(file.tensors), Object.prototype);
  assert.equal(Object.getOwnPropertyDescriptor(file.tensors, "__proto__")?.value.dtype, "F32");
});
