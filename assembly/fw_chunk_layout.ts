/**
 * Work area of the chunk-parallel form (fw_chunk.ts) inside a thread's scratch: byte offsets relative
 * to its start, for chunks of at most `C` positions (shapes in the comments; `C` rows, `Dk`/`Dv` wide).
 * The per-column rules (falcon2/falcon2a, fw_chunk_column.ts) run their `C x C` work one value column
 * at a time: W_W, W_DW, W_DR then hold one column (`[C, 1]`), and the arrays after W_V the rest.
 */

// per-position scalars of the chunk
export let W_LC: usize = 0; // f64 [C] cumulative log decay Lc
export let W_DLC: usize = 0; // f64 [C] gradient of Lc
export let W_E: usize = 0; // f64 [C] ||x_t||^2
export let W_GAM: usize = 0; // f32 [C] gamma
export let W_A: usize = 0; // f32 [C] a
export let W_B: usize = 0; // f32 [C] b
export let W_C: usize = 0; // f32 [C] c = exp(Lc)
export let W_ACP: usize = 0; // f32 [C] a * cp (cp_t = c_{t-1}, cp_a = 1)
export let W_GE: usize = 0; // f32 [C] Gam[e, t]
export let W_DA: usize = 0; // f32 [C] da
export let W_DB: usize = 0; // f32 [C] db
export let W_DC: usize = 0; // f32 [C] dc
// [C, C] matrices (row stride C)
export let W_GAMM: usize = 0; // Gam (lower, zero above)
export let W_KXX: usize = 0; // X X^T (strictly lower)
export let W_KQX: usize = 0; // Q X^T (lower)
export let W_MQ: usize = 0; // Kqx * Gam
export let W_AM: usize = 0; // -A = -diag(a) (Kxx * Gp) (strictly lower)
export let W_DMQ: usize = 0; // dMq, then dKqx
export let W_DAM: usize = 0; // dA, then dKxx
export let W_DGAM: usize = 0; // dGam
// rows
export let W_X: usize = 0; // [C, Dk] write features
export let W_XT: usize = 0; // [Dk, C] X^T
export let W_WT: usize = 0; // [Dv, C] W^T
export let W_T1: usize = 0; // [C, Dk] dR S^T
export let W_T2: usize = 0; // [C, Dk] dO S^T
export let W_DX: usize = 0; // [C, Dk]
export let W_DQ: usize = 0; // [C, Dk]
export let W_Y: usize = 0; // [C, Dv] values
export let W_XS: usize = 0; // [C, Dv] X S_a
export let W_W: usize = 0; // [C, Dv] pseudo-values W
export let W_P: usize = 0; // [C, Dv] X dS_e
export let W_DW: usize = 0; // [C, Dv]
export let W_DR: usize = 0; // [C, Dv]
export let W_TMP: usize = 0; // [C, Dv]
// states [Dk, Dv] (transposes [Dv, Dk])
export let W_ST: usize = 0; // S_a^T
export let W_DST: usize = 0; // dS_e^T
export let W_DSIN: usize = 0; // dS_a
export let W_DS: usize = 0; // running dS
export let W_RUN: usize = 0; // running state of the checkpoint pass
// Dv vectors for coefs() / coefGrads()
export let W_V: usize = 0; // 6 x [Dv]
// per-column rules
export let W_CF: usize = 0; // f32 [3, C, Dv] gamma, a, b of every column
export let W_CG: usize = 0; // f32 [3, C, Dv] their gradients
export let W_YC: usize = 0; // f32 [C] values of the current column
export let W_CE: usize = 0; // f32 [Dv] c_e of every column
export let W_XSF: usize = 0; // [C, Dv] X S_a
export let W_QSF: usize = 0; // [C, Dv] Q S_a
export let W_WF: usize = 0; // [C, Dv] W of every column
export let W_GWF: usize = 0; // [C, Dv] Gam[e, :] ⊙ W of every column
export let W_PF: usize = 0; // [C, Dv] X dS_e
export let W_DOC: usize = 0; // [C, Dv] diag(c) dO of every column
export let W_DRF: usize = 0; // [C, Dv] -diag(a cp) dR of every column
export let W_DKQX: usize = 0; // [C, C] dKqx summed over the columns
export let W_DKXX: usize = 0; // [C, C] dKxx summed over the columns
// window rule falcon3a (fw_chunk_window.ts): the segment's pairs, P = C + B - 1 of them at most
export let W_WS: usize = 0; // f64 [8, C] per position: gamma, g, stat, lam, den, eta, clamped, noop
export let W_WI: usize = 0; // i32 [2, C] per position: first pair of the window, window size
export let W_PX: usize = 0; // [P, Dk] pair features
export let W_PXT: usize = 0; // [Dk, P] their transpose
export let W_PY: usize = 0; // [P, Dv] pair targets
export let W_PYT: usize = 0; // [Dv, P] their transpose
export let W_PM: usize = 0; // [C, P] write mask M
export let W_PKQ: usize = 0; // [C, P] Q X^T
export let W_PMQ: usize = 0; // [C, P] Kqx ⊙ M
export let W_PDM: usize = 0; // [C, P] dM
export let W_PDQ: usize = 0; // [C, P] dMq, then dKqx
export let W_PDX: usize = 0; // [P, Dk] pair feature gradients
export let W_PDY: usize = 0; // [P, Dv] pair target gradients
export let W_PP: usize = 0; // [P, Dv] X dS_e, then M[e, :] ⊙ Y
export let W_PR: usize = 0; // f32 [P] running dM row of the reverse recursion

