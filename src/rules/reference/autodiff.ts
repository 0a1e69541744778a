/**
 * A small float64 reverse-mode tape over row-major matrices, used by the chunk-parallel reference
 * forms to get an exact backward from the forward code (SPEC section 5).
 *
 * Every value is a matrix `[rows, cols]` (a column vector is `[n, 1]`, a scalar `[1, 1]`). Ops record
 * themselves on the {@linkcode Tape} of their first operand; {@linkcode Tape.backward} seeds some
 * nodes with gradients and walks the tape in reverse, accumulating into `grad` of every node that
 * depends on a leaf created with `needsGrad`.
 *
 * @module
 */

/** One matrix value on a tape. */
export class Node {
  /** Gradient of the seeded scalar with respect to this value (allocated on first use). */
  grad: Float64Array | null = null;
  /** Propagates `grad` to the operands (null for leaves and constants). */
  backwardFn: (() => void) | null = null;
  /**
   * A node; made by {@linkcode Tape.leaf}, {@linkcode Tape.constant} and the ops.
   *
   * @param tape the tape the node lives on
   * @param rows number of rows
   * @param cols number of columns
   * @param value row-major values `[rows, cols]`
   * @param needsGrad whether any gradient flows into this node
   */
  constructor(
    readonly tape: Tape,
    readonly rows: number,
    readonly cols: number,
    readonly value: Float64Array,
    readonly needsGrad: boolean,
  ) {
    if (value.length !== rows * cols) {
      throw new RangeError(`node value has length ${value.length}, expected ${rows}x${cols}`);
    }
  }

  /** The gradient buffer, allocated (zeros) on first use. */
  gradBuffer(): Float64Array {
    if (this.grad === null) this.grad = new Float64Array(this.rows * this.cols);
    return this.grad;
  }
}

/** A record of matrix ops, differentiated in reverse by {@linkcode Tape.backward}. */
export class Tape {
  /** Nodes in creation order. */
  readonly nodes: Node[] = [];

  /** An input value; `needsGrad` makes its gradient available after {@linkcode Tape.backward}. */
  leaf(rows: number, cols: number, value: Float64Array, needsGrad = true): Node {
    const node = new Node(this, rows, cols, value, needsGrad);
    this.nodes.push(node);
    return node;
  }

  /** A value that receives no gradient. */
  constant(rows: number, cols: number, value: Float64Array): Node {
    return this.leaf(rows, cols, value, false);
  }

  /** Record an op: `backward` reads `out.grad` and adds into the operands' gradient buffers. */
  op(
    rows: number,
    cols: number,
    value: Float64Array,
    operands: readonly Node[],
    backward: (out: Node) => void,
  ): Node {
    const out = new Node(this, rows, cols, value, operands.some((p) => p.needsGrad));
    if (out.needsGrad) out.backwardFn = () => backward(out);
    this.nodes.push(out);
    return out;
  }

  /** Seed `grad(node) = seed` for each pair (added together) and propagate to every leaf. */
  backward(seeds: readonly (readonly [Node, Float64Array])[]): void {
    for (const [node, seed] of seeds) {
      if (seed.length !== node.value.length) {
        throw new RangeError(`seed has length ${seed.length}, expected ${node.rows}x${node.cols}`);
      }
      if (!node.needsGrad) continue;
      const g = node.gradBuffer();
      for (let i = 0; i < g.length; i++) g[i] += seed[i];
    }
    for (let i = this.nodes.length - 1; i >= 0; i--) {
      const node = this.nodes[i];
      if (node.backwardFn && node.grad) node.backwardFn();
    }
  }
}

/** Add `src` into the gradient of `node` if it needs one. */
function accumulate(node: Node, src: Float64Array): void {
  if (!node.needsGrad) return;
  const g = node.gradBuffer();
  for (let i = 0; i < g.length; i++) g[i] += src[i];
}

/** Plain row-major product `[n, k] x [k, m]`. */
function gemm(a: Float64Array, b: Float64Array, n: number, k: number, m: number): Float64Array {
  const out = new Float64Array(n * m);
  for (let i = 0; i < n; i++) {
    for (let p = 0; p < k; p++) {
      const aip = a[i * k + p];
      if (aip === 0) continue;
      const bo = p * m;
      const oo = i * m;
      for (let j = 0; j < m; j++) out[oo + j] += aip * b[bo + j];
    }
  }
  return out;
}

/** Plain transpose of `[n, m]`. */
function transposeData(a: Float64Array, n: number, m: number): Float64Array {
  const out = new Float64Array(n * m);
  for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) out[j * n + i] = a[i * m + j];
  return out;
}

