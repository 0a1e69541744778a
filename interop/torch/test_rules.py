"""Every rule of falcon_torch.py against the float64 test vectors of fixtures/vectors/ (outputs o and
S_final, relative L2 <= 1e-10), plus the SPEC properties the vectors do not cover: B = 1 window
rules equal their single-pair rules, continuation equals one run, and a sequence start resets.

Run: python3 interop/torch/test_rules.py   (exits 1 on any failure)
"""

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_torch as ft  # noqa: E402

VECTORS = os.path.join(HERE, "..", "..", "fixtures", "vectors")
TOL = 1e-10
D = torch.float64


def rel_l2(got, want):
    num = torch.linalg.norm((got - want).reshape(-1)).item()
    den = torch.linalg.norm(want.reshape(-1)).item()
    return num / den if den > 0 else num


def run_vector(vec, **overrides):
    p = vec["params"]
    inp = vec["inputs"]
    T = vec["shape"]["T"]
    t = lambda name: torch.tensor(inp[name], dtype=D)  # noqa: E731
    kwargs = dict(
        alignment=vec["alignment"],
        qk_norm=p.get("qk_norm"),
        coupling=p.get("coupling", True),
        window=p.get("B", 4),
        eps=p.get("eps", 1e-6),
        eps_gamma=p.get("eps_gamma", 1e-3),
        eps_rms=p.get("eps_rms", 1e-6),
        mamba_A=p.get("mamba_A", 1.0),
        retnet_g=p.get("retnet_g"),
        S0=t("S0") if "S0" in inp else None,
        starts=torch.tensor(inp["starts"], dtype=torch.bool) if "starts" in inp else None,
    )
    kwargs.update(overrides)
    beta = t("beta") if "beta" in inp else torch.ones(T, dtype=D)
    lam = t("lambdabar") if "lambdabar" in inp else torch.zeros(T, dtype=D)
    return ft.fast_weight_recurrent(vec["rule"], t("q"), t("k"), t("v"), beta, lam, **kwargs)


def check_vector(name):
    with open(os.path.join(VECTORS, name)) as f:
        vec = json.load(f)
    o, carry = run_vector(vec)
    e_o = rel_l2(o, torch.tensor(vec["outputs"]["o"], dtype=D))
    e_s = rel_l2(carry["S"], torch.tensor(vec["outputs"]["S_final"], dtype=D))
    ok = e_o <= TOL and e_s <= TOL
    return ok, "%s: rel L2 o %.3e, S_final %.3e" % (name, e_o, e_s)


def random_inputs(seed, T=23, dk=5, dv=4, per_column=False):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=D)  # noqa: E731
    beta = torch.rand((T, dv) if per_column else (T,), generator=g, dtype=D) * 1.9 + 0.05
    lam = torch.rand(T, generator=g, dtype=D) * 0.5
    return r(T, dk), r(T, dk), r(T, dv), beta, lam


def check_window_one():
    """Falcon-3 with B = 1 is Falcon-1; Falcon-3A with B = 1 is Falcon-1A (SPEC section 3)."""
    worst = 0.0
    for w_rule, rule in (("falcon3", "falcon1"), ("falcon3a", "falcon1a")):
        for alignment in ft.ALIGNMENTS:
            q, k, v, beta, lam = random_inputs(7)
            a, _ = ft.fast_weight_recurrent(w_rule, q, k, v, beta, lam, alignment=alignment, window=1)
            b, _ = ft.fast_weight_recurrent(rule, q, k, v, beta, lam, alignment=alignment)
            worst = max(worst, rel_l2(a, b))
    return worst <= 1e-14, "window B=1 equals the single-pair rule: worst rel L2 %.3e" % worst


