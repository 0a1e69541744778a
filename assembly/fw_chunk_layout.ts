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

function up(x: usize): usize {
  return (x + 15) & ~(<usize> 15);
}

/** Set the offsets for chunks of `c` positions and return the bytes of the work area. */
export function chunkLayout(c: i32, dk: i32, dv: i32): usize {
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
  return o;
}
