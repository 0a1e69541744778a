/**
 * The content digest of a native checkpoint: a SHA-256 over its header (every tensor's name,
 * dtype, shape and offsets, and every metadata string) and its data buffer, stored in the
 * metadata under {@linkcode DIGEST_KEY} as `sha256:<hex>` when the file is written and checked
 * when it is read. A change anywhere (a flipped weight byte, `falcon3a` edited to `falcon1a` in
 * the JSON of `model_config`) no longer loads as a different, silently wrong model: the reader
 * refuses the file, naming it.
 *
 * What is hashed does not depend on how the header JSON is spelled (spaces, key order, padding):
 * `sha256("falcon-content-digest-v1\n" + canonical header JSON + "\n" + data buffer)`, where the
 * canonical header lists the tensors sorted by name as `[name, dtype, shape, data_offsets]` and
 * the metadata, without the digest itself, sorted by key as `[key, value]`.
 *
 * A file without the key (written before digests existed, or by another tool) still loads; it is
 * reported as having no digest.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { SafetensorsError } from "./safetensors.ts";

/** The metadata key of the digest. */
export const DIGEST_KEY = "content_digest";

/** What {@linkcode verifyContentDigest} found. */
export type DigestStatus =
  | { readonly state: "verified"; readonly digest: string }
  | { readonly state: "absent" };

interface Container {
  readonly header: Record<string, unknown>;
  readonly data: Uint8Array;
}

/** Split safetensors bytes into the parsed header and the data buffer (the reader has validated them). */
function container(bytes: Uint8Array, fileName: string): Container {
  if (bytes.length < 8) throw new SafetensorsError(`${fileName}: file is shorter than the header length`);
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (8 + n > bytes.length) throw new SafetensorsError(`${fileName}: header runs past the end of the file`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch {
    throw new SafetensorsError(`${fileName}: header is not valid UTF-8 JSON`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new SafetensorsError(`${fileName}: header is not a JSON object`);
  }
  return { header: header as Record<string, unknown>, data: bytes.subarray(8 + n) };
}

function metadataOf(header: Record<string, unknown>): Record<string, string> {
  const m = header.__metadata__;
  return m && typeof m === "object" && !Array.isArray(m) ? m as Record<string, string> : {};
}

function digestOf({ header, data }: Container): string {
  const tensors = Object.entries(header)
    .filter(([name]) => name !== "__metadata__")
    .map(([name, t]) => {
      const e = t as Record<string, unknown>;
      return [name, e.dtype, e.shape, e.data_offsets];
    })
    .sort((a, b) => (a[0] as string) < (b[0] as string) ? -1 : (a[0] as string) > (b[0] as string) ? 1 : 0);
  const metadata = Object.entries(metadataOf(header))
    .filter(([k]) => k !== DIGEST_KEY)
    .sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
  const hash = createHash("sha256");
  hash.update("falcon-content-digest-v1\n");
  hash.update(JSON.stringify({ tensors, metadata }));
  hash.update("\n");
  hash.update(data);
  return `sha256:${hash.digest("hex")}`;
}

/** The digest the content of safetensors `bytes` has (whatever digest they store). */
export function contentDigest(bytes: Uint8Array, fileName = "checkpoint"): string {
  return digestOf(container(bytes, fileName));
}

/**
 * The same file with its digest stored in the metadata (replacing any there): the header is
 * re-encoded, padded to 8 bytes as the writer pads it, and the data buffer copied unchanged.
 */
export function withContentDigest(bytes: Uint8Array): Uint8Array {
  const c = container(bytes, "checkpoint");
  const digest = digestOf(c);
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(metadataOf(c.header))) if (k !== DIGEST_KEY) metadata[k] = v;
  metadata[DIGEST_KEY] = digest;
  const header: Record<string, unknown> = { __metadata__: metadata };
  for (const [k, v] of Object.entries(c.header)) if (k !== "__metadata__") header[k] = v;
  const encoder = new TextEncoder();
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (encoder.encode(json).length % 8)) % 8);
  const headerBytes = encoder.encode(json);
  const out = new Uint8Array(8 + headerBytes.length + c.data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  out.set(c.data, 8 + headerBytes.length);
  return out;
}

/**
 * Check the digest stored in `bytes` (a file the safetensors reader accepted): `verified` when it
 * matches, `absent` when the file has none; a mismatch throws a {@linkcode SafetensorsError}
 * naming `fileName`, the stored and the computed digest.
 */
export function verifyContentDigest(bytes: Uint8Array, fileName: string): DigestStatus {
  const c = container(bytes, fileName);
  const stored = metadataOf(c.header)[DIGEST_KEY];
  if (stored === undefined) return { state: "absent" };
  const actual = digestOf(c);
  if (stored !== actual) {
    throw new SafetensorsError(
      `${fileName}: content digest mismatch: the file changed after it was written (a weight or the ` +
        `metadata was edited or corrupted); __metadata__.${DIGEST_KEY} is ${JSON.stringify(stored)}, ` +
        `the content hashes to ${actual}`,
    );
  }
  return { state: "verified", digest: stored };
}
