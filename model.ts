/**
 * `@falcon/falcon/model`: the `FalconLM` language model of SPEC section 7 on its own: configs,
 * parameter layout, the per-rule coefficient plan and {@linkcode createModel}, with the rules and the
 * kernel interface its API names (the `./rules` entry point). The root module (`@falcon/falcon`) exports all of this too.
 *
 * @example Build a tiny transformer on the reference backend and score three tokens
 * ```ts
 * import { createModel, modelConfig } from "./model.ts";
 * import { createRefBackend } from "./src/rules/mod.ts";
 *
 * const config = modelConfig({ mixer: "falcon1", vocabSize: 5, dModel: 8, heads: 2, layers: 1 });
 * const model = createModel(createRefBackend(), config, 1);
 * const logits = await model.logits({ B: 1, T: 3, ids: Int32Array.from([0, 1, 2]), starts: new Uint8Array(3) });
 * if (logits.length !== 3 * 5) throw new Error("expected B*T*V logits");
 * ```
 *
 * @module
 */

export * from "./src/model/mod.ts";
export * from "./src/rules/mod.ts";
