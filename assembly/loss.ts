/**
 * Softmax cross-entropy per row of logits `[N, V]`: `losses[n] = weights[n] * (lse_n - logits[n, y_n])`;
 * backward `dLogits += weights[n] * (softmax - onehot)`. Rows of weight 0 are skipped.
 * targets: i32 `[N]`, weights: f32 `[N]`.
 */

function lse(row: usize, V: i32): f64 {
  let m = -Infinity;
  for (let i = 0; i < V; i++) m = Math.max(m, <f64> load<f32>(row + (<usize> i << 2)));
  let s: f64 = 0;
  for (let i = 0; i < V; i++) s += Math.exp(<f64> load<f32>(row + (<usize> i << 2)) - m);
  return m + Math.log(s);
}

/** Forward. */
export function ce_forward_f32(
  losses: usize,
  logits: usize,
  targets: usize,
  weights: usize,
  N: i32,
  V: i32,
): void {
  for (let n = 0; n < N; n++) {
    const wgt = <f64> load<f32>(weights + (<usize> n << 2));
    if (wgt == 0) {
      store<f32>(losses + (<usize> n << 2), 0);
      continue;
    }
    const row = logits + ((<usize> n * <usize> V) << 2);
    const y = load<i32>(targets + (<usize> n << 2));
    store<f32>(
      losses + (<usize> n << 2),
      <f32> (wgt * (lse(row, V) - <f64> load<f32>(row + (<usize> y << 2)))),
    );
  }
}

/** Backward (accumulates). */
export function ce_backward_f32(
  dLogits: usize,
  logits: usize,
  targets: usize,
  weights: usize,
  N: i32,
  V: i32,
): void {
  for (let n = 0; n < N; n++) {
    const wgt = <f64> load<f32>(weights + (<usize> n << 2));
    if (wgt == 0) continue;
    const off = (<usize> n * <usize> V) << 2;
    const row = logits + off;
    const l = lse(row, V);
    const y = load<i32>(targets + (<usize> n << 2));
    for (let i = 0; i < V; i++) {
      const p = Math.exp(<f64> load<f32>(row + (<usize> i << 2)) - l) - (i == y ? 1 : 0);
      const d = dLogits + off + (<usize> i << 2);
      store<f32>(d, load<f32>(d) + <f32> (wgt * p));
    }
  }
}
