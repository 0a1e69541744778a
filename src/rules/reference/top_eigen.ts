/**
 * The largest eigenvalue and its unit eigenvector of a small symmetric matrix (Falcon-3's window
 * Gram matrix, SPEC section 3): closed form for `n <= 2`, cyclic Jacobi rotations otherwise.
 *
 * @module
 */

/** The top eigenpair of a symmetric matrix. */
export interface TopEigenpair {
  /** Largest eigenvalue. */
  value: number;
  /** Its eigenvector, unit length, `[n]`. */
  vector: Float64Array;
}

/** Most Jacobi sweeps before giving up (convergence is quadratic: a handful suffice). */
const MAX_SWEEPS = 64;

/** An off-diagonal entry this small against its diagonal pair moves eigenvalues by far below 1 ulp. */
const NEGLIGIBLE = 1e-20;

/**
 * Top eigenpair of the symmetric `n x n` row-major matrix `a` (only symmetric input is valid;
 * the upper triangle is read). Closed form for `n <= 2`, Jacobi for larger `n`.
 */
export function topEigenpair(a: Float64Array, n: number): TopEigenpair {
  if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`matrix size must be an integer >= 1, got ${n}`);
  if (a.length !== n * n) throw new RangeError(`matrix has ${a.length} entries, expected ${n}x${n}`);
  if (n === 1) return { value: a[0], vector: Float64Array.of(1) };
  if (n === 2) return topEigenpair2(a[0], a[1], a[3]);
  return topEigenpairJacobi(a, n);
}

/** Closed form for `[[p, r], [r, s]]`: `(p+s)/2 + hypot((p-s)/2, r)`. */
export function topEigenpair2(p: number, r: number, s: number): TopEigenpair {
  const value = (p + s) / 2 + Math.hypot((p - s) / 2, r);
  // (A - value I) u = 0; pick the row whose solution is well conditioned.
  let u0: number;
  let u1: number;
  if (p >= s) {
    u0 = value - s;
    u1 = r;
  } else {
    u0 = r;
    u1 = value - p;
  }
  const len = Math.hypot(u0, u1);
  if (len === 0) return { value, vector: Float64Array.of(1, 0) }; // a multiple of I: any unit vector
  return { value, vector: Float64Array.of(u0 / len, u1 / len) };
}

/** Cyclic Jacobi eigen-decomposition of a symmetric matrix; returns the top pair. */
export function topEigenpairJacobi(a: Float64Array, n: number): TopEigenpair {
  const m = Float64Array.from(a);
  for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) m[i * n + j] = m[j * n + i];
  const v = new Float64Array(n * n);
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  for (let sweep = 0; sweep < MAX_SWEEPS && !isDiagonal(m, n); sweep++) {
    for (let p = 0; p < n - 1; p++) {
      for (let q = p + 1; q < n; q++) rotate(m, v, n, p, q);
    }
  }
  let top = 0;
  for (let i = 1; i < n; i++) if (m[i * n + i] > m[top * n + top]) top = i;
  const vector = new Float64Array(n);
  for (let i = 0; i < n; i++) vector[i] = v[i * n + top];
  return { value: m[top * n + top], vector };
}

function isDiagonal(m: Float64Array, n: number): boolean {
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (m[i * n + j] !== 0) return false;
  return true;
}

/**
 * One Jacobi rotation zeroing `m[p][q]` (set exactly to 0, as is an entry already negligible
 * against its diagonal); accumulates the rotation into the columns of `v`.
 */
function rotate(m: Float64Array, v: Float64Array, n: number, p: number, q: number): void {
  const apq = m[p * n + q];
  const app = m[p * n + p];
  const aqq = m[q * n + q];
  if (Math.abs(apq) <= NEGLIGIBLE * (Math.abs(app) + Math.abs(aqq))) {
    m[p * n + q] = m[q * n + p] = 0;
    return;
  }
  const theta = (aqq - app) / (2 * apq);
  const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
  const c = 1 / Math.sqrt(t * t + 1);
  const s = t * c;
  for (let k = 0; k < n; k++) {
    const mkp = m[k * n + p];
    const mkq = m[k * n + q];
    m[k * n + p] = c * mkp - s * mkq;
    m[k * n + q] = s * mkp + c * mkq;
  }
  for (let k = 0; k < n; k++) {
    const mpk = m[p * n + k];
    const mqk = m[q * n + k];
    m[p * n + k] = c * mpk - s * mqk;
    m[q * n + k] = s * mpk + c * mqk;
  }
  for (let k = 0; k < n; k++) {
    const vkp = v[k * n + p];
    const vkq = v[k * n + q];
    v[k * n + p] = c * vkp - s * vkq;
    v[k * n + q] = s * vkp + c * vkq;
  }
  m[p * n + q] = m[q * n + p] = 0;
}
