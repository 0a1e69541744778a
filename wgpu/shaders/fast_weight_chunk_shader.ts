/**
 * The dispatcher of the WebGPU chunk kernels: the WGSL of any chunk pass, from the family file that
 * holds it (`src/rules/catalog.ts` names the families): `fast_weight_chunk_delta.ts` (the delta
 * family's own passes), `fast_weight_chunk_per_column.ts` (per-column), `fast_weight_chunk_window_delta.ts`
 * (falcon3's window passes), and `fast_weight_chunk_additive.ts` for the additive family and the
 * passes every family shares. Pass lists, bindings, keys and workgroup counts are in `chunk_wgsl.ts`.
 *
 * @module
 */

import type { RuleConfig } from "../../src/rules/config.ts";
import type { ChunkPass, ChunkShape } from "./chunk_wgsl.ts";
import type { HeadConstants } from "./fast_weight_coef.ts";
import { additiveShader } from "./fast_weight_chunk_additive.ts";
import { deltaShader, isDeltaPass } from "./fast_weight_chunk_delta.ts";
import { isPerColumnPass, perColumnShader } from "./fast_weight_chunk_per_column.ts";
import { isWindowDeltaPass, windowDeltaShader } from "./fast_weight_chunk_window_delta.ts";

/** WGSL of the chunk kernel `pass` (entry point `main`; bindings of `chunkBindings`, then the uniform). */
export function chunkShader(
  pass: ChunkPass,
  config: RuleConfig,
  s: ChunkShape,
  heads: HeadConstants,
): string {
  if (isDeltaPass(pass)) return deltaShader(pass, config, s, heads);
  if (isPerColumnPass(pass)) return perColumnShader(pass, config, s, heads);
  if (isWindowDeltaPass(pass)) return windowDeltaShader(pass, config, s, heads);
  return additiveShader(pass, config, s, heads);
}