/** Matrix product `a b`, `[n, k] x [k, m] -> [n, m]`. */
export function matmul(a: Node, b: Node): Node {
  if (a.cols !== b.rows) throw new RangeError(`matmul: [${a.rows}, ${a.cols}] x [${b.rows}, ${b.cols}]`);
  const n = a.rows, k = a.cols, m = b.cols;
  return a.tape.op(n, m, gemm(a.value, b.value, n, k, m), [a, b], (out) => {
    const g = out.grad!;
    if (a.needsGrad) accumulate(a, gemm(g, transposeData(b.value, k, m), n, m, k));
    if (b.needsGrad) accumulate(b, gemm(transposeData(a.value, n, k), g, k, n, m));
  });
}

/** Transpose `[n, m] -> [m, n]`. */
export function transpose(a: Node): Node {
  return a.tape.op(a.cols, a.rows, transposeData(a.value, a.rows, a.cols), [a], (out) => {
    accumulate(a, transposeData(out.grad!, a.cols, a.rows));
  });
}

/** Row and column strides of a broadcast operand of shape `[r, c]` (r or c may be 1). */
function strides(node: Node): [number, number] {
  return [node.rows === 1 ? 0 : node.cols, node.cols === 1 ? 0 : 1];
}

function broadcastShape(name: string, a: Node, b: Node): [number, number] {
  const dim = (x: number, y: number) => (x === y || y === 1 ? x : x === 1 ? y : -1);
  const rows = dim(a.rows, b.rows);
  const cols = dim(a.cols, b.cols);
  if (rows < 0 || cols < 0) {
    throw new RangeError(`${name}: cannot broadcast [${a.rows}, ${a.cols}] with [${b.rows}, ${b.cols}]`);
  }
  return [rows, cols];
}

type BinaryKind = "add" | "sub" | "mul" | "div";

/** Element-wise binary op with broadcasting of `[r, 1]`, `[1, c]` and `[1, 1]` operands. */
function binary(kind: BinaryKind, a: Node, b: Node): Node {
  const [rows, cols] = broadcastShape(kind, a, b);
  const [ar, ac] = strides(a);
  const [br, bc] = strides(b);
  const av = a.value, bv = b.value;
  const value = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const x = av[i * ar + j * ac], y = bv[i * br + j * bc];
      value[i * cols + j] = kind === "add" ? x + y : kind === "sub" ? x - y : kind === "mul" ? x * y : x / y;
    }
  }
  return a.tape.op(rows, cols, value, [a, b], (out) => {
    const g = out.grad!;
    const ga = a.needsGrad ? a.gradBuffer() : null;
    const gb = b.needsGrad ? b.gradBuffer() : null;
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const gk = g[i * cols + j];
        if (gk === 0) continue;
        const ia = i * ar + j * ac, ib = i * br + j * bc;
        switch (kind) {
          case "add":
            if (ga) ga[ia] += gk;
            if (gb) gb[ib] += gk;
            break;
          case "sub":
            if (ga) ga[ia] += gk;
            if (gb) gb[ib] -= gk;
            break;
          case "mul":
            if (ga) ga[ia] += gk * bv[ib];
            if (gb) gb[ib] += gk * av[ia];
            break;
          case "div":
            if (ga) ga[ia] += gk / bv[ib];
            if (gb) gb[ib] -= (gk * value[i * cols + j]) / bv[ib];
            break;
        }
      }
    }
  });
}

/** `a + b` (broadcasting). */
export function add(a: Node, b: Node): Node {
  return binary("add", a, b);
}

/** `a - b` (broadcasting). */
export function sub(a: Node, b: Node): Node {
  return binary("sub", a, b);
}

/** `a * b` element-wise (broadcasting). */
export function mul(a: Node, b: Node): Node {
  return binary("mul", a, b);
}

/** `a / b` element-wise (broadcasting). */
export function div(a: Node, b: Node): Node {
  return binary("div", a, b);
}

/** Element-wise unary op; `d(x, z)` is the derivative at input `x` with output `z`. */
function unary(a: Node, f: (x: number) => number, d: (x: number, z: number) => number): Node {
  const value = a.value.map(f);
  return a.tape.op(a.rows, a.cols, value, [a], (out) => {
    const g = out.grad!;
    const ga = a.gradBuffer();
    for (let i = 0; i < g.length; i++) if (g[i] !== 0) ga[i] += g[i] * d(a.value[i], value[i]);
  });
}

