/**
 * Tensor names and layouts of the `hf` export (the PyTorch layout flash-linear-attention uses) and
 * their native counterparts (`src/model/params.ts`). Table-driven: one row per native parameter
 * pattern, giving the hf name and how the layout changes.
 *
 * | native (`[in, out]` matrices) | hf (`[out, in]` matrices) | layout |
 * |---|---|---|
 * | `embed` `[V, D]` | `model.embeddings.weight` `[V, D]` | same |
 * | `layers.{i}.attn_norm` `[D]` | `model.layers.{i}.attn_norm.weight` | same |
 * | `layers.{i}.mixer.{q,k,v}_proj` `[D, D]` | `model.layers.{i}.attn.{q,k,v}_proj.weight` | transpose |
 * | `layers.{i}.mixer.{q,k,v}_conv` `[D, 4]` | `model.layers.{i}.attn.{q,k,v}_conv1d.weight` `[D, 1, 4]` | reshape |
 * | `layers.{i}.mixer.beta_proj` `[D, H or D]` | `model.layers.{i}.attn.b_proj.weight` | transpose |
 * | `layers.{i}.mixer.beta_bias` `[H]` | `model.layers.{i}.attn.b_proj.bias` | same |
 * | `layers.{i}.mixer.beta_const` `[H or D]` | `model.layers.{i}.attn.b_const` | same |
 * | `layers.{i}.mixer.lambda_proj` `[D, H]` | `model.layers.{i}.attn.l_proj.weight` | transpose |
 * | `layers.{i}.mixer.lambda_bias` `[H]` | `model.layers.{i}.attn.l_proj.bias` | same |
 * | `layers.{i}.mixer.lambda_const` `[H]` | `model.layers.{i}.attn.l_const` | same |
 * | `layers.{i}.mixer.o_norm` `[Dv]` | `model.layers.{i}.attn.o_norm.weight` | same |
 * | `layers.{i}.mixer.gate_proj` `[D, D]` | `model.layers.{i}.attn.g_proj.weight` | transpose |
 * | `layers.{i}.mixer.out_proj` `[D, D]` | `model.layers.{i}.attn.o_proj.weight` | transpose |
 * | `layers.{i}.mlp_norm` `[D]` | `model.layers.{i}.mlp_norm.weight` | same |
 * | `layers.{i}.mlp.{gate,up}_proj` `[D, F]` | `model.layers.{i}.mlp.{gate,up}_proj.weight` `[F, D]` | transpose |
 * | `layers.{i}.mlp.down_proj` `[F, D]` | `model.layers.{i}.mlp.down_proj.weight` `[D, F]` | transpose |
 * | `final_norm` `[D]` | `model.norm.weight` | same |
 * | `lm_head` `[D, V]` (untied only) | `lm_head.weight` `[V, D]` | transpose |
 *
 * @module
 */

/** How a tensor's layout changes from native to hf. */
export type LayoutChange = "same" | "transpose" | "conv";

interface Row {
  readonly native: RegExp;
  readonly hf: RegExp;
  readonly toHf: (m: RegExpMatchArray) => string;
  readonly toNative: (m: RegExpMatchArray) => string;
  readonly change: LayoutChange;
}

const L = "layers\\.(\\d+)";
const HL = "model\\.layers\\.(\\d+)";

function row(native: string, hf: string, nativeName: string, hfName: string, change: LayoutChange): Row {
  // `{i}` and `{p}` in the name templates are the layer index and the projection letter
  const fill = (template: string, m: RegExpMatchArray) =>
    template.replace("{i}", m[1] ?? "").replace("{p}", m[2] ?? "");
  return {
    native: new RegExp(`^${native}$`),
    hf: new RegExp(`^${hf}$`),
    toHf: (m) => fill(hfName, m),
    toNative: (m) => fill(nativeName, m),
    change,
  };
}

