#!/usr/bin/env python3
"""GPU check of the fla mappings (falcon_fla.py) with fla's real kernels, and of the chunked form
in float32 on the GPU: every mapped rule under both alignments, with sequence starts, against the
recurrent form in float64 on the CPU (forward o and the gradients of q, k, v, beta, lambdabar). Prints one
JSON line per case with the relative L2 errors, then a summary; exits 1 if a case is over its bound.

Needs CUDA and fla (`pip install fla_core flash_linear_attention`); not part of CI (the CPU
checks of the same mappings through fla's semantics are test_forms.py). fla inputs are float32
where fla allows it and bfloat16 for `chunk_delta_rule` (fla refuses float32 there); bounds are per
precision (fla's float32 kernels use TF32 dot products: their bound is TF32's). On Hopper with Triton >= 3.4 and < 3.7.1 fla refuses the gated backward (`chunk_o`, fla
issue 640): such a case is reported as refused; `--force-gated` sets
`fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True` so it runs, and its line says `timing_only`
(its gradients are the ones fla warns about; the errors printed show how far off they are).

    python3 interop/torch/test_fla_mappings.py [--force-gated] [--T 150] [--d 64] [--forms fla,chunked]
        [--rules falcon1,deltanet] [--shard I/N]
"""

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_fla as ff  # noqa: E402
import falcon_torch as ft  # noqa: E402

# relative L2 bounds: (forward, gradients). fla's Triton kernels take float32 inputs through TF32 dot
# products (measured on the H200: ~1.5e-3 for every op, the plain linear rule too), so its float32 bound
# is TF32's; the chunked form runs with TF32 off.
BOUNDS = {"fla float32": (5e-3, 1e-2), "fla bfloat16": (3e-2, 6e-2), "chunked float32": (1e-4, 1e-3)}


def rel_l2(got, want):
    got, want = got.double(), want.double()
    den = torch.linalg.norm(want).item()
    return torch.linalg.norm(got - want).item() / den if den > 0 else torch.linalg.norm(got).item()


