import { assertClose, Rng } from "../../testing/compare.ts";
import { refDenseOps as ops } from "./dense.ts";
import { RefTensor } from "./tensor.ts";

const EXACT = { rtol: 1e-13, atol: 1e-14 };
/** Central differences with step 1e-6 in float64: truncation ~1e-12, rounding ~1e-10. */
const FD = { rtol: 1e-6, atol: 1e-8 };

function t(shape: number[], values: number[]): RefTensor {
  return new RefTensor(shape, Float64Array.from(values));
}

function rand(rng: Rng, shape: number[], scale = 1): RefTensor {
  const size = shape.reduce((a, b) => a * b, 1);
  return new RefTensor(shape, rng.normals(size, scale));
}

function assertThrows(name: string, f: () => void, pattern: RegExp): void {
  try {
    f();
  } catch (e) {
    if (e instanceof Error && pattern.test(e.message)) return;
    throw new Error(`${name}: threw ${e}, expected a message matching ${pattern}`);
  }
  throw new Error(`${name}: did not throw`);
}

/** Central finite differences of `loss` with respect to every element of `x`. */
function numericGrad(x: RefTensor, loss: () => number, h = 1e-6): Float64Array {
  const g = new Float64Array(x.size);
  for (let i = 0; i < x.size; i++) {
    const keep = x.data[i];
    x.data[i] = keep + h;
    const up = loss();
    x.data[i] = keep - h;
    const down = loss();
    x.data[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

function dot(a: Float64Array, b: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/**
 * Check a backward op against central differences of `L = sum(out * G)`. Each gradient tensor starts
 * from random values, so the check also proves that the backward accumulates instead of overwriting.
 */
function checkBackward(
  name: string,
  rng: Rng,
  inputs: Record<string, RefTensor>,
  forward: () => RefTensor,
  backward: (dOut: RefTensor, grads: Record<string, RefTensor>) => void,
): void {
  const out = forward();
  const G = rand(rng, [...out.shape]);
  const loss = () => dot(forward().data, G.data);
  const grads: Record<string, RefTensor> = {};
  const before: Record<string, Float64Array> = {};
  for (const [key, x] of Object.entries(inputs)) {
    grads[key] = rand(rng, [...x.shape]);
    before[key] = grads[key].data.slice();
  }
  forward();
  backward(G, grads);
  for (const [key, x] of Object.entries(inputs)) {
    const added = grads[key].data.map((v, i) => v - before[key][i]);
    assertClose(`${name}: d${key}`, added, numericGrad(x, loss), FD);
  }
}

Deno.test("matmul() multiplies 2-D views, with transposes and accumulation", () => {
  const a = t([2, 3], [1, 2, 3, 4, 5, 6]);
  const b = t([3, 2], [7, 8, 9, 10, 11, 12]);
  const out = new RefTensor([2, 2]);
  ops.matmul(out, a, b);
  assertClose("a b", out.data, [58, 64, 139, 154], EXACT);
  const aT = t([3, 2], [1, 4, 2, 5, 3, 6]);
  const bT = t([2, 3], [7, 9, 11, 8, 10, 12]);
  ops.matmul(out, aT, bT, { transA: true, transB: true });
  assertClose("a^T b^T", out.data, [58, 64, 139, 154], EXACT);
  ops.matmul(out, a, bT, { transB: true, accumulate: true });
  assertClose("accumulate", out.data, [116, 128, 278, 308], EXACT);
});

Deno.test("matmul() flattens leading dimensions, treats a 1-D tensor as one row and rejects mismatches", () => {
  const ones = t([3, 1], [1, 1, 1]);
  const bias = t([2], [5, -1]);
  const out = new RefTensor([3, 2]);
  ops.matmul(out, ones, bias);
  assertClose("ones bias", out.data, [5, -1, 5, -1, 5, -1], EXACT);
  const a = t([2, 1, 2], [1, 2, 3, 4]);
  const w = t([2, 3], [1, 0, 1, 0, 1, 1]);
  const y = new RefTensor([2, 1, 3]);
  ops.matmul(y, a, w);
  assertClose("[2,1,2] x [2,3]", y.data, [1, 2, 3, 3, 4, 7], EXACT);
  assertThrows(
    "inner mismatch",
    () => ops.matmul(new RefTensor([2, 2]), a, t([3, 2], [0, 0, 0, 0, 0, 0])),
    /inner/,
  );
  assertThrows("out mismatch", () => ops.matmul(new RefTensor([3, 2]), a, w), /out is \[3,2\]/);
});

Deno.test("matmul() gradients agree with finite differences in every transpose combination", () => {
  const rng = new Rng(1);
  for (const transA of [false, true]) {
    for (const transB of [false, true]) {
      const a = rand(rng, transA ? [4, 3] : [3, 4]);
      const b = rand(rng, transB ? [2, 4] : [4, 2]);
      const out = new RefTensor([3, 2]);
      checkBackward(`matmul transA=${transA} transB=${transB}`, rng, { a, b }, () => {
        ops.matmul(out, a, b, { transA, transB });
        return out;
      }, (dOut, g) => {
        // out = op(a) op(b): d op(a) = dOut op(b)^T, d op(b) = op(a)^T dOut
        if (!transA) ops.matmul(g.a, dOut, b, { transB: !transB, accumulate: true });
        else ops.matmul(g.a, b, dOut, { transA: transB, transB: true, accumulate: true });
        if (!transB) ops.matmul(g.b, a, dOut, { transA: !transA, accumulate: true });
        else ops.matmul(g.b, dOut, a, { transA: true, transB: transA, accumulate: true });
      });
    }
  }
});

Deno.test("embeddingForward() gathers rows and embeddingBackward() accumulates repeated ids", () => {
  const table = t([3, 2], [1, 2, 3, 4, 5, 6]);
  const ids = Int32Array.from([2, 0, 2]);
  const out = new RefTensor([3, 2]);
  ops.embeddingForward(out, table, ids);
  assertClose("gather", out.data, [5, 6, 1, 2, 5, 6], EXACT);
  const dTable = t([3, 2], [1, 1, 1, 1, 1, 1]);
  ops.embeddingBackward(dTable, t([3, 2], [1, 2, 3, 4, 5, 6]), ids);
  assertClose("scatter-add", dTable.data, [4, 5, 1, 1, 7, 9], EXACT);
  assertThrows("bad id", () => ops.embeddingForward(out, table, Int32Array.from([0, 3, 1])), /token id 3/);
});

Deno.test("rmsNormForward() normalises rows, stores rstd and applies the weight", () => {
  const x = t([2, 2], [3, 4, 0, 2]);
  const w = t([2], [1, 10]);
  const out = new RefTensor([2, 2]);
  const rstd = new RefTensor([2]);
  ops.rmsNormForward(out, rstd, x, w, 0);
  const r0 = 1 / Math.sqrt(12.5);
  const r1 = 1 / Math.sqrt(2);
  assertClose("rstd", rstd.data, [r0, r1], EXACT);
  assertClose("out", out.data, [3 * r0, 40 * r0, 0, 20 * r1], EXACT);
  ops.rmsNormForward(out, rstd, x, null, 0.5);
  assertClose(
    "no weight, eps",
    out.data,
    [3 / Math.sqrt(13), 4 / Math.sqrt(13), 0, 2 / Math.sqrt(2.5)],
    EXACT,
  );
});

Deno.test("rmsNormBackward() agrees with finite differences, with and without a weight", () => {
  const rng = new Rng(2);
  const x = rand(rng, [3, 5]);
  const weight = rand(rng, [5]);
  const out = new RefTensor([3, 5]);
  const rstd = new RefTensor([3]);
  checkBackward("rmsNorm weighted", rng, { x, weight }, () => {
    ops.rmsNormForward(out, rstd, x, weight, 1e-3);
    return out;
  }, (dOut, g) => ops.rmsNormBackward(g.x, g.weight, dOut, x, weight, rstd));
  checkBackward("rmsNorm plain", rng, { x }, () => {
    ops.rmsNormForward(out, rstd, x, null, 1e-3);
    return out;
  }, (dOut, g) => ops.rmsNormBackward(g.x, null, dOut, x, null, rstd));
});

Deno.test("swigluForward() computes silu(gate) * up and its backward agrees with finite differences", () => {
  const out = new RefTensor([2]);
  ops.swigluForward(out, t([2], [0, 1]), t([2], [5, 2]));
  assertClose("hand", out.data, [0, 2 / (1 + Math.exp(-1))], EXACT);
  const rng = new Rng(3);
  const gate = rand(rng, [2, 3]);
  const up = rand(rng, [2, 3]);
  const o = new RefTensor([2, 3]);
  checkBackward("swiglu", rng, { gate, up }, () => {
    ops.swigluForward(o, gate, up);
    return o;
  }, (dOut, g) => ops.swigluBackward(g.gate, g.up, dOut, gate, up));
});

Deno.test("activationForward() computes scaled sigmoid, softplus and silu, stable for large inputs", () => {
  const x = t([4], [0, 1, -800, 800]);
  const out = new RefTensor([4]);
  ops.activationForward("sigmoid", out, x, 2);
  assertClose("sigmoid", out.data, [1, 2 / (1 + Math.exp(-1)), 0, 2], EXACT);
  ops.activationForward("softplus", out, x, 1);
  assertClose("softplus", out.data, [Math.LN2, Math.log(1 + Math.E), 0, 800], EXACT);
  ops.activationForward("silu", out, x, 1);
  assertClose("silu", out.data, [0, 1 / (1 + Math.exp(-1)), 0, 800], EXACT);
  assertThrows("unknown", () => ops.activationForward("tanh" as "silu", out, x, 1), /unknown activation/);
});

Deno.test("activationBackward() agrees with finite differences for every activation and scale", () => {
  const rng = new Rng(4);
  for (const kind of ["sigmoid", "softplus", "silu"] as const) {
    const x = rand(rng, [7], 2);
    const out = new RefTensor([7]);
    checkBackward(kind, rng, { x }, () => {
      ops.activationForward(kind, out, x, 1.5);
      return out;
    }, (dOut, g) => ops.activationBackward(kind, g.x, dOut, x, 1.5));
  }
});

Deno.test("add(), mul(), axpy() and fill() act element-wise and check sizes", () => {
  const a = t([3], [1, 2, 3]);
  const b = t([3], [4, 5, -6]);
  const out = new RefTensor([3]);
  ops.add(out, a, b);
  assertClose("add", out.data, [5, 7, -3], EXACT);
  ops.mul(out, a, b);
  assertClose("mul", out.data, [4, 10, -18], EXACT);
  ops.axpy(out, a, -2);
  assertClose("axpy", out.data, [2, 6, -24], EXACT);
  ops.fill(out, 0.25);
  assertClose("fill", out.data, [0.25, 0.25, 0.25], EXACT);
  assertThrows("size", () => ops.add(out, a, new RefTensor([2])), /add: b has 2 elements/);
});

Deno.test("shortConvForward() is causal, uses the last tap for the current position and stops at starts", () => {
  // B=1, T=4, C=1, W=2: pre[t] = w1 x[t] + w0 x[t-1] (x[t-1] dropped at a start)
  const x = t([1, 4, 1], [1, 2, 3, 4]);
  const w = t([1, 2], [10, 1]);
  const out = new RefTensor([1, 4, 1]);
  const silu = (z: number) => z / (1 + Math.exp(-z));
  ops.shortConvForward(out, x, w);
  assertClose("no starts", out.data, [silu(1), silu(12), silu(23), silu(34)], EXACT);
  ops.shortConvForward(out, x, w, Uint8Array.from([1, 0, 1, 0]));
  assertClose("start at 2", out.data, [silu(1), silu(12), silu(3), silu(34)], EXACT);
});

Deno.test("shortConvBackward() agrees with finite differences across packed sequence starts", () => {
  const rng = new Rng(5);
  const x = rand(rng, [2, 6, 3]);
  const weight = rand(rng, [3, 4], 0.5);
  const out = new RefTensor([2, 6, 3]);
  const starts = Uint8Array.from([1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0]);
  checkBackward("shortConv", rng, { x, weight }, () => {
    ops.shortConvForward(out, x, weight, starts);
    return out;
  }, (dOut, g) => ops.shortConvBackward(g.x, g.weight, dOut, x, weight, starts));
});

Deno.test("crossEntropyForward() weights rows and skips weight-0 rows whatever their target", () => {
  const logits = t([3, 3], [0, 0, 0, 1, 2, 3, 9, 9, 9]);
  const losses = new RefTensor([3]);
  ops.crossEntropyForward(losses, logits, Int32Array.from([1, 2, -1]), Float32Array.from([2, 1, 0]));
  const lse = Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3));
  assertClose("losses", losses.data, [2 * Math.log(3), lse - 3, 0], EXACT);
  assertThrows(
    "bad target",
    () => ops.crossEntropyForward(losses, logits, Int32Array.from([3, 0, 0]), Float32Array.from([1, 1, 1])),
    /target 3 at row 0/,
  );
});

Deno.test("crossEntropyBackward() agrees with finite differences of the weighted loss", () => {
  const rng = new Rng(6);
  const logits = rand(rng, [4, 5], 3);
  const targets = Int32Array.from([0, 4, 2, 2]);
  const weights = Float32Array.from([1, 0.5, 0, 2]);
  const losses = new RefTensor([4]);
  const G = new RefTensor([4], Float64Array.from([1, 1, 1, 1]));
  const loss = () => {
    ops.crossEntropyForward(losses, logits, targets, weights);
    return dot(losses.data, G.data);
  };
  const dLogits = new RefTensor([4, 5]);
  ops.fill(dLogits, 0.5);
  ops.crossEntropyBackward(dLogits, logits, targets, weights);
  assertClose("dLogits", dLogits.data.map((v) => v - 0.5), numericGrad(logits, loss), FD);
});

Deno.test("attentionForward() matches a hand-computed RoPE case and stores the log-sum-exp", () => {
  // B=1, T=2, H=1, D=2; RoPE angle at position p is p (base^0); position 0 is not rotated.
  const q = t([1, 2, 1, 2], [0, 1, 1, 0]);
  const k = t([1, 2, 1, 2], [1, 0, 0, 1]);
  const v = t([1, 2, 1, 2], [1, 2, 3, 5]);
  const out = new RefTensor([1, 2, 1, 2]);
  const lse = new RefTensor([1, 2, 1]);
  ops.attentionForward(out, lse, q, k, v, 10000);
  // t=1: q1r = (cos 1, sin 1), k0r = (1, 0), k1r = (-sin 1, cos 1): scores cos(1)/sqrt2 and 0
  const s0 = Math.cos(1) / Math.SQRT2;
  const l1 = Math.log(Math.exp(s0) + 1);
  const p0 = Math.exp(s0 - l1);
  const p1 = 1 - p0;
  assertClose("out", out.data, [1, 2, p0 * 1 + p1 * 3, p0 * 2 + p1 * 5], EXACT);
  // t=0 attends only to itself: score q0 . k0 / sqrt2 = 0
  assertClose("lse", lse.data, [0, l1], EXACT);
});

Deno.test("attentionForward() on a packed row equals each sequence run on its own", () => {
  const rng = new Rng(7);
  const [T1, T2, H, D] = [3, 4, 2, 4];
  const q = rand(rng, [1, T1 + T2, H, D]);
  const k = rand(rng, [1, T1 + T2, H, D]);
  const v = rand(rng, [1, T1 + T2, H, D]);
  const starts = new Uint8Array(T1 + T2);
  starts[T1] = 1;
  const out = new RefTensor([1, T1 + T2, H, D]);
  const lse = new RefTensor([1, T1 + T2, H]);
  ops.attentionForward(out, lse, q, k, v, 100, starts);
  const part = (x: RefTensor, from: number, len: number) =>
    new RefTensor([1, len, H, D], x.data.slice(from * H * D, (from + len) * H * D));
  for (const [from, len] of [[0, T1], [T1, T2]]) {
    const o = new RefTensor([1, len, H, D]);
    const l = new RefTensor([1, len, H]);
    ops.attentionForward(o, l, part(q, from, len), part(k, from, len), part(v, from, len), 100);
    assertClose(
      `out of sequence at ${from}`,
      out.data.slice(from * H * D, (from + len) * H * D),
      o.data,
      EXACT,
    );
    assertClose(`lse of sequence at ${from}`, lse.data.slice(from * H, (from + len) * H), l.data, EXACT);
  }
});

Deno.test("attentionBackward() agrees with finite differences across packed sequence starts", () => {
  const rng = new Rng(8);
  const shape = [2, 5, 2, 4];
  const q = rand(rng, shape);
  const k = rand(rng, shape);
  const v = rand(rng, shape);
  const starts = Uint8Array.from([1, 0, 1, 0, 0, 0, 0, 0, 0, 1]);
  const out = new RefTensor(shape);
  const lse = new RefTensor([2, 5, 2]);
  checkBackward("attention", rng, { q, k, v }, () => {
    ops.attentionForward(out, lse, q, k, v, 50, starts);
    return out;
  }, (dOut, g) => ops.attentionBackward(g.q, g.k, g.v, dOut, out, lse, q, k, v, 50, starts));
  assertThrows("odd D", () => ops.attentionForward(out, lse, rand(rng, [1, 1, 1, 3]), q, v, 50), /even/);
});

Deno.test("adamw() applies bias-corrected moments, decoupled decay and gradScale", () => {
  const param = t([2], [1, -2]);
  const grad = t([2], [4, -1]);
  const m = new RefTensor([2]);
  const v = new RefTensor([2]);
  const p = { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.5, step: 1, gradScale: 0.5 };
  ops.adamw(param, grad, m, v, p, true);
  // g = (2, -0.5); m = 0.1 g; v = 0.01 g^2; corrected m/(1-0.9) = g, v/(1-0.99) = g^2
  assertClose("m", m.data, [0.2, -0.05], EXACT);
  assertClose("v", v.data, [0.04, 0.0025], EXACT);
  const upd = (g: number) => (0.1 * g) / (Math.abs(g) + 1e-8);
  assertClose("param", param.data, [1 * 0.95 - upd(2), -2 * 0.95 - upd(-0.5)], EXACT);
  // step 2 without decay
  ops.adamw(param, grad, m, v, { ...p, step: 2 }, false);
  const m2 = [0.9 * 0.2 + 0.1 * 2, 0.9 * -0.05 + 0.1 * -0.5];
  const v2 = [0.99 * 0.04 + 0.01 * 4, 0.99 * 0.0025 + 0.01 * 0.25];
  const expected = [0, 1].map((i) =>
    [1 * 0.95 - upd(2), -2 * 0.95 - upd(-0.5)][i] -
    (0.1 * m2[i] / (1 - 0.81)) / (Math.sqrt(v2[i] / (1 - 0.99 * 0.99)) + 1e-8)
  );
  assertClose("param step 2", param.data, expected, EXACT);
});

Deno.test("sumSquares() returns the sum of squared elements", async () => {
  const s = await ops.sumSquares(t([2, 2], [1, -2, 3, 0.5]));
  assertClose("sum of squares", [s], [14.25], EXACT);
});