def check_continuation():
    """Running 1..T at once equals 1..T1 then T1+1..T from the carry, for every rule."""
    worst = 0.0
    for rule in ft.RULES:
        for alignment in ft.ALIGNMENTS:
            q, k, v, beta, lam = random_inputs(11, per_column=ft.is_per_column_rule(rule))
            kw = dict(alignment=alignment, retnet_g=ft.retnet_decay(1), mamba_A=0.7)
            whole, c_whole = ft.fast_weight_recurrent(rule, q, k, v, beta, lam, **kw)
            T1 = 9
            first, c1 = ft.fast_weight_recurrent(rule, q[:T1], k[:T1], v[:T1], beta[:T1], lam[:T1], **kw)
            second, c2 = ft.fast_weight_recurrent(
                rule, q[T1:], k[T1:], v[T1:], beta[T1:], lam[T1:], carry=c1, **kw
            )
            worst = max(worst, rel_l2(torch.cat([first, second], 0), whole), rel_l2(c2["S"], c_whole["S"]))
    return worst <= 1e-12, "continuation equals one run for every rule: worst rel L2 %.3e" % worst


def check_starts():
    """A start flag in the middle equals two fresh runs, for every rule (packing)."""
    worst = 0.0
    for rule in ft.RULES:
        for alignment in ft.ALIGNMENTS:
            q, k, v, beta, lam = random_inputs(13, per_column=ft.is_per_column_rule(rule))
            S0 = torch.randn(5, 4, generator=torch.Generator().manual_seed(3), dtype=D) * 0.1
            kw = dict(alignment=alignment, retnet_g=ft.retnet_decay(0), S0=S0)
            starts = torch.zeros(q.shape[0], dtype=torch.bool)
            T1 = 10
            starts[T1] = True
            packed, _ = ft.fast_weight_recurrent(rule, q, k, v, beta, lam, starts=starts, **kw)
            a, _ = ft.fast_weight_recurrent(rule, q[:T1], k[:T1], v[:T1], beta[:T1], lam[:T1], **kw)
            b, _ = ft.fast_weight_recurrent(rule, q[T1:], k[T1:], v[T1:], beta[T1:], lam[T1:], **kw)
            worst = max(worst, rel_l2(packed, torch.cat([a, b], 0)))
    return worst <= 1e-14, "a start resets like a fresh run for every rule: worst rel L2 %.3e" % worst


def check_batched():
    """Leading dims [B, H] give the same result as each head alone (per-head constants too)."""
    g = torch.Generator().manual_seed(5)
    B, H, T, dk, dv = 2, 3, 8, 4, 3
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=D) for d in (dk, dk, dv))
    beta = torch.rand(B, H, T, generator=g, dtype=D) + 0.1
    lam = torch.rand(B, H, T, generator=g, dtype=D)
    gs = torch.tensor([ft.retnet_decay(h) for h in range(H)], dtype=D)[None, :]
    starts = torch.zeros(B, 1, T, dtype=torch.bool)
    starts[1, 0, 4] = True
    worst = 0.0
    for rule in ("falcon3", "retnet", "gated_deltanet"):
        o, _ = ft.fast_weight_recurrent(rule, q, k, v, beta, lam, retnet_g=gs, starts=starts)
        for bi in range(B):
            for h in range(H):
                oh, _ = ft.fast_weight_recurrent(
                    rule, q[bi, h], k[bi, h], v[bi, h], beta[bi, h], lam[bi, h],
                    retnet_g=gs[0, h], starts=starts[bi, 0],
                )
                worst = max(worst, rel_l2(o[bi, h], oh))
    return worst <= 1e-14, "batched [B, H] equals per-head runs: worst rel L2 %.3e" % worst


def main():
    with open(os.path.join(VECTORS, "index.json")) as f:
        names = [entry["file"] for entry in json.load(f)]
    results = [check_vector(n) for n in names]
    results += [check_window_one(), check_continuation(), check_starts(), check_batched()]
    failed = 0
    for ok, msg in results:
        print(("ok   " if ok else "FAIL ") + msg)
        failed += 0 if ok else 1
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
