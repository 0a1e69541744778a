#!/usr/bin/env python3
"""PyTorch eager peer of the chunked Falcon kernels, for the benchmarks (`deno task bench`, `bench:gpu`).

The same chunk-parallel algorithm as SPEC section 4, written in plain PyTorch (float32, autograd for
the backward), prefix alignment, QK-RMSNorm, coupled ridge, positive-decay clamp, one sequence per
row (no packing):

- falcon1: delta rule over pseudo-values; per chunk A = strictly_lower(diag(eta)(X X^T * Gp)),
  (I + A)^-1 for all chunks at once (one batched triangular solve), then a sequential pass over
  chunks with matrix products only.
- falcon3a: additive window rule, written as the window expansion (B shifted copies of the pairs,
  each an additive rule with the same decays and gains g_s = eta_s / B_s).

Prints one JSON line per measurement: {"rule", "device", "threads", "tokens_per_s_fwd",
"tokens_per_s_fwdbwd", ...}. Usage:
  python3 bench/torch_peer.py --device cpu --threads 1 --B 1 --T 2048 --H 4 --d 64
  python3 bench/torch_peer.py --device cuda --B 8 --T 4096 --H 8 --d 64
"""

import argparse
import json
import time

import torch

EPS, EPS_GAMMA, EPS_RMS = 1e-6, 1e-3, 1e-6


def rms(u):
    return u / torch.sqrt((u * u).mean(-1, keepdim=True) + EPS_RMS)


def shift(x, o):
    """x shifted o positions later along T (zeros enter at the start)."""
    if o == 0:
        return x
    return torch.cat([torch.zeros_like(x[:, :, :o]), x[:, :, :-o]], dim=2)


def decays(lg, C):
    """Chunked log-decay ratios. lg: [B,H,N,C] -> Gam, Gp [B,H,N,C,C], c, cp [B,H,N,C]."""
    cs = lg.cumsum(-1)
    diff = cs.unsqueeze(-1) - cs.unsqueeze(-2)  # cs_t - cs_s
    lower = torch.ones(C, C, dtype=torch.bool, device=lg.device).tril()
    strict = lower.clone().fill_diagonal_(False)
    gam = torch.where(lower, diff, torch.full_like(diff, -float("inf"))).exp()
    diff_p = diff - lg.unsqueeze(-1)  # cs_{t-1} - cs_s
    gp = torch.where(strict, diff_p, torch.full_like(diff_p, -float("inf"))).exp()
    return gam, gp, cs.exp(), (cs - lg).exp()


def coefficients(stat, beta, lbar):
    """eta, log gamma of the Falcon rules from the live statistic (coupled ridge, clamp)."""
    lam = lbar * stat.detach()
    eta = torch.where(stat > 0, beta / (stat + lam + EPS), torch.zeros_like(stat))
    alpha_raw = eta * lam
    clamped = alpha_raw >= 1 - EPS_GAMMA
    lg = torch.where(clamped, torch.full_like(stat, torch.log(torch.tensor(EPS_GAMMA)).item()),
                     torch.log1p(-torch.clamp(alpha_raw, max=1 - EPS_GAMMA)))
    return eta, lg


