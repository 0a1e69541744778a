/**
 * Benchmark of the WASM CPU backend (`deno task bench`): GEMM GFLOP/s at N = 256 and 1024 on 1 and 2
 * threads; Falcon-1 forward + backward at B = 1, T = 2048, H = 4, dk = dv = 64 (tokens/s and
 * effective GFLOP/s) against the float64 reference; recurrent decoding at d = 64, one position per call,
 * for one head and for a batch of B = 16 x H = 4 heads (head-steps/s, per core).
 * The PyTorch CPU eager peer of the same chunked algorithm (bench/torch_peer.py, float32, C = 64) runs
 * in the same command on 1 and 2 threads, at the same shape, and the report gives WASM / PyTorch
 * ratios (`bench/ensure_torch.sh`, run first by the task, installs Debian's python3-torch when absent;
 * without it the report says why the peer is missing). `FALCON_PYTHON` picks the interpreter.
 * Writes a JSON report (default bench/wasm_bench_report.json; `--out PATH` to change).
 *
 * Effective FLOPs of the fast-weight rule are counted per head-step as `8 dk dv` forward
 * (prediction, update, readout: 2 + 4 + 2) and `16 dk dv` backward, whatever the kernel does.
 *
 * @module
 */

import type { Backend } from "../src/rules/backend.ts";
import { ruleConfig } from "../src/rules/config.ts";
import { createRefBackend } from "../src/rules/reference/backend.ts";
import { Rng } from "../src/testing/compare.ts";
import { createWasmBackend } from "../src/wasm/backend.ts";

/**
 * Median wall time in ms of `fn` over `reps` runs, after warming up for at least 200 ms (so worker
 * threads are up and the code is optimised before anything is timed).
 */
function time(fn: () => void, reps: number): number {
  const warmUntil = performance.now() + 200;
  do fn(); while (performance.now() < warmUntil);
  const ts: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)];
}

async function gemm(threads: number) {
  const be = await createWasmBackend({ threads });
  const rng = new Rng(1);
  const out: Record<string, number> = {};
  try {
    for (const n of [256, 1024]) {
      const a = be.fromArray(rng.normals(n * n), [n, n]);
      const b = be.fromArray(rng.normals(n * n), [n, n]);
      const c = be.zeros([n, n]);
      const ms = time(() => be.matmul(c, a, b), n === 256 ? 20 : 5);
      out[`N${n}`] = (2 * n ** 3) / (ms * 1e6);
    }
  } finally {
    be.close();
  }
  return out;
}

function falconInputs(be: Backend, T: number, H: number, d: number, seed: number) {
  const rng = new Rng(seed);
  const n = T * H;
  return {
    inputs: {
      q: be.fromArray(rng.normals(n * d), [1, T, H, d]),
      k: be.fromArray(rng.normals(n * d), [1, T, H, d]),
      v: be.fromArray(rng.normals(n * d), [1, T, H, d]),
      beta: be.fromArray(rng.uniforms(n, 0.2, 1.8), [1, T, H]),
      lambdabar: be.fromArray(rng.uniforms(n, 0, 0.5), [1, T, H]),
    },
    dO: be.fromArray(rng.normals(n * d), [1, T, H, d]),
  };
}

async function falcon(
  threads: number,
  T: number,
  H: number,
  d: number,
  rule: "falcon1" | "falcon3a" = "falcon1",
) {
  const be = await createWasmBackend({ threads });
  const config = ruleConfig(rule);
  try {
    const { inputs, dO } = falconInputs(be, T, H, d, 2);
    const fwd = time(() => {
      const { o, carry } = be.fastWeightForward(config, inputs, { form: "chunk" });
      for (const t of [o, carry.state, carry.lastKey, carry.windowX, carry.windowY]) be.dispose(t);
    }, 3);
    const both = time(() => {
      const { o, carry } = be.fastWeightForward(config, inputs, { form: "chunk" });
      const g = be.fastWeightBackward(config, inputs, dO, { form: "chunk" });
      for (const t of [o, carry.state, carry.lastKey, carry.windowX, carry.windowY, ...Object.values(g)]) {
        be.dispose(t);
      }
    }, 3);
    const steps = T * H;
    return {
      forwardMs: fwd,
      forwardBackwardMs: both,
      tokensPerSecond: T / (both / 1e3),
      effectiveGflops: (steps * 24 * d * d) / (both * 1e6),
      forwardHeadStepsPerSecond: steps / (fwd / 1e3),
    };
  } finally {
    be.close();
  }
}

function reference(T: number, H: number, d: number) {
  const be = createRefBackend();
  const config = ruleConfig("falcon1");
  const { inputs, dO } = falconInputs(be, T, H, d, 2);
  const both = time(() => {
    be.fastWeightForward(config, inputs, { form: "recurrent" });
    be.fastWeightBackward(config, inputs, dO, { form: "recurrent" });
  }, 1);
  return {
    T,
    forwardBackwardMs: both,
    tokensPerSecond: T / (both / 1e3),
    effectiveGflops: (T * H * 24 * d * d) / (both * 1e6),
  };
}

/**
 * Decoding: one position per call for `B * H` heads at once, each call continuing from the previous
 * carry (so it includes the per-call overhead: argument checks, the parameter block, five output
 * tensors). `B = H = 1` is a single stream; `B = 16, H = 4` is how a server decodes a batch. Head-steps
 * per second per core divide by the thread count.
 */