const ROWS: readonly Row[] = [
  row("embed()", "model\\.embeddings\\.weight()", "embed", "model.embeddings.weight", "same"),
  row(
    `${L}\\.attn_norm`,
    `${HL}\\.attn_norm\\.weight`,
    "layers.{i}.attn_norm",
    "model.layers.{i}.attn_norm.weight",
    "same",
  ),
  row(
    `${L}\\.mixer\\.([qkv])_proj`,
    `${HL}\\.attn\\.([qkv])_proj\\.weight`,
    "layers.{i}.mixer.{p}_proj",
    "model.layers.{i}.attn.{p}_proj.weight",
    "transpose",
  ),
  row(
    `${L}\\.mixer\\.([qkv])_conv`,
    `${HL}\\.attn\\.([qkv])_conv1d\\.weight`,
    "layers.{i}.mixer.{p}_conv",
    "model.layers.{i}.attn.{p}_conv1d.weight",
    "conv",
  ),
  row(
    `${L}\\.mixer\\.beta_proj`,
    `${HL}\\.attn\\.b_proj\\.weight`,
    "layers.{i}.mixer.beta_proj",
    "model.layers.{i}.attn.b_proj.weight",
    "transpose",
  ),
  row(
    `${L}\\.mixer\\.beta_bias`,
    `${HL}\\.attn\\.b_proj\\.bias`,
    "layers.{i}.mixer.beta_bias",
    "model.layers.{i}.attn.b_proj.bias",
    "same",
  ),
  row(
    `${L}\\.mixer\\.beta_const`,
    `${HL}\\.attn\\.b_const`,
    "layers.{i}.mixer.beta_const",
    "model.layers.{i}.attn.b_const",
    "same",
  ),
  row(
    `${L}\\.mixer\\.lambda_proj`,
    `${HL}\\.attn\\.l_proj\\.weight`,
    "layers.{i}.mixer.lambda_proj",
    "model.layers.{i}.attn.l_proj.weight",
    "transpose",
  ),
  row(
    `${L}\\.mixer\\.lambda_bias`,
    `${HL}\\.attn\\.l_proj\\.bias`,
    "layers.{i}.mixer.lambda_bias",
    "model.layers.{i}.attn.l_proj.bias",
    "same",
  ),
  row(
    `${L}\\.mixer\\.lambda_const`,
    `${HL}\\.attn\\.l_const`,
    "layers.{i}.mixer.lambda_const",
    "model.layers.{i}.attn.l_const",
    "same",
  ),
  row(
    `${L}\\.mixer\\.o_norm`,
    `${HL}\\.attn\\.o_norm\\.weight`,
    "layers.{i}.mixer.o_norm",
    "model.layers.{i}.attn.o_norm.weight",
    "same",
  ),
  row(
    `${L}\\.mixer\\.gate_proj`,
    `${HL}\\.attn\\.g_proj\\.weight`,
    "layers.{i}.mixer.gate_proj",
    "model.layers.{i}.attn.g_proj.weight",
    "transpose",
  ),
  row(
    `${L}\\.mixer\\.out_proj`,
    `${HL}\\.attn\\.o_proj\\.weight`,
    "layers.{i}.mixer.out_proj",
    "model.layers.{i}.attn.o_proj.weight",
    "transpose",
  ),
  row(
    `${L}\\.mlp_norm`,
    `${HL}\\.mlp_norm\\.weight`,
    "layers.{i}.mlp_norm",
    "model.layers.{i}.mlp_norm.weight",
    "same",
  ),
  row(
    `${L}\\.mlp\\.(gate|up|down)_proj`,
    `${HL}\\.mlp\\.(gate|up|down)_proj\\.weight`,
    "layers.{i}.mlp.{p}_proj",
    "model.layers.{i}.mlp.{p}_proj.weight",
    "transpose",
  ),
  row("final_norm()", "model\\.norm\\.weight()", "final_norm", "model.norm.weight", "same"),
  row("lm_head()", "lm_head\\.weight()", "lm_head", "lm_head.weight", "transpose"),
];

/** Where a native parameter goes in the hf layout. */
export interface HfPlacement {
  /** The hf tensor name. */
  readonly name: string;
  /** How the layout changes. */
  readonly change: LayoutChange;
}

/** The hf name and layout change of a native parameter name; throws a RangeError for an unknown name. */
export function hfPlacement(nativeName: string): HfPlacement {
  for (const r of ROWS) {
    const m = nativeName.match(r.native);
    if (m) return { name: r.toHf(m), change: r.change };
  }
  throw new RangeError(`no hf name for native parameter "${nativeName}"`);
}

/** The native name and layout change (native to hf direction) of an hf tensor name; throws for an unknown name. */
export function nativePlacement(hfName: string): HfPlacement {
  for (const r of ROWS) {
    const m = hfName.match(r.hf);
    if (m) return { name: r.toNative(m), change: r.change };
  }
  throw new RangeError(`unknown hf tensor "${hfName}"`);
}

/** The hf shape of a native shape under `change`. */
export function hfShape(shape: readonly number[], change: LayoutChange): number[] {
  if (change === "transpose") {
    if (shape.length !== 2) throw new RangeError(`transpose needs a 2-D shape, got [${shape}]`);
    return [shape[1], shape[0]];
  }
  if (change === "conv") {
    if (shape.length !== 2) throw new RangeError(`a short-convolution weight must be [C, W], got [${shape}]`);
    return [shape[0], 1, shape[1]];
  }
  return [...shape];
}

/** The native shape of an hf shape under `change` (the inverse of {@linkcode hfShape}). */
export function nativeShape(shape: readonly number[], change: LayoutChange): number[] {
  if (change === "transpose") {
    if (shape.length !== 2) throw new RangeError(`transpose needs a 2-D shape, got [${shape}]`);
    return [shape[1], shape[0]];
  }
  if (change === "conv") {
    if (shape.length !== 3 || shape[1] !== 1) {
      throw new RangeError(`a conv1d weight must be [C, 1, W], got [${shape}]`);
    }
    return [shape[0], shape[2]];
  }
  return [...shape];
}

/**
 * Transpose a row-major `[rows, cols]` matrix of `elementBytes`-byte elements, byte for byte (no
 * float conversion, so every bit pattern survives).
 */
export function transposeBytes(
  data: Uint8Array,
  rows: number,
  cols: number,
  elementBytes: number,
): Uint8Array {
  if (data.length !== rows * cols * elementBytes) {
    throw new RangeError(`transpose: ${data.length} bytes is not ${rows} x ${cols} x ${elementBytes}`);
  }
  const out = new Uint8Array(data.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const src = (r * cols + c) * elementBytes;
      const dst = (c * rows + r) * elementBytes;
      for (let b = 0; b < elementBytes; b++) out[dst + b] = data[src + b];
    }
  }
  return out;
}
