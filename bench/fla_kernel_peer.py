#!/usr/bin/env python3
"""fla kernel peer (issues 14 and 16): fla's chunk ops at the WebGPU bench shape, forward and forward +
backward tokens/s, in float32 and bfloat16, to set beside `bench/gpu_bench.ts` in the same device call.

Ops (the nearest fla op of each falcon rule, interop/torch/falcon_fla.py):
  chunk_gated_delta_rule  falcon1, gated_deltanet
  chunk_simple_gla        falcon1a, mamba2, retnet, linear
  chunk_delta_rule        deltanet (fla takes bf16 / fp16 only: its float32 rows say so)

Inputs follow fla's layout `[B, T, H, D]`: q, k with L2-normalised rows (as the delta rules need), v, a
log-space decay `g = logsigmoid(...)` per head and step, `beta = sigmoid(...)`; `scale = 1` (the SPEC
readout has no query scale). Times are after `--warmup` calls (Triton autotunes each new shape on first
use), the median of `--reps` timed calls, each ending in a device sync.

On Hopper with Triton < 3.7.1 fla refuses the gated ops' backward (fla issue 640); `--force-gated` sets
`fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True` so they run, and their rows are marked `timing_only`.

`--naive` runs fla's semantics in plain PyTorch instead (falcon_fla.NAIVE_OPS, on the CPU): for checking
this script without fla or a GPU, at small shapes; its figures mean nothing.

  python3 bench/fla_kernel_peer.py --shapes 8x4096x8x64,32x128x4x64 --dtypes fp32,bf16 --force-gated

One JSON line per op, dtype, shape and pass.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop", "torch"))
import falcon_fla  # noqa: E402

OPS = ("chunk_gated_delta_rule", "chunk_simple_gla", "chunk_delta_rule")
GATED_OPS = ("chunk_gated_delta_rule", "chunk_simple_gla")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def fail(message):
    print("fla_kernel_peer: " + message, file=sys.stderr)
    sys.exit(2)


def parse_shape(text):
    parts = text.lower().split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        fail("a shape is BxTxHxD with positive integers, got %r" % text)
    return tuple(int(p) for p in parts)


def make_inputs(op, B, T, H, D, dtype, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=torch.float32)

    q = F.normalize(randn(B, T, H, D), dim=-1)
    k = F.normalize(randn(B, T, H, D), dim=-1)
    v = randn(B, T, H, D)
    args = {"q": q, "k": k, "v": v}
    if op in GATED_OPS:
        args["g"] = F.logsigmoid(randn(B, T, H) + 4.0)
    if op != "chunk_simple_gla":
        args["beta"] = torch.sigmoid(randn(B, T, H))
    return {name: t.to(dtype) for name, t in args.items()}


def call(fn, inputs):
    out = fn(**inputs, scale=1.0)
    return out[0] if isinstance(out, tuple) else out


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_pass(fn, inputs, backward, warmup, reps, device):
    def once():
        if backward:
            leaves = {n: t.detach().requires_grad_(n in ("q", "k", "v")) for n, t in inputs.items()}
            o = call(fn, leaves)
            o.backward(torch.ones_like(o))
        else:
            with torch.no_grad():
                call(fn, inputs)

    for _ in range(warmup):
        once()
    sync(device)
    seconds = []
    for _ in range(reps):
        start = time.perf_counter()
        once()
        sync(device)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--shapes", default="8x4096x8x64", help="BxTxHxD, comma separated")
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--passes", default="fwd,fwd+bwd")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force-gated", action="store_true")
    p.add_argument("--naive", action="store_true", help="plain-PyTorch semantics on the CPU (a check, not a peer)")
    args = p.parse_args(argv)

    ops = [o for o in args.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            fail("unknown op %r; expected one of %s" % (o, ", ".join(OPS)))
    dtypes = [d for d in args.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            fail("unknown dtype %r; expected fp32 or bf16" % d)
    passes = [x for x in args.passes.split(",") if x]
    for x in passes:
        if x not in ("fwd", "fwd+bwd"):
            fail("unknown pass %r; expected fwd or fwd+bwd" % x)
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    if args.warmup < 0 or args.reps < 1:
        fail("--warmup must be >= 0 and --reps >= 1")

    if args.naive:
        table, device = falcon_fla.NAIVE_OPS, "cpu"
    else:
        table, device = falcon_fla.fla_ops(), "cuda"
        if table is None:
            fail("fla is not importable or no CUDA device (use --naive for a check)")
        if args.force_gated:
            import fla.ops.common.chunk_o as chunk_o
            chunk_o.TRITON_ABOVE_3_7_1 = True
    refused = (not args.naive) and falcon_fla.gated_backward_refused()

    for op in ops:
        for dtype_name in dtypes:
            for (B, T, H, D) in shapes:
                for pass_name in passes:
                    row = {"op": op, "dtype": dtype_name, "B": B, "T": T, "H": H, "D": D, "pass": pass_name,
                           "naive": args.naive}
                    if op in falcon_fla.HALF_ONLY_OPS and dtype_name == "fp32" and not args.naive:
                        row["skipped"] = "fla takes bf16 / fp16 inputs only"
                    elif op in GATED_OPS and pass_name == "fwd+bwd" and refused:
                        row["skipped"] = "fla refuses the gated backward here (issue 640); --force-gated times it"
                    else:
                        inputs = make_inputs(op, B, T, H, D, DTYPES[dtype_name], device, args.seed)
                        seconds = time_pass(table[op], inputs, pass_name == "fwd+bwd", args.warmup, args.reps,
                                            device)
                        row["seconds"] = seconds
                        row["tokens_per_second"] = B * T / seconds
                        row["timing_only"] = bool(args.force_gated and op in GATED_OPS and not args.naive)
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
