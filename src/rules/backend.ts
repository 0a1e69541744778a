/**
 * The one kernel interface. The float64 reference (`src/rules/reference/`), the WASM backend
 * (`assembly/` + `src/wasm/`) and the WebGPU backend (`wgpu/`) implement {@linkcode Backend};
 * the model sees nothing else.
 *
 * Shape legend used in every comment: `B` batch rows, `T` positions, `H` heads, `Dk` key size,
 * `Dv` value size, `W` window size of Falcon-3/3A, `N` rows of a dense op, `D` feature size.
 * All tensors are dense and row-major, last index fastest.
 *
 * Conventions (llm.c style):
 * - every op writes into output tensors the caller allocated; nothing is returned but handles;
 * - every `...Backward` ACCUMULATES (`+=`) into its gradient tensors, which the caller zeroes;
 * - host-side integer data (token ids, sequence-start flags, loss weights) is passed as typed arrays.
 *
 * @module
 */

import type { Form, RuleConfig } from "./config.ts";

/** Element type of a backend's tensors. */
export type DType = "f32" | "f64";

/** Name of a backend implementation. */
export type BackendName = "ref" | "wasm" | "webgpu";

/** A backend-owned dense array. Host code reads it only through {@linkcode Backend.read}. */
export interface Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Number of elements (product of `shape`). */
  readonly size: number;
  /** Element type. */
  readonly dtype: DType;
}

/** State carried from one call to the next for exact continuation (SPEC section 2). */
export interface Carry {
  /** Fast-weight state after the last position: `[B, H, Dk, Dv]`. */
  readonly state: Tensor;
  /** Prefix alignment: the last key feature `phi(k_T)` (after q/k normalisation): `[B, H, Dk]`. */
  readonly lastKey: Tensor;
  /** Window rules: the last up to `W-1` write features, oldest first: `[B, H, W-1, Dk]`. */
  readonly windowX: Tensor;
  /** Window rules: the matching targets: `[B, H, W-1, Dv]`. */
  readonly windowY: Tensor;
  /** How many of the `W-1` window slots hold real pairs, per batch row (the newest are last): `[B]`. */
  readonly windowCount: Int32Array;
}

/** Inputs of one fast-weight call. q and k are raw projections: the kernel applies `config.qkNorm`. */
export interface FastWeightInputs {
  /** Queries `[B, T, H, Dk]`. */
  readonly q: Tensor;
  /** Keys `[B, T, H, Dk]`. */
  readonly k: Tensor;
  /** Values (targets) `[B, T, H, Dv]`. */
  readonly v: Tensor;
  /** Plasticity gain `[B, T, H]`, or `[B, T, H, Dv]` for falcon2/falcon2a (dt for mamba2, b for deltanets). */
  readonly beta: Tensor;
  /** Dimensionless ridge `[B, T, H]` (the ridge itself when coupling is off; `-log a` for gated_deltanet). */
  readonly lambdabar: Tensor;
  /** Sequence-start flags `[B, T]` (1 = a new sequence starts here). Position 0 is a start unless `carry` is given. */
  readonly starts?: Uint8Array;
  /** State every sequence starts from `[B, H, Dk, Dv]` (default zero). */
  readonly s0?: Tensor;
  /** Continue from a previous call instead of starting fresh. */
  readonly carry?: Carry;
}

/** Which form runs, and its chunk size. */
export interface FormOptions {
  /** `recurrent` (default), `chunk` or `parallel`. */
  readonly form?: Form;
  /** Chunk size `C` of the chunk-parallel form (default 64). */
  readonly chunkSize?: number;
}

/** Options of a forward call. */
export interface ForwardOptions extends FormOptions {
  /**
   * Keep what the backward of the same inputs would otherwise recompute (the chunk-parallel states and
   * solves), returned as {@linkcode FastWeightOutputs.saved}. A backend that recomputes anyway returns
   * nothing. Default false.
   */
  readonly keepForBackward?: boolean;
}

