/**
 * `falcon`: the Falcon family of fast-weight attention rules (recurrent, chunk-parallel and
 * masked-parallel forms, forward and backward) with a float64 reference backend.
 *
 * @module
 */

export * from "./src/rules/mod.ts";
