/**
 * The float64 reference backend: plain, readable, the oracle every fast backend is judged by.
 * It never imports a fast backend.
 *
 * @module
 */

import type { Backend, Tensor } from "../backend.ts";
import { refDenseOps } from "./dense.ts";
import { refFastWeightBackward, refFastWeightForward } from "./fast_weight.ts";
import { refData, RefTensor } from "./tensor.ts";

/** Create the float64 reference backend. */
export function createRefBackend(): Backend {
  return {
    name: "ref",
    queued: false,
    dtype: "f64",
    zeros: (shape) => new RefTensor(shape),
    fromArray: (data, shape) => new RefTensor(shape, Float64Array.from(data)),
    read: (t: Tensor) => Promise.resolve(refData(t).slice()),
    readLater(t: Tensor) {
      const value = refData(t).slice();
      return () => Promise.resolve(value);
    },
    copy(dst, src) {
      const d = refData(dst, "dst");
      const s = refData(src, "src");
      if (d.length !== s.length) throw new RangeError(`copy: sizes differ (${d.length} vs ${s.length})`);
      d.set(s);
    },
    dispose: () => {},
    sync: () => Promise.resolve(),
    fastWeightForward: refFastWeightForward,
    fastWeightBackward: refFastWeightBackward,
    ...refDenseOps,
  };
}