/** Options of a backward call. */
export interface BackwardOptions extends FormOptions {
  /**
   * What the forward of the same inputs, rule and options kept ({@linkcode FastWeightOutputs.saved}).
   * The backward uses it instead of recomputing, and disposes of it; the inputs must not have changed since
   * that forward.
   */
  readonly saved?: ForwardSaved;
  /**
   * Compute the gradient with respect to `S0` ({@linkcode FastWeightGrads.ds0}). Default true; false skips it
   * (a training step whose `S0` is not a parameter needs none): every other gradient is the same, and the
   * result has no `ds0`.
   */
  readonly s0Grad?: boolean;
}

/** What a forward kept for its backward: opaque, made and read by one backend. */
export interface ForwardSaved {
  /** Free what it holds (a backward given it does so itself; a second call does nothing). */
  dispose(): void;
}

/** Outputs of a forward call. */
export interface FastWeightOutputs {
  /** Readout `o_t = S_t^T phi(q_t)`: `[B, T, H, Dv]`. */
  readonly o: Tensor;
  /** Carry for continuing the sequence in a later call. */
  readonly carry: Carry;
  /** Present when the forward ran with `keepForBackward` and the backend keeps anything. */
  readonly saved?: ForwardSaved;
}

/** Gradients of a backward call with respect to every input (shapes as in {@linkcode FastWeightInputs}). */
export interface FastWeightGrads {
  /** `[B, T, H, Dk]`, with respect to the raw q. */
  readonly dq: Tensor;
  /** `[B, T, H, Dk]`, with respect to the raw k. */
  readonly dk: Tensor;
  /** `[B, T, H, Dv]`. */
  readonly dv: Tensor;
  /** Same shape as `beta`. */
  readonly dbeta: Tensor;
  /** `[B, T, H]`. */
  readonly dlambdabar: Tensor;
  /**
   * `[B, H, Dk, Dv]`: summed over every sequence start that used S0 (also when `s0` was omitted). Present
   * unless the backward ran with {@linkcode BackwardOptions.s0Grad} false, then absent.
   */
  readonly ds0?: Tensor;
  /** `[B, H, Dk, Dv]`: gradient with respect to `carry.state` (zero when no carry was given). */
  readonly dCarryState: Tensor;
}

/**
 * Gradient `name` of a backward's result; a TypeError where it is absent (`ds0` of a backward that ran with
 * {@linkcode BackwardOptions.s0Grad} false).
 */
export function gradOf(grads: FastWeightGrads, name: keyof FastWeightGrads): Tensor {
  const t = grads[name];
  if (t === undefined) throw new TypeError(`the backward returned no ${name} (it ran with s0Grad: false)`);
  return t;
}

/** The fast-weight kernels (SPEC sections 2-6). */
export interface FastWeightOps {
  /** Run a rule forward. */
  fastWeightForward(
    config: RuleConfig,
    inputs: FastWeightInputs,
    options?: ForwardOptions,
  ): FastWeightOutputs;
  /**
   * Gradients of `L = sum(o * dO)` with respect to every input (`S0` unless `options.s0Grad` is false).
   * Recomputes what it needs from the inputs (the chunked form stores only chunk-boundary states), unless
   * `options.saved` holds what the forward kept. Returns freshly allocated tensors.
   */
  fastWeightBackward(
    config: RuleConfig,
    inputs: FastWeightInputs,
    dO: Tensor,
    options?: BackwardOptions,
  ): FastWeightGrads;
}

/** Options of {@linkcode DenseOps.matmul}. */
export interface MatmulOptions {
  /** Use `a^T` (a is stored `[K, M]`). */
  readonly transA?: boolean;
  /** Use `b^T` (b is stored `[N, K]`). */
  readonly transB?: boolean;
  /** Add into `out` instead of overwriting it. */
  readonly accumulate?: boolean;
}

/** Element-wise activations with a backward. */
export type Activation = "sigmoid" | "softplus" | "silu";