/** `s * a` for a constant `s`. */
export function scale(a: Node, s: number): Node {
  return unary(a, (x) => s * x, () => s);
}

/** `a + s` for a constant `s`. */
export function addScalar(a: Node, s: number): Node {
  return unary(a, (x) => x + s, () => 1);
}

/** `exp(a)` element-wise. */
export function exp(a: Node): Node {
  return unary(a, Math.exp, (_x, z) => z);
}

/** The value of `a` with no gradient flowing back (the stop-gradient `sg`). */
export function stopGrad(a: Node): Node {
  return a.tape.constant(a.rows, a.cols, a.value.slice());
}

/** Row-wise sum of squares `[n, m] -> [n, 1]`. */
export function rowSumSq(a: Node): Node {
  const { rows, cols } = a;
  const value = new Float64Array(rows);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let j = 0; j < cols; j++) s += a.value[i * cols + j] ** 2;
    value[i] = s;
  }
  return a.tape.op(rows, 1, value, [a], (out) => {
    const g = out.grad!;
    const ga = a.gradBuffer();
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) ga[i * cols + j] += 2 * g[i] * a.value[i * cols + j];
    }
  });
}

/** Rows `index[r]` of `a` (`-1` gives a zero row): `[n, m] -> [index.length, m]`. */
export function gatherRows(a: Node, index: ArrayLike<number>): Node {
  const { cols } = a;
  const rows = index.length;
  const value = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const src = index[r];
    if (src < -1 || src >= a.rows) throw new RangeError(`gatherRows: row ${src} of ${a.rows}`);
    if (src >= 0) value.set(a.value.subarray(src * cols, src * cols + cols), r * cols);
  }
  return a.tape.op(rows, cols, value, [a], (out) => {
    const g = out.grad!;
    const ga = a.gradBuffer();
    for (let r = 0; r < rows; r++) {
      const src = index[r];
      if (src < 0) continue;
      for (let j = 0; j < cols; j++) ga[src * cols + j] += g[r * cols + j];
    }
  });
}

/** Columns `index[c]` of `a`: `[n, m] -> [n, index.length]`. */
export function gatherCols(a: Node, index: ArrayLike<number>): Node {
  const { rows } = a;
  const cols = index.length;
  const value = new Float64Array(rows * cols);
  for (let c = 0; c < cols; c++) {
    if (index[c] < 0 || index[c] >= a.cols) {
      throw new RangeError(`gatherCols: column ${index[c]} of ${a.cols}`);
    }
  }
  for (let i = 0; i < rows; i++) {
    for (let c = 0; c < cols; c++) value[i * cols + c] = a.value[i * a.cols + index[c]];
  }
  return a.tape.op(rows, cols, value, [a], (out) => {
    const g = out.grad!;
    const ga = a.gradBuffer();
    for (let i = 0; i < rows; i++) {
      for (let c = 0; c < cols; c++) ga[i * a.cols + index[c]] += g[i * cols + c];
    }
  });
}

/** Stack matrices with the same column count on top of each other. */
export function concatRows(parts: readonly Node[]): Node {
  if (parts.length === 0) throw new RangeError("concatRows: no parts");
  const cols = parts[0].cols;
  let rows = 0;
  for (const p of parts) {
    if (p.cols !== cols) throw new RangeError(`concatRows: ${p.cols} columns, expected ${cols}`);
    rows += p.rows;
  }
  const value = new Float64Array(rows * cols);
  let offset = 0;
  for (const p of parts) {
    value.set(p.value, offset);
    offset += p.value.length;
  }
  return parts[0].tape.op(rows, cols, value, parts, (out) => {
    let o = 0;
    for (const p of parts) {
      accumulate(p, out.grad!.subarray(o, o + p.value.length));
      o += p.value.length;
    }
  });
}

/** Put matrices with the same row count side by side. */
export function concatCols(parts: readonly Node[]): Node {
  if (parts.length === 0) throw new RangeError("concatCols: no parts");
  const rows = parts[0].rows;
  let cols = 0;
  for (const p of parts) {
    if (p.rows !== rows) throw new RangeError(`concatCols: ${p.rows} rows, expected ${rows}`);
    cols += p.cols;
  }
  const value = new Float64Array(rows * cols);
  let c0 = 0;
  for (const p of parts) {
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < p.cols; j++) value[i * cols + c0 + j] = p.value[i * p.cols + j];
    }
    c0 += p.cols;
  }
  return parts[0].tape.op(rows, cols, value, parts, (out) => {
    const g = out.grad!;
    let c = 0;
    for (const p of parts) {
      if (p.needsGrad) {
        const gp = p.gradBuffer();
        for (let i = 0; i < rows; i++) {
          for (let j = 0; j < p.cols; j++) gp[i * p.cols + j] += g[i * cols + c + j];
        }
      }
      c += p.cols;
    }
  });
}

