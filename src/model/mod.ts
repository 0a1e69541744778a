/**
 * The `FalconLM` language model (SPEC section 7): configuration, parameters and the model.
 *
 * @module
 */

export * from "./types.ts";
export { defaultFfnHidden, headDim, MIXERS, modelConfig, validateModelConfig } from "./config.ts";
export {
  parameterCount,
  parameterSpecs,
  type ParamInit,
  type ParamSpec,
  SHORT_CONV_WIDTH,
} from "./params.ts";
export { type CoefficientPlan, coefficientPlan, type CoefficientStream } from "./coefficients.ts";
export { createModel, FalconLM, type ModelOptions } from "./falcon_lm.ts";
export { modelRuleConfig } from "./fast_weight_mixer.ts";