/** Hyperparameters of one AdamW step (decoupled weight decay). */
export interface AdamWParams {
  /** Learning rate of this step. */
  readonly lr: number;
  /** First-moment decay. */
  readonly beta1: number;
  /** Second-moment decay. */
  readonly beta2: number;
  /** Denominator stabiliser. */
  readonly eps: number;
  /** Decoupled weight decay (applied as `param *= 1 - lr * weightDecay`). */
  readonly weightDecay: number;
  /** 1-based step number, for bias correction. */
  readonly step: number;
  /** Multiply gradients by this first (gradient-norm clipping). */
  readonly gradScale: number;
}

/**
 * Gradient clipping and the divergence guard of a device-resident training step: an
 * {@linkcode DenseOps.adamw} given a guard takes its clipping factor from statistics that
 * {@linkcode DenseOps.accumulateSum} summed on the device in the same step, so no value has to come
 * back to the host between steps.
 */
export interface StepGuard {
  /** `[2]`: the step's loss sum (`stats[0]`) and sum of squared gradients (`stats[1]`), accumulated this step. */
  readonly stats: Tensor;
  /**
   * `[1]`: the halt flag, sticky across steps. A guarded update whose `stats` are not finite, or that
   * finds the flag set, changes nothing and sets the flag; the caller clears it (`fill(halted, 0)`).
   */
  readonly halted: Tensor;
  /** The gradient norm is `sqrt(stats[1]) * normScale` (e.g. `1 / weight` for a mean loss). */
  readonly normScale: number;
  /** Clip the gradient norm to this (0: no clipping). */
  readonly clipNorm: number;
}

/**
 * The gradient scale a guarded AdamW applies: `gradScale * clipFactor`, where the clipping factor
 * scales a norm above `clipNorm` down to it; `null` (no update) when the step's statistics are not
 * finite or the halt flag is set. Every backend computes this in its own precision.
 */
export function guardedGradScale(
  lossSum: number,
  gradSquares: number,
  halted: number,
  guard: Pick<StepGuard, "normScale" | "clipNorm">,
  gradScale: number,
): number | null {
  if (halted !== 0 || !Number.isFinite(lossSum) || !Number.isFinite(gradSquares)) return null;
  const norm = Math.sqrt(gradSquares) * Math.abs(guard.normScale);
  const clip = guard.clipNorm > 0 && norm > guard.clipNorm ? guard.clipNorm / norm : 1;
  return gradScale * clip;
}

/** One parameter of {@linkcode DenseOps.adamwMany}: its value, gradient, moments and weight decay. */
export interface AdamWSlot {
  /** The parameter, updated in place. */
  readonly param: Tensor;
  /** Its gradient. */
  readonly grad: Tensor;
  /** First moment, updated in place. */
  readonly m: Tensor;
  /** Second moment, updated in place. */
  readonly v: Tensor;
  /** Weight decay applies (false for norms and biases). */
  readonly decay: boolean;
}

