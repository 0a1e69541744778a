/**
 * The f16 GEMM (`matmulPrecision: "f16"`, `shaders/matmul.ts`): against a float64 product it is off by
 * the f16 rounding of its operands and slice sums (relative L2 between 1e-5 and 4e-3: far above the
 * f32 kernel's, so the f16 arithmetic did run, and small enough to be right), for every transpose,
 * accumulate, and sizes that are not multiples of the tiles. Asking for it on an adapter without
 * `shader-f16` is a RangeError naming the feature; the f32 default is unchanged.
 */

import { checkMatmulPrecision, createDenseOps } from "./dense.ts";
import { ADAPTER_FEATURES, gpuBackend, gpuTest, NO_ADAPTER } from "./_test_util.ts";
import { Rng } from "../src/random.ts";

function fakeDevice(features: string[]): GPUDevice {
  return { features: new Set(features) } as unknown as GPUDevice;
}

function expectRangeError(f: () => unknown, parts: string[]): void {
  let message = "";
  try {
    f();
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    message = e.message;
  }
  for (const p of parts) {
    if (!message.includes(p)) throw new Error(`expected "${p}" in the error, got "${message}"`);
  }
}

Deno.test("matmulPrecision: f16 needs shader-f16, unknown values are named", () => {
  expectRangeError(() => checkMatmulPrecision(fakeDevice([]), "f16"), ['"f16"', "shader-f16", '"f32"']);
  expectRangeError(() => checkMatmulPrecision(fakeDevice(["shader-f16"]), "bf16"), ['"bf16"', "f32, f16"]);
  if (checkMatmulPrecision(fakeDevice(["shader-f16"]), "f16") !== "f16") {
    throw new Error("f16 refused with shader-f16");
  }
  if (checkMatmulPrecision(fakeDevice([]), "f32") !== "f32") throw new Error("f32 refused");
});

/** `op(a) op(b)` in float64 (row-major storage as the GEMM reads it). */
function product(
  a: Float32Array,
  b: Float32Array,
  M: number,
  N: number,
  K: number,
  tA: boolean,
  tB: boolean,
) {
  const out = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) {
        s += (tA ? a[k * M + m] : a[m * K + k]) * (tB ? b[n * K + k] : b[k * N + n]);
      }
      out[m * N + n] = s;
    }
  }
  return out;
}

function relL2(x: Float32Array | Float64Array, y: Float64Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < y.length; i++) {
    num += (x[i] - y[i]) ** 2;
    den += y[i] ** 2;
  }
  return Math.sqrt(num / den);
}

/** CI sets this where it provides an adapter with shader-f16 (`.ci/f16`): the test must then run. */
const REQUIRE_F16 = Deno.env.get("FALCON_REQUIRE_F16") === "1";

if (REQUIRE_F16 && !ADAPTER_FEATURES.has("shader-f16")) {
  Deno.test("FALCON_REQUIRE_F16=1: the adapter must have shader-f16", () => {
    throw new Error(`the adapter has no shader-f16 (${NO_ADAPTER ?? [...ADAPTER_FEATURES].join(", ")})`);
  });
}

gpuTest(
  "the f16 GEMM is within f16 rounding of the float64 product (transposes, accumulate, ragged sizes)",
  async (gpu) => {
    // the f16 dense ops on the shared device (which asked for shader-f16 where the adapter has it)
    const half = createDenseOps(gpu.runtime, { matmulPrecision: "f16" });
    const rng = new Rng(5);
    // the small-tile variant and the big one (M*N >= 256^2; f16 4x8 tiles, BK 16)
    for (const [M, N, K] of [[37, 29, 45], [260, 257, 70]]) {
      for (const tA of [false, true]) {
        for (const tB of [false, true]) {
          const a = Float32Array.from({ length: M * K }, () => rng.normal());
          const b = Float32Array.from({ length: K * N }, () => rng.normal());
          const c0 = Float32Array.from({ length: M * N }, () => rng.normal());
          const want = product(a, b, M, N, K, tA, tB);
          for (const accumulate of [false, true]) {
            const label = `${M}x${N}x${K} ${tA ? "t" : "n"}${tB ? "t" : "n"}${accumulate ? " +=" : ""}`;
            const ref = accumulate ? want.map((v, i) => v + c0[i]) : want;
            const errs: number[] = [];
            for (const matmul of [half.matmul, gpu.matmul]) {
              const out = gpu.fromArray(c0, [M, N]);
              const ta = gpu.fromArray(a, tA ? [K, M] : [M, K]);
              const tb = gpu.fromArray(b, tB ? [N, K] : [K, N]);
              matmul(out, ta, tb, { transA: tA, transB: tB, accumulate });
              errs.push(relL2(await gpu.read(out), ref));
              for (const t of [out, ta, tb]) gpu.dispose(t);
            }
            const [e16, e32] = errs;
            if (!(e32 < 1e-6)) throw new Error(`${label}: f32 error ${e32}`);
            if (!(e16 > 1e-5 && e16 < 4e-3)) {
              throw new Error(`${label}: f16 error ${e16} outside (1e-5, 4e-3)`);
            }
          }
        }
      }
    }
  },
  "shader-f16",
);

const HAS_F16 = ADAPTER_FEATURES.has("shader-f16");

Deno.test({
  name: "asking for the f16 GEMM without shader-f16 is a RangeError" +
    (NO_ADAPTER || HAS_F16 ? " [SKIPPED: needs an adapter without shader-f16]" : ""),
  ignore: NO_ADAPTER !== null || HAS_F16,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const gpu = await gpuBackend();
    let message = "";
    try {
      createDenseOps(gpu.runtime, { matmulPrecision: "f16" });
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
      message = e.message;
    }
    if (!message.includes("shader-f16")) {
      throw new Error(`expected a RangeError naming shader-f16, got "${message}"`);
    }
  },
});
