#!/usr/bin/env python3
"""PyTorch eager peer of the chunked Falcon kernels, for the benchmarks (`deno task bench`, `bench:gpu`).

The chunk-parallel algorithm of SPEC section 4 in plain PyTorch (autograd for the backward): the
bridge's own implementation, `interop/torch/falcon_chunked.py` (one implementation serves the bridge
and this peer), run on float32 inputs with prefix alignment, QK-RMSNorm, coupled ridge, the
positive-decay clamp and one sequence per row (no packing). Any rule can be timed (`--rules`);
falcon1 is a delta rule over pseudo-values (one batched triangular solve per chunk), falcon3a an
additive window rule (`B = 4` write instances per step, no solve).

Prints one JSON line per measurement: {"rule", "device", "threads", "tokens_per_s_fwd",
"tokens_per_s_fwdbwd", ...}. Usage:
  python3 bench/torch_peer.py --device cpu --threads 1 --B 1 --T 2048 --H 4 --d 64
  python3 bench/torch_peer.py --device cuda --B 8 --T 4096 --H 8 --d 64
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop", "torch"))
import falcon_chunked  # noqa: E402


def chunked(rule):
    """The timed function of `rule`: `(q, k, v, beta, lbar, C) -> o`."""
    def run(q, k, v, beta, lbar, C):
        if rule in ("falcon2", "falcon2a"):
            beta = beta[..., None].expand(beta.shape + (v.shape[-1],))
        return falcon_chunked.fast_weight_chunked(rule, q, k, v, beta, lbar, chunk=C, alignment="prefix",
                                                  window=4)[0]
    return run


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def measure(rule, device, Bn, T, H, d, C, reps):
    torch.manual_seed(0)
    mk = lambda *s: torch.randn(*s, device=device, dtype=torch.float32, requires_grad=True)
    q, k, v = mk(Bn, H, T, d), mk(Bn, H, T, d), mk(Bn, H, T, d)
    beta = (torch.rand(Bn, H, T, device=device) * 1.8 + 0.1).requires_grad_()
    lbar = (torch.rand(Bn, H, T, device=device) * 0.5).requires_grad_()
    fn = chunked(rule)
    with torch.no_grad():
        fn(q, k, v, beta, lbar, C)  # warm-up
    sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(reps):
            fn(q, k, v, beta, lbar, C)
    sync(device)
    fwd = (time.perf_counter() - t0) / reps
    o = fn(q, k, v, beta, lbar, C)
    o.sum().backward()  # warm-up
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        o = fn(q, k, v, beta, lbar, C)
        o.sum().backward()
    sync(device)
    both = (time.perf_counter() - t0) / reps
    tokens = Bn * T
    return {"tokens_per_s_fwd": tokens / fwd, "tokens_per_s_fwdbwd": tokens / both,
            "seconds_fwd": fwd, "seconds_fwdbwd": both}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--rules", default="falcon1,falcon3a")
    p.add_argument("--B", type=int, default=1)
    p.add_argument("--T", type=int, default=2048)
    p.add_argument("--H", type=int, default=4)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--C", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    for rule in a.rules.split(","):
        r = measure(rule, a.device, a.B, a.T, a.H, a.d, a.C, a.reps)
        print(json.dumps({"peer": "pytorch-eager", "torch": torch.__version__, "rule": rule, "device": a.device,
                          "threads": torch.get_num_threads(), "B": a.B, "T": a.T, "H": a.H, "d": a.d, "C": a.C, **r}))


if __name__ == "__main__":
    main()