/** Dense ops the model needs; every forward has its backward. */
export interface DenseOps {
  /** `out[M, N] (+)= op(a)[M, K] op(b)[K, N]`; leading dimensions are flattened into rows. */
  matmul(out: Tensor, a: Tensor, b: Tensor, options?: MatmulOptions): void;
  /** `out[n, :] = table[ids[n], :]`: out `[N, D]`, table `[V, D]`. */
  embeddingForward(out: Tensor, table: Tensor, ids: Int32Array): void;
  /** `dTable[ids[n], :] += dOut[n, :]`. */
  embeddingBackward(dTable: Tensor, dOut: Tensor, ids: Int32Array): void;
  /** Row-wise RMSNorm over the last dimension `D`: `out = x * rstd * weight`; stores `rstd` `[N]`. */
  rmsNormForward(out: Tensor, rstd: Tensor, x: Tensor, weight: Tensor | null, eps: number): void;
  /** Accumulates into `dx` and `dWeight`. */
  rmsNormBackward(
    dx: Tensor,
    dWeight: Tensor | null,
    dOut: Tensor,
    x: Tensor,
    weight: Tensor | null,
    rstd: Tensor,
  ): void;
  /**
   * `sum = a + b`, then {@linkcode DenseOps.rmsNormForward} of `sum` into `out` and `rstd`: a residual
   * add and the norm after it. Bit for bit `add(sum, a, b)` then `rmsNormForward(out, rstd, sum,
   * weight, eps)`. Optional (fused where a backend has one pass for both, WebGPU):
   * {@linkcode addRmsNormForward} makes the two calls where it is absent.
   */
  addRmsNormForward?(
    sum: Tensor,
    out: Tensor,
    rstd: Tensor,
    a: Tensor,
    b: Tensor,
    weight: Tensor | null,
    eps: number,
  ): void;
  /** `out = silu(gate) * up`. */
  swigluForward(out: Tensor, gate: Tensor, up: Tensor): void;
  /** Accumulates into `dGate`, `dUp`. */
  swigluBackward(dGate: Tensor, dUp: Tensor, dOut: Tensor, gate: Tensor, up: Tensor): void;
  /**
   * A projection followed by SwiGLU: `product = a b` (`matmul` without options), then
   * `out = silu(gate) * up` where `product` is the gate (`role` `"gate"`, `other` the up) or the up
   * (`role` `"up"`, `other` the gate). Bit for bit `matmul` then `swigluForward`. Optional (WebGPU
   * fuses them): callers make the two calls where it is absent.
   */
  matmulSwigluForward?(
    out: Tensor,
    product: Tensor,
    a: Tensor,
    b: Tensor,
    other: Tensor,
    role: "gate" | "up",
  ): void;
  /**
   * SwiGLU backward from the gradient of a projection's input: `d = dOut b^T` (`b` is `[N, K]`, `d`
   * never stored), then `swigluBackward(dGate, dUp, d, gate, up)` (accumulating). Bit for bit a
   * `matmul` with `transB` into a zeroed `d`, then `swigluBackward`. Optional (WebGPU fuses them).
   */
  matmulSwigluBackward?(dGate: Tensor, dUp: Tensor, dOut: Tensor, b: Tensor, gate: Tensor, up: Tensor): void;
  /** `out = scale * f(x)`. */
  activationForward(kind: Activation, out: Tensor, x: Tensor, scale: number): void;
  /**
   * A projection and its activation: `pre = a b` (`matmul` without options) plus `bias` on every row
   * when given, then `out = scale * f(pre)`. Bit for bit `matmul`, the bias as `matmul(pre, ones, bias,
   * { accumulate: true })` with `ones` `[rows, 1]`, then `activationForward`. Optional (WebGPU fuses them).
   */
  matmulActivationForward?(
    out: Tensor,
    pre: Tensor,
    a: Tensor,
    b: Tensor,
    bias: Tensor | null,
    kind: Activation,
    scale: number,
  ): void;
  /** `dx += dOut * scale * f'(x)`. */
  activationBackward(kind: Activation, dx: Tensor, dOut: Tensor, x: Tensor, scale: number): void;
  /** `out = a + b` (same shapes). */
  add(out: Tensor, a: Tensor, b: Tensor): void;
  /** `out = a * b` element-wise. */
  mul(out: Tensor, a: Tensor, b: Tensor): void;
  /** `y += alpha * x`. */
  axpy(y: Tensor, x: Tensor, alpha: number): void;
  /** Set every element to `value`. */
  fill(x: Tensor, value: number): void;
  /**
   * Causal depthwise convolution with kernel width `W`, then SiLU: x, out `[B, T, C]`, weight `[C, W]`.
   * A sequence start cuts the receptive field (no taps reach into the previous sequence).
   */
  shortConvForward(out: Tensor, x: Tensor, weight: Tensor, starts?: Uint8Array): void;
  /** Accumulates into `dx` and `dWeight`. */
  shortConvBackward(
    dx: Tensor,
    dWeight: Tensor,
    dOut: Tensor,
    x: Tensor,
    weight: Tensor,
    starts?: Uint8Array,
  ): void;
  /**
   * Softmax cross-entropy per row: logits `[N, V]`; `losses[n] = weights[n] * -log softmax(logits[n])[targets[n]]`.
   * Rows with weight 0 cost nothing.
   */
  crossEntropyForward(losses: Tensor, logits: Tensor, targets: Int32Array, weights: Float32Array): void;
  /** `dLogits += weights[n] * (softmax - onehot)`. */
  crossEntropyBackward(dLogits: Tensor, logits: Tensor, targets: Int32Array, weights: Float32Array): void;
  /**
   * {@linkcode DenseOps.crossEntropyForward} into `losses` and {@linkcode DenseOps.crossEntropyBackward}
   * into `dLogits` (accumulating) from one softmax per row, bit for bit the two calls. Optional (WebGPU
   * fuses them): {@linkcode crossEntropyForwardBackward} makes the two calls where it is absent.
   */
  crossEntropyForwardBackward?(
    losses: Tensor,
    dLogits: Tensor,
    logits: Tensor,
    targets: Int32Array,
    weights: Float32Array,
  ): void;
  /**
   * Causal softmax attention with RoPE on q and k (Transformer baseline): q, k, v, out `[B, T, H, D]`.
   * Sequence starts cut attention and restart RoPE positions. Stores log-sum-exp `lse` `[B, T, H]`.
   */
  attentionForward(
    out: Tensor,
    lse: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    ropeBase: number,
    starts?: Uint8Array,
  ): void;
  /** Accumulates into `dq`, `dk`, `dv`. */
  attentionBackward(
    dq: Tensor,
    dk: Tensor,
    dv: Tensor,
    dOut: Tensor,
    out: Tensor,
    lse: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    ropeBase: number,
    starts?: Uint8Array,
  ): void;
  /**
   * One AdamW step in place on `param`, `m`, `v`. `decay` false skips weight decay (norms, biases).
   * With a `guard`, gradients are also multiplied by the clipping factor of the step's gradient norm
   * and nothing changes when the step diverged ({@linkcode StepGuard}, {@linkcode guardedGradScale}).
   */
  adamw(
    param: Tensor,
    grad: Tensor,
    m: Tensor,
    v: Tensor,
    params: AdamWParams,
    decay: boolean,
    guard?: StepGuard,
  ): void;
  /**
   * {@linkcode DenseOps.adamw} over several parameters, in the order given, with the same arithmetic
   * per element (the result is bit for bit that of one `adamw` per slot). Optional: a backend that
   * has it may update all of them in one pass (WebGPU, over tensors of one `zerosBlock`); callers loop
   * over `adamw` where it is absent.
   */
  adamwMany?(slots: readonly AdamWSlot[], params: AdamWParams, guard?: StepGuard): void;
  /** Sum of squares of the elements (for gradient-norm clipping); read back to the host. */
  sumSquares(x: Tensor): Promise<number>;
  /**
   * `out[index] += sum over xs of sum(x)`, or of `sum(x^2)` with `squares`, where the data lives (no
   * read back): the statistics of a device-resident training step ({@linkcode StepGuard}). Summed in a
   * fixed order (deterministic), the tensors in the order given.
   */
  accumulateSum(out: Tensor, index: number, xs: readonly Tensor[], squares: boolean): void;
}

