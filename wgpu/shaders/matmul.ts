/**
 * WGSL of the tiled GEMM `out[M, N] (+)= op(a)[M, K] op(b)[K, N]` (`op` = identity or transpose).
 *
 * Shape legend: `M` rows of the output, `N` columns, `K` the contracted size; row-major storage:
 * `a` is `[M, K]` (or `[K, M]` with `transA`), `b` is `[K, N]` (or `[N, K]` with `transB`).
 * Tiling: a 16 x 16 workgroup computes a `16*TM x 16*TN` block of `out`; each invocation holds a
 * `TM x TN` register tile (TM, TN multiples of 4) and reads `BK`-deep slices of `a` and `b` staged in
 * workgroup memory as vec4 (`As[k][m]`, `Bs[k][n]`). Global loads are bounds-checked (any M, N, K).
 * Sizes come from the uniform block; the pipeline key is the variant (transposes, accumulate, tile,
 * precision).
 *
 * Precision `f16` (needs the device feature `shader-f16`): the staged slices hold the operands
 * rounded to f16 (`vec4<f16>`, half the workgroup memory), the products of one `BK`-deep slice are
 * summed in f16 registers (packed half-precision FMAs) and each slice's sum is added to the f32
 * accumulators. Relative error about 1e-3 (an 11-bit significand, `BK` f16 additions), values
 * beyond +-65504 overflow and magnitudes below 6e-8 flush to zero: for inference and speed
 * studies, not for gradients without loss scaling. Storage and results stay f32.
 *
 * @module
 */

import type { Activation } from "../../src/rules/backend.ts";
import { accumulateInto, ACTIVATION_HELPERS } from "./elementwise.ts";

/** A GEMM variant: transposes, accumulate and the per-invocation register tile. */
export interface MatmulVariant {
  /** `a` is stored `[K, M]`. */
  readonly transA: boolean;
  /** `b` is stored `[N, K]`. */
  readonly transB: boolean;
  /** `out += ...` instead of `out = ...`. */
  readonly accumulate: boolean;
  /** Rows per invocation (multiple of 4). */
  readonly tm: number;
  /** Columns per invocation (multiple of 4). */
  readonly tn: number;
  /** Depth of a workgroup-memory slice. */
  readonly bk: number;
  /** Arithmetic of the products: `f32` (default) or `f16` (f16 operands and slice sums, f32 totals). */
  readonly precision?: MatmulPrecision;
  /**
   * Split-K: workgroup `z` contracts only `k` in `[z KS, min(K, (z+1) KS))` and writes its partial
   * product to `out[z, M, N]` (never accumulating); the slice sum (`slices.ts`) adds the partials.
   * For outputs too small to fill the GPU with a long `K` (weight gradients `x^T dy`).
   */
  readonly splitK?: boolean;
  /**
   * A SwiGLU step on each product element `p` of a plain GEMM (no split-K, no accumulate), the same
   * arithmetic as the SwiGLU kernels of `elementwise.ts` on the stored product:
   * - `swiglu-up`: `out = p` (the up projection) and `hidden = silu(gate) * p`; bindings 4 `gate`, 5 `hidden`;
   * - `swiglu-gate`: `out = p` (the gate) and `hidden = silu(p) * up`; bindings 4 `up`, 5 `hidden`;
   * - `swiglu-backward`: `p` is the gradient of SwiGLU's output (never stored):
   *   `dGate += p * up * silu'(gate)` at binding 0, `dUp += p * silu(gate)` at binding 4, with `gate`,
   *   `up` at 5 and 6 and uniform flags `freshGate`, `freshUp` (`accumulateInto`);
   * - `sigmoid`, `softplus`, `silu` (an activation of `activationShader`): `pre = p + bias[n]` (with
   *   the uniform flag `hasBias`, else `p`) stored in `out`, and `act = scale * f(pre)` (uniform `scale`);
   *   bindings 4 `bias`, 5 `act`.
   */
  readonly epilogue?: MatmulEpilogue;
}

/** The epilogues of {@linkcode MatmulVariant.epilogue}. */
export type MatmulEpilogue = "swiglu-up" | "swiglu-gate" | "swiglu-backward" | Activation;

/** Precisions of the GEMM's products (see the module docs). */
export const MATMUL_PRECISIONS = ["f32", "f16"] as const;

/** `f32` or `f16`. */
export type MatmulPrecision = typeof MATMUL_PRECISIONS[number];

/** Pipeline cache key of a variant. */
export function matmulKey(v: MatmulVariant): string {
  return `matmul_${v.precision ?? "f32"}:${v.transA ? "t" : "n"}${v.transB ? "t" : "n"}:${
    v.accumulate ? "acc" : "set"
  }:${v.tm}x${v.tn}x${v.bk}${v.splitK ? ":splitk" : ""}${v.epilogue ? `:${v.epilogue}` : ""}`;
}

