/**
 * Checkpoints: the safetensors reader/writer, atomic file writes and the native checkpoint layout.
 *
 * @module
 */

export * from "./safetensors.ts";
export * from "./atomic_write.ts";
export * from "./checkpoint.ts";
export * from "./digest.ts";
export * from "./format_upgrade.ts";