function up(x: usize): usize {
  return (x + 15) & ~(<usize> 15);
}

/**
 * Set the offsets for chunks of `c` positions and return the bytes of the work area (`w`: the window
 * size B of falcon3a, whose arrays of pairs hold `c + w - 1` rows; 1 for the other rules).
 */
export function chunkLayout(c: i32, dk: i32, dv: i32, w: i32): usize {
  const cc = <usize> c;
  const f64v = cc << 3;
  const f32v = cc << 2;
  const mat = (cc * cc) << 2;
  const rk = (cc * <usize> dk) << 2;
  const rv = (cc * <usize> dv) << 2;
  const sd = (<usize> dk * <usize> dv) << 2;
  let o: usize = 0;
  W_LC = o;
  o = up(o + f64v);
  W_DLC = o;
  o = up(o + f64v);
  W_E = o;
  o = up(o + f64v);
  W_GAM = o;
  o = up(o + f32v);
  W_A = o;
  o = up(o + f32v);
  W_B = o;
  o = up(o + f32v);
  W_C = o;
  o = up(o + f32v);
  W_ACP = o;
  o = up(o + f32v);
  W_GE = o;
  o = up(o + f32v);
  W_DA = o;
  o = up(o + f32v);
  W_DB = o;
  o = up(o + f32v);
  W_DC = o;
  o = up(o + f32v);
  W_GAMM = o;
  o = up(o + mat);
  W_KXX = o;
  o = up(o + mat);
  W_KQX = o;
  o = up(o + mat);
  W_MQ = o;
  o = up(o + mat);
  W_AM = o;
  o = up(o + mat);
  W_DMQ = o;
  o = up(o + mat);
  W_DAM = o;
  o = up(o + mat);
  W_DGAM = o;
  o = up(o + mat);
  W_X = o;
  o = up(o + rk);
  W_XT = o;
  o = up(o + rk);
  W_WT = o;
  o = up(o + rv);
  W_T1 = o;
  o = up(o + rk);
  W_T2 = o;
  o = up(o + rk);
  W_DX = o;
  o = up(o + rk);
  W_DQ = o;
  o = up(o + rk);
  W_Y = o;
  o = up(o + rv);
  W_XS = o;
  o = up(o + rv);
  W_W = o;
  o = up(o + rv);
  W_P = o;
  o = up(o + rv);
  W_DW = o;
  o = up(o + rv);
  W_DR = o;
  o = up(o + rv);
  W_TMP = o;
  o = up(o + rv);
  W_ST = o;
  o = up(o + sd);
  W_DST = o;
  o = up(o + sd);
  W_DSIN = o;
  o = up(o + sd);
  W_DS = o;
  o = up(o + sd);
  W_RUN = o;
  o = up(o + sd);
  W_V = o;
  o = up(o + ((6 * <usize> dv) << 2));
  W_CF = o;
  o = up(o + 3 * rv);
  W_CG = o;
  o = up(o + 3 * rv);
  W_YC = o;
  o = up(o + f32v);
  W_CE = o;
  o = up(o + ((<usize> dv) << 2));
  W_XSF = o;
  o = up(o + rv);
  W_QSF = o;
  o = up(o + rv);
  W_WF = o;
  o = up(o + rv);
  W_GWF = o;
  o = up(o + rv);
  W_PF = o;
  o = up(o + rv);
  W_DOC = o;
  o = up(o + rv);
  W_DRF = o;
  o = up(o + rv);
  W_DKQX = o;
  o = up(o + mat);
  W_DKXX = o;
  o = up(o + mat);
  const pn = <usize> (c + (w > 1 ? w : 1) - 1);
  const pm = (cc * pn) << 2;
  W_WS = o;
  o = up(o + 8 * f64v);
  W_WI = o;
  o = up(o + 2 * f32v);
  W_PX = o;
  o = up(o + ((pn * <usize> dk) << 2));
  W_PXT = o;
  o = up(o + ((pn * <usize> dk) << 2));
  W_PY = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_PYT = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_PM = o;
  o = up(o + pm);
  W_PKQ = o;
  o = up(o + pm);
  W_PMQ = o;
  o = up(o + pm);
  W_PDM = o;
  o = up(o + pm);
  W_PDQ = o;
  o = up(o + pm);
  W_PDX = o;
  o = up(o + ((pn * <usize> dk) << 2));
  W_PDY = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_PP = o;
  o = up(o + ((pn * <usize> dv) << 2));
  W_PR = o;
  o = up(o + (pn << 2));
  return o;
}
