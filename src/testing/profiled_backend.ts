/**
 * Per-op profiling of any {@linkcode Backend}: {@linkcode BackendProfiler.wrap} returns the same
 * backend with every method call timed on the host (`performance.now()` around the call) and counted,
 * by op name and, for the dense products and the fast-weight kernels, by shape.
 *
 * What the time means depends on the backend: the CPU backends (`ref`, `wasm`) do their work inside
 * the call (the WASM pool's jobs are synchronous for the caller), so host time is the op's time; a
 * backend that queues work (WebGPU) spends only its encoding time inside the call, and its GPU time
 * needs another source (timestamp queries). The time of a promise-returning method (`read`,
 * `sumSquares`) is its synchronous part, which is all of it on the CPU backends.
 *
 * Beside wall time each call records the process's CPU time (`process.cpuUsage()`: user + system, all
 * threads, the pool's spinning included), which other jobs on a shared machine disturb much less: an op
 * on one thread costs about as much CPU as wall time on an idle core, an op on `n` threads up to `n`
 * times its wall time.
 *
 * FLOPs are counted where they are defined by the op's shapes: `2 M N K` per product, and for the
 * fast-weight kernels the effective count of bench/wasm_bench.ts, `8 Dk Dv` per head-step forward and
 * `16 Dk Dv` backward, whatever the kernel does.
 *
 * @example
 * ```ts
 * import { createRefBackend } from "../rules/reference/backend.ts";
 * import { BackendProfiler } from "./profiled_backend.ts";
 * const profiler = new BackendProfiler();
 * const be = profiler.wrap(createRefBackend());
 * const a = be.fromArray([1, 2, 3, 4], [2, 2]);
 * be.matmul(be.zeros([2, 2]), a, a);
 * const { ops } = profiler.snapshot();
 * if (ops.matmul.calls !== 1 || ops.matmul.flops !== 16) throw new Error("expected one 2x2x2 product");
 * ```
 *
 * @module
 */

import process from "node:process";
import type { Backend, FastWeightInputs, MatmulOptions, Tensor } from "../rules/backend.ts";

/** What one op (or one op at one shape) cost over the profiled span. */
export interface OpTotals {
  /** Calls. */
  calls: number;
  /** Host (wall) milliseconds inside the calls. */
  ms: number;
  /** Process CPU milliseconds (all threads) inside the calls. */
  cpuMs: number;
  /** Floating-point operations by the op's shapes (0 where the profiler counts none). */
  flops: number;
}

/** Totals since the last {@linkcode BackendProfiler.reset}. */
export interface ProfileSnapshot {
  /** Per op name (the Backend method), largest time first. */
  readonly ops: Record<string, OpTotals>;
  /** Per op name and shape, for `matmul` (`matmul MxKxN [transA] [transB]`) and the fast-weight ops. */
  readonly shapes: Record<string, OpTotals>;
}

function last(t: Tensor): number {
  return t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1];
}

/** The shape key and FLOPs of a product `out[M, N] = op(a)[M, K] op(b)[K, N]`. */
function matmulCost(out: Tensor, a: Tensor, options: MatmulOptions = {}): { key: string; flops: number } {
  const M = options.transA ? last(a) : a.size / last(a);
  const K = a.size / Math.max(M, 1);
  const N = out.size / Math.max(M, 1);
  const flags = `${options.transA ? " transA" : ""}${options.transB ? " transB" : ""}`;
  return { key: `matmul ${M}x${K}x${N}${flags}`, flops: 2 * M * N * K };
}

/** The shape key and effective FLOPs of a fast-weight call (`perHeadStep` = 8 forward, 16 backward). */
function fastWeightCost(op: string, inputs: FastWeightInputs, perHeadStep: number) {
  const [B, T, H, dk] = inputs.q.shape;
  const dv = last(inputs.v);
  return { key: `${op} B${B} T${T} H${H} dk${dk} dv${dv}`, flops: perHeadStep * B * T * H * dk * dv };
}

/** The shape key and FLOPs of a call, where the profiler counts them. */
function costOf(op: string, args: unknown[]): { key: string; flops: number } | undefined {
  switch (op) {
    case "matmul":
      return matmulCost(args[0] as Tensor, args[1] as Tensor, args[3] as MatmulOptions | undefined);
    case "fastWeightForward":
      return fastWeightCost(op, args[1] as FastWeightInputs, 8);
    case "fastWeightBackward":
      return fastWeightCost(op, args[1] as FastWeightInputs, 16);
    default:
      return undefined;
  }
}

/** Milliseconds of CPU time (user + system, every thread) this process has used. */
export function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3;
}

function add(table: Map<string, OpTotals>, key: string, ms: number, cpuMs: number, flops: number): void {
  let totals = table.get(key);
  if (!totals) table.set(key, totals = { calls: 0, ms: 0, cpuMs: 0, flops: 0 });
  totals.calls++;
  totals.ms += ms;
  totals.cpuMs += cpuMs;
  totals.flops += flops;
}

function sortedByTime(table: Map<string, OpTotals>): Record<string, OpTotals> {
  const entries = [...table.entries()].sort((x, y) => y[1].ms - x[1].ms);
  return Object.fromEntries(entries.map(([k, v]) => [k, { ...v }]));
}

/** Times every method call of the backends it wraps (see the module doc). */
export class BackendProfiler {
  #ops = new Map<string, OpTotals>();
  #shapes = new Map<string, OpTotals>();

  /**
   * The backend with every method timed; properties (`name`, `dtype`, getters) read through. The
   * wrapped object is the same backend: tensors are interchangeable between the two.
   */
  wrap<B extends Backend>(backend: B): B {
    const timed = new Map<PropertyKey, unknown>();
    return new Proxy(backend, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function" || typeof property !== "string") return value;
        let wrapper = timed.get(property);
        if (!wrapper) {
          wrapper = (...args: unknown[]) => {
            const cpu0 = processCpuMs();
            const t0 = performance.now();
            try {
              return value.apply(target, args);
            } finally {
              const ms = performance.now() - t0;
              const cpuMs = processCpuMs() - cpu0;
              const cost = costOf(property, args);
              add(this.#ops, property, ms, cpuMs, cost?.flops ?? 0);
              if (cost) add(this.#shapes, cost.key, ms, cpuMs, cost.flops);
            }
          };
          timed.set(property, wrapper);
        }
        return wrapper;
      },
    });
  }

  /** Forget every total (e.g. after the warm-up steps). */
  reset(): void {
    this.#ops.clear();
    this.#shapes.clear();
  }

  /** A copy of the totals since the last reset. */
  snapshot(): ProfileSnapshot {
    return { ops: sortedByTime(this.#ops), shapes: sortedByTime(this.#shapes) };
  }
}
