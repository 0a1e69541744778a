/**
 * `falcon`: the Falcon family of fast-weight attention rules.
 *
 * - Rules: Falcon-1/2/3 (regression), Falcon-1A/2A/3A (inner product) and the baselines linear,
 *   RetNet, Mamba-2, DeltaNet and Gated DeltaNet, under `prefix` or `same-step` alignment, in
 *   recurrent, chunk-parallel and masked-parallel form, forward and backward.
 * - One kernel interface ({@linkcode Backend}) with a float64 reference ({@linkcode createRefBackend}).
 * - The `FalconLM` model of SPEC section 7.
 *
 * @example Run Falcon-3A forward on one head and read the outputs
 * ```ts
 * import { createRefBackend, ruleConfig } from "./mod.ts";
 *
 * const backend = createRefBackend();
 * const [B, T, H, D] = [1, 5, 1, 4];
 * const rand = (n: number) => Array.from({ length: n }, (_, i) => Math.sin(i + 1));
 * const out = backend.fastWeightForward(ruleConfig("falcon3a"), {
 *   q: backend.fromArray(rand(B * T * H * D), [B, T, H, D]),
 *   k: backend.fromArray(rand(B * T * H * D).reverse(), [B, T, H, D]),
 *   v: backend.fromArray(rand(B * T * H * D), [B, T, H, D]),
 *   beta: backend.fromArray(new Array(B * T * H).fill(1), [B, T, H]),
 *   lambdabar: backend.fromArray(new Array(B * T * H).fill(0.1), [B, T, H]),
 * });
 * const o = await backend.read(out.o);
 * if (o.length !== B * T * H * D) throw new Error("unexpected output size");
 * ```
 *
 * @module
 */

export * from "./src/rules/mod.ts";
export * from "./src/model/mod.ts";
export { InputError } from "./src/errors.ts";