def falcon1_chunk(q, k, v, beta, lbar, C):
    Bn, H, T, d = q.shape
    q, k = rms(q), rms(k)
    x = shift(k, 1)  # prefix alignment: x_t = phi(k_{t-1}), x_1 = 0 (sentinel)
    E = (x * x).sum(-1)
    eta, lg = coefficients(E, beta, lbar)
    N = T // C
    dv = v.shape[-1]
    X, Q = x.reshape(Bn, H, N, C, d), q.reshape(Bn, H, N, C, d)
    Y = v.reshape(Bn, H, N, C, dv)
    eta, lg = eta.reshape(Bn, H, N, C), lg.reshape(Bn, H, N, C)
    gam, gp, c, cp = decays(lg, C)
    A = (eta.unsqueeze(-1) * (X @ X.transpose(-1, -2)) * gp)
    eye = torch.eye(C, device=q.device, dtype=q.dtype)
    Tinv = torch.linalg.solve_triangular(eye + A, eye.expand_as(A), upper=False)
    U = Tinv @ (eta.unsqueeze(-1) * Y)
    Wk = Tinv @ ((eta * cp).unsqueeze(-1) * X)
    QX = (Q @ X.transpose(-1, -2)) * gam
    S = torch.zeros(Bn, H, d, dv, device=q.device, dtype=q.dtype)
    outs = []
    for n in range(N):
        W = U[:, :, n] - Wk[:, :, n] @ S
        outs.append(c[:, :, n].unsqueeze(-1) * (Q[:, :, n] @ S) + QX[:, :, n] @ W)
        S = c[:, :, n, -1, None, None] * S + X[:, :, n].transpose(-1, -2) @ (gam[:, :, n, -1].unsqueeze(-1) * W)
    return torch.stack(outs, 2).reshape(Bn, H, T, dv)


def falcon3a_chunk(q, k, v, beta, lbar, C, window=4):
    Bn, H, T, d = q.shape
    q, k = rms(q), rms(k)
    x = shift(k, 1)
    # window statistics: B_t real pairs among positions t-B+1..t (prefix: position 1 holds none)
    sq = (x * x).sum(-1)
    pos = torch.arange(T, device=q.device)
    count = torch.clamp(pos, max=window).to(q.dtype)  # pairs j >= 2 (0-based j >= 1) inside the window
    csq = torch.cat([torch.zeros_like(sq[..., :1]), sq.cumsum(-1)], -1)
    lo = torch.clamp(pos - window + 1, min=0)
    ebar = (csq[..., pos + 1] - csq[..., lo]) / torch.clamp(count, min=1)
    eta, lg = coefficients(ebar, beta, lbar)
    g = eta / torch.clamp(count, min=1)
    N = T // C
    Q = q.reshape(Bn, H, N, C, d)
    gc, lg = g.reshape(Bn, H, N, C), lg.reshape(Bn, H, N, C)
    gam, _, c, _ = decays(lg, C)
    M = gam * gc.unsqueeze(-2)  # M[t, s] = Gam[t, s] g_s
    last = gam[:, :, :, -1] * gc  # Gam[e, s] g_s
    intra = 0
    writes = []
    for o in range(window):
        Xo = shift(x, o).reshape(Bn, H, N, C, d)
        Yo = shift(v, o).reshape(Bn, H, N, C, v.shape[-1])
        intra = intra + ((Q @ Xo.transpose(-1, -2)) * M) @ Yo
        writes.append(Xo.transpose(-1, -2) @ (last.unsqueeze(-1) * Yo))
    dS = sum(writes)  # [B,H,N,dk,dv] state written inside each chunk
    S = torch.zeros(Bn, H, d, v.shape[-1], device=q.device, dtype=q.dtype)
    outs = []
    for n in range(N):
        outs.append(c[:, :, n].unsqueeze(-1) * (Q[:, :, n] @ S) + intra[:, :, n])
        S = c[:, :, n, -1, None, None] * S + dS[:, :, n]
    return torch.stack(outs, 2).reshape(Bn, H, T, v.shape[-1])


RULES = {"falcon1": falcon1_chunk, "falcon3a": falcon3a_chunk}


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def measure(rule, device, Bn, T, H, d, C, reps):
    torch.manual_seed(0)
    mk = lambda *s: torch.randn(*s, device=device, dtype=torch.float32, requires_grad=True)
    q, k, v = mk(Bn, H, T, d), mk(Bn, H, T, d), mk(Bn, H, T, d)
    beta = (torch.rand(Bn, H, T, device=device) * 1.8 + 0.1).requires_grad_()
    lbar = (torch.rand(Bn, H, T, device=device) * 0.5).requires_grad_()
    fn = RULES[rule]
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