/** WGSL declarations and the per-element statement of an epilogue (`o` the output index, `val` the product). */
function epilogueParts(e: MatmulEpilogue): { decl: string; store: (o: string, val: string) => string } {
  switch (e) {
    case "swiglu-up":
      return {
        decl: `@group(0) @binding(4) var<storage, read> gate: array<f32>;
@group(0) @binding(5) var<storage, read_write> hidden: array<f32>;`,
        store: (o, val) => `out_[${o}] = ${val}; hidden[${o}] = silu_f(gate[${o}]) * ${val};`,
      };
    case "swiglu-gate":
      return {
        decl: `@group(0) @binding(4) var<storage, read> up: array<f32>;
@group(0) @binding(5) var<storage, read_write> hidden: array<f32>;`,
        store: (o, val) => `out_[${o}] = ${val}; hidden[${o}] = silu_f(${val}) * up[${o}];`,
      };
    case "swiglu-backward":
      return {
        decl: `@group(0) @binding(4) var<storage, read_write> dup: array<f32>;
@group(0) @binding(5) var<storage, read> gate: array<f32>;
@group(0) @binding(6) var<storage, read> up: array<f32>;`,
        store: (o, val) =>
          `let g = gate[${o}]; let d = ${val}; ${
            accumulateInto("out_", o, `(d * up[${o}] * dsilu_f(g))`, "u.freshGate")
          } ${accumulateInto("dup", o, "(d * silu_f(g))", "u.freshUp")}`,
      };
    default: {
      const f = { sigmoid: "sigmoid_f", softplus: "softplus_f", silu: "silu_f" }[e];
      return {
        decl: `@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> act: array<f32>;`,
        store: (o, val) =>
          `var pre = ${val}; if (u.hasBias != 0u) { pre = pre + bias[gn]; } out_[${o}] = pre; act[${o}] = u.scale * ${f}(pre);`,
      };
    }
  }
}

/** Output tile of one workgroup: `[16 * tm, 16 * tn]`. */
export function matmulTile(v: MatmulVariant): [number, number] {
  return [16 * v.tm, 16 * v.tn];
}

/**
 * WGSL of `matmul_f32` (or `matmul_f16`) for a variant; bindings: out, a, b, uniform `{M, N, K, KS}`
 * (`KS`, the split-K slice depth, is read only by split-K variants).
 */