/** The optional dense ops that fuse two plain ones (a backend without them is the plain pair). */
export type FusedDenseOp =
  | "addRmsNormForward"
  | "crossEntropyForwardBackward"
  | "matmulSwigluForward"
  | "matmulSwigluBackward"
  | "matmulActivationForward";

/** {@linkcode DenseOps.addRmsNormForward} on `ops`: the fused op where it exists, else `add` then `rmsNormForward`. */
export function addRmsNormForward(
  ops: DenseOps,
  sum: Tensor,
  out: Tensor,
  rstd: Tensor,
  a: Tensor,
  b: Tensor,
  weight: Tensor | null,
  eps: number,
): void {
  if (ops.addRmsNormForward) return ops.addRmsNormForward(sum, out, rstd, a, b, weight, eps);
  ops.add(sum, a, b);
  ops.rmsNormForward(out, rstd, sum, weight, eps);
}

/**
 * {@linkcode DenseOps.crossEntropyForwardBackward} on `ops`: the fused op where it exists, else
 * `crossEntropyForward` then `crossEntropyBackward`.
 */
export function crossEntropyForwardBackward(
  ops: DenseOps,
  losses: Tensor,
  dLogits: Tensor,
  logits: Tensor,
  targets: Int32Array,
  weights: Float32Array,
): void {
  if (ops.crossEntropyForwardBackward) {
    return ops.crossEntropyForwardBackward(losses, dLogits, logits, targets, weights);
  }
  ops.crossEntropyForward(losses, logits, targets, weights);
  ops.crossEntropyBackward(dLogits, logits, targets, weights);
}

