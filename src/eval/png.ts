/**
 * SVG to PNG with resvg compiled to WebAssembly (`@resvg/resvg-wasm` 2).
 *
 * Both binary assets come from npm packages through bytes imports (`with { type: "bytes" }`, enabled
 * by `"unstable": ["raw-imports"]` in deno.json), so they are part of the module graph: nothing is read
 * from the project's files at run time and `deno compile` embeds them. The font is Inter Regular
 * (SIL Open Font License 1.1) from `@expo-google-fonts/inter`, the one TTF resvg gets (it loads no
 * system fonts), used for every generic family. This module is imported lazily by the CLI, only when
 * a `.png` is asked for.
 *
 * @module
 */

import resvgWasm from "@resvg/resvg-wasm/index_bg.wasm" with { type: "bytes" };
import interTtf from "@expo-google-fonts/inter/400Regular/Inter_400Regular.ttf" with { type: "bytes" };
import { initWasm, Resvg } from "@resvg/resvg-wasm";

let ready: Promise<void> | null = null;

/** Instantiate the resvg module once per process. */
function init(): Promise<void> {
  ready ??= initWasm(resvgWasm);
  return ready;
}

/** Render an SVG document to PNG bytes at `scale` times its size (default 2, for sharp text). */
export async function svgToPng(svg: string, scale = 2): Promise<Uint8Array> {
  if (!(scale > 0 && Number.isFinite(scale))) {
    throw new RangeError(`scale must be a finite number > 0, got ${scale}`);
  }
  await init();
  const resvg = new Resvg(svg, {
    fitTo: { mode: "zoom", value: scale },
    font: {
      fontBuffers: [interTtf],
      loadSystemFonts: false,
      defaultFontFamily: "Inter",
      sansSerifFamily: "Inter",
      serifFamily: "Inter",
      monospaceFamily: "Inter",
    },
  });
  try {
    const image = resvg.render();
    try {
      return image.asPng();
    } finally {
      image.free();
    }
  } finally {
    resvg.free();
  }
}