def case_inputs(rule, B, H, T, d, seed, device):
    g = torch.Generator(device="cpu").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    # per-column rules (falcon2, falcon2a) take one step size per value column
    beta = torch.rand((B, H, T, d) if ft.is_per_column_rule(rule) else (B, H, T), generator=g, dtype=torch.float64)
    if rule in ("falcon1", "falcon1a", "falcon2", "falcon2a"):
        beta = beta * 1.9 + 0.05
    elif rule == "mamba2":
        beta = beta * 0.5 + 0.01  # dt
    else:
        beta = beta * 0.9 + 0.05  # b in (0, 1)
    lam = torch.rand(B, H, T, generator=g, dtype=torch.float64) * 0.5
    starts = torch.zeros(B, 1, T, dtype=torch.bool)
    starts[0, 0, T // 3] = True
    starts[B - 1, 0, T // 2] = True
    tensors = [r(B, H, T, d), r(B, H, T, d), r(B, H, T, d), beta, lam]
    return [t.to(device) for t in tensors], starts.to(device), r(B, H, T, d).to(device)


def run_case(rule, alignment, form, ops, B, H, T, d, seed, device):
    # the float64 recurrent reference runs on the CPU (a Python loop per step: faster there than launching
    # a few kernels per step on the GPU)
    (q, k, v, beta, lam), starts, weight = case_inputs(rule, B, H, T, d, seed, "cpu")
    retnet_g = torch.tensor([[ft.retnet_decay(h) for h in range(H)]], dtype=torch.float64)
    kw = dict(alignment=alignment, retnet_g=retnet_g, mamba_A=1.0, starts=starts)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, beta, lam)]
    o_ref, _ = ft.fast_weight_recurrent(rule, *leaves, **kw)
    ref_grads = [None if g is None else g.to(device) for g in
                 torch.autograd.grad((o_ref * weight).sum(), leaves, allow_unused=True)]
    o_ref = o_ref.to(device)
    q, k, v, beta, lam, weight = (t.to(device) for t in (q, k, v, beta, lam, weight))
    kw = dict(kw, retnet_g=retnet_g.to(device), starts=starts.to(device))
    op = ff.FLA_OPS.get(rule)
    dtype = torch.bfloat16 if form == "fla" and op in ff.HALF_ONLY_OPS else torch.float32
    low = [t.to(torch.float32).clone().requires_grad_() for t in (q, k, v, beta, lam)]
    kw32 = dict(kw, retnet_g=retnet_g.float())
    if form == "fla":
        o = ff.fast_weight_fla(rule, *low, ops=ops, **kw32)
    else:
        o = ft.fast_weight(rule, *low, form="chunked", chunk=64, **kw32)
    grads = torch.autograd.grad((o.float() * weight.float()).sum(), low, allow_unused=True)
    names = ("q", "k", "v", "beta", "lambdabar")
    errors = {"o": rel_l2(o, o_ref)}
    for name, got, want in zip(names, grads, ref_grads):
        if want is not None and torch.linalg.norm(want).item() > 0:
            errors["d" + name] = rel_l2(got if got is not None else torch.zeros_like(want), want)
    precision = "bfloat16" if dtype == torch.bfloat16 else "float32"
    fwd_bound, grad_bound = BOUNDS["%s %s" % (form, precision)]
    worst_grad = max([e for n, e in errors.items() if n != "o"], default=0.0)
    return {
        "rule": rule, "alignment": alignment, "form": form, "op": op if form == "fla" else "chunked",
        "precision": precision, "errors": errors,
        "ok": errors["o"] <= fwd_bound and worst_grad <= grad_bound,
    }


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--force-gated", action="store_true", help="set fla's TRITON_ABOVE_3_7_1 (timing only)")
    p.add_argument("--B", type=int, default=2)
    p.add_argument("--H", type=int, default=2)
    p.add_argument("--T", type=int, default=150)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--forms", default="fla,chunked", help="comma separated: fla, chunked")
    p.add_argument("--rules", default="", help="comma separated rule names (default: every rule)")
    p.add_argument("--shard", default="0/1", help="I/N: run every N-th case from the I-th (parallel processes)")
    args = p.parse_args(argv)
    forms = set(args.forms.split(","))
    rules = set(args.rules.split(",")) if args.rules else None
    shard, shards = (int(x) for x in args.shard.split("/"))
    unknown = (forms - {"fla", "chunked"}) | ((rules or set()) - set(ft.RULES))
    if unknown or not 0 <= shard < shards:
        print("test_fla_mappings: unknown form or rule %s, or bad --shard %s" % (sorted(unknown), args.shard),
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("test_fla_mappings: no CUDA device", file=sys.stderr)
        return 2
    ops = ff.fla_ops()
    if ops is None:
        print("test_fla_mappings: fla is not importable", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.force_gated:
        import fla.ops.common.chunk_o as chunk_o

        chunk_o.TRITON_ABOVE_3_7_1 = True
    import fla

    device = torch.device("cuda")
    failed = 0
    results = []
    cases = [(rule, "fla") for rule in ff.FLA_OPS] + [(rule, "chunked") for rule in ft.RULES]
    for i, (rule, form) in enumerate(cases):
        if form not in forms or (rules is not None and rule not in rules) or i % shards != shard:
            continue
        for alignment in ft.ALIGNMENTS:
            try:
                r = run_case(rule, alignment, form, ops, args.B, args.H, args.T, args.d, 10 + i, device)
            except RuntimeError as err:
                r = {"rule": rule, "alignment": alignment, "form": form, "op": ff.FLA_OPS.get(rule),
                     "refused": str(err)[:300], "ok": False}
            gated = form == "fla" and ff.FLA_OPS[rule] != "chunk_delta_rule"
            r["timing_only"] = bool(args.force_gated and gated)
            r["fla"] = getattr(fla, "__version__", "?")
            print(json.dumps(r), flush=True)
            results.append(r)
            failed += 0 if r["ok"] else 1
    worst = {}
    for r in results:
        for name, e in r.get("errors", {}).items():
            key = "%s %s" % (r["form"], r.get("precision", "?"))
            worst[key] = max(worst.get(key, 0.0), e)
    print(json.dumps({"summary": True, "cases": len(results), "failed": failed, "worst": worst,
                      "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "force_gated": args.force_gated}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