async function decoding(B: number, H: number, d: number, calls: number, threads: number) {
  const be = await createWasmBackend({ threads });
  const config = ruleConfig("falcon1");
  try {
    const rng = new Rng(3);
    const n = B * H;
    const inputs = {
      q: be.fromArray(rng.normals(n * d), [B, 1, H, d]),
      k: be.fromArray(rng.normals(n * d), [B, 1, H, d]),
      v: be.fromArray(rng.normals(n * d), [B, 1, H, d]),
      beta: be.fromArray(rng.uniforms(n, 0.2, 1.8), [B, 1, H]),
      lambdabar: be.fromArray(rng.uniforms(n, 0, 0.5), [B, 1, H]),
    };
    let { carry } = be.fastWeightForward(config, inputs);
    const ms = time(() => {
      for (let s = 0; s < calls; s++) {
        const out = be.fastWeightForward(config, { ...inputs, carry });
        for (const t of [out.o, carry.state, carry.lastKey, carry.windowX, carry.windowY]) be.dispose(t);
        carry = out.carry;
      }
    }, 5);
    const headSteps = (calls * n) / (ms / 1e3);
    return {
      B,
      H,
      threads,
      microsecondsPerCall: (ms * 1e3) / calls,
      headStepsPerSecond: headSteps,
      headStepsPerSecondPerCore: headSteps / threads,
    };
  } finally {
    be.close();
  }
}

/** One measurement line of bench/torch_peer.py. */
interface PeerLine {
  rule: string;
  threads: number;
  torch: string;
  tokens_per_s_fwd: number;
  tokens_per_s_fwdbwd: number;
}

/** The PyTorch CPU peer at one thread count, or why it could not run. */
async function torchPeer(threads: number, T: number, H: number, d: number): Promise<PeerLine[] | string> {
  // FALCON_PYTHON, else python3 on PATH, else Debian's /usr/bin/python3 (where python3-torch installs)
  const env = Deno.env.get("FALCON_PYTHON");
  const candidates = env ? [env] : ["python3", "/usr/bin/python3"];
  const script = new URL("./torch_peer.py", import.meta.url).pathname;
  const failures: string[] = [];
  for (const python of candidates) {
    try {
      const out = await new Deno.Command(python, {
        args: [
          script,
          "--device",
          "cpu",
          "--threads",
          String(threads),
          "--rules",
          "falcon1,falcon3a",
          "--B",
          "1",
        ]
          .concat(["--T", String(T), "--H", String(H), "--d", String(d), "--C", "64"]),
        stdout: "piped",
        stderr: "piped",
      }).output();
      if (out.success) {
        return new TextDecoder().decode(out.stdout).trim().split("\n").map((l) => JSON.parse(l) as PeerLine);
      }
      failures.push(`${python}: ${new TextDecoder().decode(out.stderr).trim().split("\n").at(-1)}`);
    } catch (err) {
      failures.push(`${python}: ${(err as Error).message}`);
    }
  }
  return `bench/torch_peer.py could not run (${failures.join("; ")})`;
}

/** WASM / PyTorch tokens-per-second ratios of one rule at each thread count. */
function ratios(
  wasm: { wasmThreads1: { tokensPerSecond: number }; wasmThreads2: { tokensPerSecond: number } },
  peer: { threads1: PeerLine[] | string; threads2: PeerLine[] | string },
  rule: string,
) {
  const ratio = (lines: PeerLine[] | string, w: { tokensPerSecond: number }) => {
    const line = typeof lines === "string" ? undefined : lines.find((l) => l.rule === rule);
    return line ? w.tokensPerSecond / line.tokens_per_s_fwdbwd : "peer not measured";
  };
  return {
    threads1: ratio(peer.threads1, wasm.wasmThreads1),
    threads2: ratio(peer.threads2, wasm.wasmThreads2),
  };
}

if (import.meta.main) {
  const outIdx = Deno.args.indexOf("--out");
  const outPath = outIdx >= 0 ? Deno.args[outIdx + 1] : "bench/wasm_bench_report.json";
  const probe = await createWasmBackend({ threads: 1 });
  const flavour = probe.flavour;
  probe.close();
  const report = {
    date: new Date().toISOString(),
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    flavour,
    hardwareConcurrency: navigator.hardwareConcurrency,
    gemmGflops: { threads1: await gemm(1), threads2: await gemm(2) },
    falcon1: {
      shape: { B: 1, T: 2048, H: 4, dk: 64, dv: 64 },
      wasmThreads1: await falcon(1, 2048, 4, 64),
      wasmThreads2: await falcon(2, 2048, 4, 64),
      referenceF64: reference(256, 4, 64),
    },
    falcon3a: {
      shape: { B: 1, T: 2048, H: 4, dk: 64, dv: 64 },
      wasmThreads1: await falcon(1, 2048, 4, 64, "falcon3a"),
      wasmThreads2: await falcon(2, 2048, 4, 64, "falcon3a"),
    },
    decoding: {
      d: 64,
      singleHead: await decoding(1, 1, 64, 2000, 1),
      batched: await decoding(16, 4, 64, 100, 1),
      batchedThreads2: await decoding(16, 4, 64, 100, 2),
    },
    pytorchCpuPeer: {
      threads1: await torchPeer(1, 2048, 4, 64),
      threads2: await torchPeer(2, 2048, 4, 64),
    },
  };
  const peer = report.pytorchCpuPeer;
  const withRatios = {
    ...report,
    wasmOverPytorchFwdBwd: {
      falcon1: ratios(report.falcon1, peer, "falcon1"),
      falcon3a: ratios(report.falcon3a, peer, "falcon3a"),
    },
  };
  console.log(JSON.stringify(withRatios, null, 2));
  await Deno.writeTextFile(outPath, JSON.stringify(withRatios, null, 2) + "\n");
}
