/**
 * `falcon info`: runtime, WebAssembly and WebGPU capabilities.
 *
 * @module
 */

import { Command } from "@commander-js/extra-typings";
import { systemInfo } from "../../src/info/system_info.ts";
import { VERSION } from "../version.ts";

/** Build the `info` subcommand. */
export function infoCommand() {
  return new Command("info")
    .description("show Deno/V8 versions, WASM SIMD/threads support, worker count and the WebGPU adapter")
    .option("--json", "print JSON")
    .action(async (options) => {
      const info = await systemInfo(VERSION);
      if (options.json) {
        console.log(JSON.stringify(info, null, 2));
        return;
      }
      const yes = (b: boolean) => (b ? "yes" : "no");
      console.log(`falcon ${info.falcon}`);
      console.log(`deno ${info.deno}, v8 ${info.v8}, ${info.platform}`);
      console.log(
        `wasm: simd ${yes(info.wasm.simd)}, relaxed-simd ${yes(info.wasm.relaxedSimd)}, threads ${
          yes(info.wasm.threads)
        }; workers ${info.workers}`,
      );
      if (info.gpu.ok) {
        const a = info.gpu.adapter;
        console.log(
          `webgpu: ${a.description} (vendor ${a.vendor}${a.isFallbackAdapter ? ", fallback adapter" : ""})`,
        );
        console.log(`  features: ${a.features.join(", ") || "(none)"}`);
        console.log(
          `  f16 matmul (--gpu-matmul f16): ${
            a.features.includes("shader-f16") ? "available" : "unavailable (no shader-f16)"
          }; subgroups: ${a.features.includes("subgroups") ? "exposed, unused" : "not exposed"}`,
        );
        for (const [k, v] of Object.entries(a.limits)) console.log(`  ${k}: ${v}`);
      } else {
        console.log(`webgpu: unavailable (${info.gpu.reason})`);
      }
    });
}