/**
 * `X = (I + A)^-1 B` for a strictly lower-triangular `A` `[n, n]` (its diagonal and upper part are
 * ignored and get zero gradient) and `B` `[n, m]`: one forward substitution.
 */
export function solveUnitLower(a: Node, b: Node): Node {
  const n = a.rows, m = b.cols;
  if (a.cols !== n || b.rows !== n) {
    throw new RangeError(`solveUnitLower: A [${a.rows}, ${a.cols}], B [${b.rows}, ${b.cols}]`);
  }
  const A = a.value;
  const x = b.value.slice();
  for (let i = 0; i < n; i++) {
    for (let p = 0; p < i; p++) {
      const aip = A[i * n + p];
      if (aip === 0) continue;
      for (let j = 0; j < m; j++) x[i * m + j] -= aip * x[p * m + j];
    }
  }
  return a.tape.op(n, m, x, [a, b], (out) => {
    // dB = (I + A)^-T dX (back substitution), dA = -strictly_lower(dB X^T)
    const dB = out.grad!.slice();
    for (let i = n - 1; i >= 0; i--) {
      for (let p = i + 1; p < n; p++) {
        const api = A[p * n + i];
        if (api === 0) continue;
        for (let j = 0; j < m; j++) dB[i * m + j] -= api * dB[p * m + j];
      }
    }
    accumulate(b, dB);
    if (a.needsGrad) {
      const gA = a.gradBuffer();
      for (let i = 0; i < n; i++) {
        for (let p = 0; p < i; p++) {
          let s = 0;
          for (let j = 0; j < m; j++) s += dB[i * m + j] * x[p * m + j];
          gA[i * n + p] -= s;
        }
      }
    }
  });
}

/**
 * Largest eigenvalue and its unit eigenvector of a symmetric `[n, n]` matrix (row-major): closed
 * form for `n <= 2`, cyclic Jacobi otherwise.
 */
export function symmetricTopEigen(g: Float64Array, n: number): { value: number; vector: Float64Array } {
  if (n === 1) return { value: g[0], vector: Float64Array.of(1) };
  if (n === 2) {
    const a = g[0], b = 0.5 * (g[1] + g[2]), d = g[3];
    const half = 0.5 * (a - d);
    const r = Math.hypot(half, b);
    const value = 0.5 * (a + d) + r;
    // eigenvector of [[a, b], [b, d]] for value: pick the better-conditioned of two forms
    let v0: number, v1: number;
    if (half >= 0) {
      v0 = half + r;
      v1 = b;
    } else {
      v0 = b;
      v1 = r - half;
    }
    const norm = Math.hypot(v0, v1);
    return norm === 0
      ? { value, vector: Float64Array.of(1, 0) }
      : { value, vector: Float64Array.of(v0 / norm, v1 / norm) };
  }
  const a = g.slice();
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < i; j++) a[i * n + j] = a[j * n + i] = 0.5 * (a[i * n + j] + a[j * n + i]);
  }
  const v = new Float64Array(n * n);
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    let total = 0;
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        total += a[i * n + j] ** 2;
        if (i !== j) off += a[i * n + j] ** 2;
      }
    }
    if (off <= 1e-32 * total || off === 0) break;
    for (let p = 0; p < n; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = a[p * n + q];
        if (apq === 0) continue;
        const theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1), s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  let best = 0;
  for (let i = 1; i < n; i++) if (a[i * n + i] > a[best * n + best]) best = i;
  const vector = new Float64Array(n);
  for (let k = 0; k < n; k++) vector[k] = v[k * n + best];
  return { value: a[best * n + best], vector };
}

/**
 * Largest eigenvalue `[1, 1]` of a symmetric `[n, n]` matrix; its gradient is `u u^T` with `u` the
 * top unit eigenvector (not differentiable where the two largest eigenvalues tie).
 */
export function topEigenvalue(g: Node): Node {
  const n = g.rows;
  if (g.cols !== n) throw new RangeError(`topEigenvalue: matrix is [${g.rows}, ${g.cols}], expected square`);
  const { value, vector } = symmetricTopEigen(g.value, n);
  return g.tape.op(1, 1, Float64Array.of(value), [g], (out) => {
    const s = out.grad![0];
    const gg = g.gradBuffer();
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) gg[i * n + j] += s * vector[i] * vector[j];
  });
}