export function matmulShader(v: MatmulVariant): string {
  const { tm, tn, bk } = v;
  const half = v.precision === "f16";
  // the type of staged operands and slice sums
  const sum = half ? "f16" : "f32";
  if (tm % 4 || tn % 4) throw new RangeError(`matmul tile ${tm}x${tn}: both must be multiples of 4`);
  const BM = 16 * tm;
  const BN = 16 * tn;
  const aLoads = (BM * bk) / 256;
  const bLoads = (BN * bk) / 256;
  if (!Number.isInteger(aLoads) || !Number.isInteger(bLoads)) {
    throw new RangeError(`matmul tile ${BM}x${BN}x${bk} does not split over 256 invocations`);
  }
  // a element (m, k) and b element (k, n), by storage layout; consecutive invocations read consecutive addresses.
  const aLoad = v.transA
    ? `let kk = e / ${BM}u; let mm = e % ${BM}u; let gm = m0 + mm; let gk = k0 + kk;
      var val = 0.0; if (gm < u.M && gk < kEnd) { val = a[gk * u.M + gm]; }`
    : `let mm = e / ${bk}u; let kk = e % ${bk}u; let gm = m0 + mm; let gk = k0 + kk;
      var val = 0.0; if (gm < u.M && gk < kEnd) { val = a[gm * u.K + gk]; }`;
  const bLoad = v.transB
    ? `let nn = e / ${bk}u; let kk = e % ${bk}u; let gn = n0 + nn; let gk = k0 + kk;
      var val = 0.0; if (gn < u.N && gk < kEnd) { val = b[gn * u.K + gk]; }`
    : `let kk = e / ${BN}u; let nn = e % ${BN}u; let gn = n0 + nn; let gk = k0 + kk;
      var val = 0.0; if (gn < u.N && gk < kEnd) { val = b[gk * u.N + gn]; }`;
  const tm4 = tm / 4;
  const tn4 = tn / 4;
  const rep = (n: number, f: (i: number) => string, sep = "\n") =>
    Array.from({ length: n }, (_, i) => f(i)).join(sep);
  const split = !!v.splitK;
  if (v.epilogue && (split || v.accumulate)) {
    throw new RangeError(`matmul epilogue ${v.epilogue} needs a plain GEMM (no split-K, no accumulate)`);
  }
  const epilogue = v.epilogue ? epilogueParts(v.epilogue) : null;
  const store = (o: string, val: string) =>
    epilogue
      ? epilogue.store(o, val)
      : v.accumulate && !split
      ? `out_[${o}] = out_[${o}] + ${val};`
      : `out_[${o}] = ${val};`;
  // Loops over compile-time sizes are unrolled here: naga's loop-bounding counters keep drivers from
  // unrolling them, which would push the register tile into local memory.
  const inner = rep(bk, (kk) => `
    {
      ${rep(tm4, (i4) => `let a${i4} = As[${kk * (BM / 4)}u + lid.y * TM4 + ${i4}u];`, "\n      ")}
      ${rep(tn4, (j4) => `let b${j4} = Bs[${kk * (BN / 4)}u + lid.x * TN4 + ${j4}u];`, "\n      ")}
      ${
    rep(
      tm,
      (i) =>
        rep(
          tn4,
          (j4) => `${half ? "p" : "acc"}${i}_${j4} += a${Math.floor(i / 4)}.${"xyzw"[i % 4]} * b${j4};`,
          " ",
        ),
      "\n      ",
    )
  }
    }`);
  const stores = rep(tm, (i) => `
  {
    let gm = m0 + lid.y * TM + ${i}u;
    if (gm < u.M) {
      ${
    rep(tn4, (j4) =>
      rep(4, (c) => `
      { let gn = n0 + lid.x * TN + ${j4 * 4 + c}u; if (gn < u.N) { ${
        store(`outBase + gm * u.N + gn`, `acc${i}_${j4}.${"xyzw"[c]}`)
      } } }`, ""), "")
  }
    }
  }`);
  const sliceStart = half
    ? "\n    " + rep(tm, (i) => rep(tn4, (j4) => `var p${i}_${j4} = vec4<f16>(0.0h);`, " "), "\n    ")
    : "";
  const sliceEnd = half
    ? "\n    " + rep(tm, (i) => rep(tn4, (j4) => `acc${i}_${j4} += vec4<f32>(p${i}_${j4});`, " "), "\n    ")
    : "";
  return `${half ? "enable f16;\n" : ""}
// matmul_${sum}: out[${split ? "z, " : ""}M, N] ${v.accumulate && !split ? "+=" : "="} ${
    v.transA ? "a^T" : "a"
  } ${v.transB ? "b^T" : "b"}${split ? " over the z-th slice of K" : ""}
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
struct Dims { M: u32, N: u32, K: u32, KS: u32${
    v.epilogue === "swiglu-backward"
      ? ", freshGate: u32, freshUp: u32"
      : v.epilogue && !v.epilogue.startsWith("swiglu")
      ? ", scale: f32, hasBias: u32"
      : ""
  } }
@group(0) @binding(3) var<uniform> u: Dims;${
    epilogue
      ? `
${epilogue.decl}
${ACTIVATION_HELPERS}`
      : ""
  }
const TM = ${tm}u;
const TN = ${tn}u;
const TM4 = ${tm4}u;
const TN4 = ${tn4}u;
const BK = ${bk}u;
var<workgroup> As: array<vec4<${sum}>, ${(bk * BM) / 4}>; // [BK][BM/4]
var<workgroup> Bs: array<vec4<${sum}>, ${(bk * BN) / 4}>; // [BK][BN/4]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let m0 = wid.y * ${BM}u;
  let n0 = wid.x * ${BN}u;
  ${
    split
      ? "let kBegin = wid.z * u.KS;\n  let kEnd = min(u.K, kBegin + u.KS);\n  let outBase = wid.z * u.M * u.N;"
      : "let kBegin = 0u;\n  let kEnd = u.K;\n  let outBase = 0u;"
  }
  ${rep(tm, (i) => rep(tn4, (j4) => `var acc${i}_${j4} = vec4<f32>(0.0);`, " "), "\n  ")}
  for (var k0 = kBegin; k0 < kEnd; k0 += BK) {
    ${
    rep(aLoads, (r) =>
      `{
      let e = li + ${r * 256}u;
      ${aLoad}
      let s = kk * ${BM}u + mm;
      As[s / 4u][s % 4u] = ${half ? "f16(val)" : "val"};
    }`, "\n    ")
  }
    ${
    rep(bLoads, (r) =>
      `{
      let e = li + ${r * 256}u;
      ${bLoad}
      let s = kk * ${BN}u + nn;
      Bs[s / 4u][s % 4u] = ${half ? "f16(val)" : "val"};
    }`, "\n    ")
  }
    workgroupBarrier();${sliceStart}
    ${inner}${sliceEnd}
    workgroupBarrier();
  }
  ${stores}
}`;
}