/**
 * {@linkcode DenseOps.matmulSwigluForward} on `ops`: the fused op where it exists, else `matmul` then
 * `swigluForward`.
 */
export function matmulSwigluForward(
  ops: DenseOps,
  out: Tensor,
  product: Tensor,
  a: Tensor,
  b: Tensor,
  other: Tensor,
  role: "gate" | "up",
): void {
  if (ops.matmulSwigluForward) return ops.matmulSwigluForward(out, product, a, b, other, role);
  ops.matmul(product, a, b);
  if (role === "gate") ops.swigluForward(out, product, other);
  else ops.swigluForward(out, other, product);
}

/** A complete backend: tensor storage plus every kernel. */
export interface Backend extends FastWeightOps, DenseOps {
  /** Which implementation this is. */
  readonly name: BackendName;
  /**
   * Ops are queued on a device and a read waits for the queue (WebGPU): a caller should record the
   * next work before it awaits a read. False where every op has finished when it returns (CPU).
   */
  readonly queued: boolean;
  /** Element type of its tensors. */
  readonly dtype: DType;
  /** A zero-filled tensor. */
  zeros(shape: readonly number[]): Tensor;
  /**
   * Zero tensors of `shapes` laid out one after another in one block of storage (optional): for tensors
   * that a training step walks together, so that ops over all of them (AdamW over the parameters, the
   * sum of squared gradients, zeroing the gradients) run in one pass where the backend can (WebGPU).
   * Each tensor behaves as one from `zeros`; callers use `zeros` where this is absent.
   */
  zerosBlock?(shapes: readonly (readonly number[])[]): Tensor[];
  /** A tensor holding a copy of `data` (converted to the backend's dtype). */
  fromArray(data: ArrayLike<number>, shape: readonly number[]): Tensor;
  /** Copy a tensor's elements back to the host. */
  read(t: Tensor): Promise<Float32Array | Float64Array>;
  /**
   * A read whose value is taken now (later ops do not change it) but whose transfer waits until the
   * returned function is first called: a queued backend moves every read deferred so far in one
   * transfer then, so a caller can keep recording work and collect several reads with one round trip.
   */
  readLater(t: Tensor): () => Promise<Float32Array | Float64Array>;
  /** Copy `src` into `dst` (same size). */
  copy(dst: Tensor, src: Tensor): void;
  /** Release a tensor's storage (a no-op where garbage collection does it). */
  dispose(t: Tensor): void;
  /** Wait for queued work to finish (GPU); resolves at once on CPU backends. */
  sync(): Promise<void>;
}

/** Number of elements of a shape. */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new RangeError(`invalid dimension ${d} in shape [${shape}]`);
    n *= d;
  }
  return n;
}
