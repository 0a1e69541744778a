"""The fast forms against the recurrent form, float64 on CPU, forward and autograd gradients:

- the chunk-parallel form (falcon_chunked.py) of every rule, both alignments, sequence starts
  (packing), with and without S0, the clamp active at some steps, several chunk sizes (one chunk,
  chunks shorter than the window), outputs and final state, gradients of q, k, v, beta, lambdabar, S0;
- every fla mapping (falcon_fla.py) through fla's semantics in plain PyTorch (falcon_fla.NAIVE_OPS),
  the same cases without S0 (the model's S0 is zero; the fla forms do not take one);
- FalconLM in the chunked form against the recurrent form, logits and parameter gradients.

Run: python3 interop/torch/test_forms.py   (exits 1 on any failure)
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_chunked as fc  # noqa: E402
import falcon_fla as ff  # noqa: E402
import falcon_torch as ft  # noqa: E402

D = torch.float64
TOL = 1e-10  # relative L2, float64 (SPEC section 4: the forms agree to about 1e-10)
B, H, T, DK, DV = 2, 2, 17, 5, 4


def rel_l2(got, want):
    num = torch.linalg.norm((got - want).reshape(-1)).item()
    den = torch.linalg.norm(want.reshape(-1)).item()
    return num / den if den > 0 else num


def inputs(rule, seed, with_s0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=D).requires_grad_()  # noqa: E731
    per_column = ft.is_per_column_rule(rule)
    beta = (torch.rand((B, H, T, DV) if per_column else (B, H, T), generator=g, dtype=D) * 1.9 + 0.05)
    # lambdabar up to 3: with coupling alpha_raw = eta * lambda reaches ~1.4, so the clamp binds at some steps
    lam = torch.rand(B, H, T, generator=g, dtype=D) * 3
    S0 = (torch.randn(B, H, DK, DV, generator=g, dtype=D) * 0.3).requires_grad_() if with_s0 else None
    starts = torch.zeros(B, 1, T, dtype=torch.bool)
    starts[0, 0, 6] = True  # a second sequence in row 0
    starts[1, 0, 8] = True  # a one-position sequence at 8, another from 9 in row 1
    starts[1, 0, 9] = True
    weights = torch.randn(B, H, T, DV, generator=g, dtype=D), torch.randn(B, H, DK, DV, generator=g, dtype=D)
    return r(B, H, T, DK), r(B, H, T, DK), r(B, H, T, DV), beta.requires_grad_(), lam.requires_grad_(), S0, starts, weights


def options(alignment, starts):
    g = torch.tensor([[ft.retnet_decay(h) for h in range(H)]], dtype=D)
    return dict(alignment=alignment, retnet_g=g, mamba_A=0.7, window=3, starts=starts)


def gradients(value, tensors):
    present = [t for t in tensors if t is not None]
    grads = torch.autograd.grad(value, present, allow_unused=True)
    return [torch.zeros_like(t) if gr is None else gr for t, gr in zip(present, grads)]


def compare(name, ref, got, ref_grads, got_grads):
    errors = [rel_l2(g, r) for g, r in zip(got, ref)]
    errors += [rel_l2(g, r) for g, r in zip(got_grads, ref_grads)]
    worst = max(errors)
    nonzero = all(torch.linalg.norm(r).item() > 0 for r in ref_grads[:3])
    return worst <= TOL and nonzero, worst, name


def check_chunked():
    results = []
    for rule in ft.RULES:
        for alignment in ft.ALIGNMENTS:
            for with_s0 in (False, True):
                q, k, v, beta, lam, S0, starts, (wo, ws) = inputs(rule, 100 + len(results), with_s0)
                tensors = [q, k, v, beta, lam, S0]
                kw = options(alignment, starts)
                o, carry = ft.fast_weight_recurrent(rule, q, k, v, beta, lam, S0=S0, **kw)
                ref_grads = gradients((o * wo).sum() + (carry["S"] * ws).sum(), tensors)
                for chunk in (2, 5, 64):
                    oc, Sc = fc.fast_weight_chunked(rule, q, k, v, beta, lam, S0=S0, chunk=chunk, **kw)
                    got_grads = gradients((oc * wo).sum() + (Sc * ws).sum(), tensors)
                    name = "%s %s S0=%s C=%d" % (rule, alignment, with_s0, chunk)
                    results.append(compare(name, [o, carry["S"]], [oc, Sc], ref_grads, got_grads))
    return summarise("chunked form == recurrent form (o, S_final, grads of q k v beta lambdabar S0)", results)


def check_fla_mappings():
    results = []
    for rule in ff.FLA_OPS:
        for alignment in ft.ALIGNMENTS:
            q, k, v, beta, lam, _, starts, (wo, _) = inputs(rule, 300 + len(results), False)
            tensors = [q, k, v, beta, lam]
            kw = options(alignment, starts)
            o, _ = ft.fast_weight_recurrent(rule, q, k, v, beta, lam, **kw)
            ref_grads = gradients((o * wo).sum(), tensors)
            of = ff.fast_weight_fla(rule, q, k, v, beta, lam, ops=ff.NAIVE_OPS, **kw)
            got_grads = gradients((of * wo).sum(), tensors)
            results.append(compare("%s %s via %s" % (rule, alignment, ff.FLA_OPS[rule]), [o], [of], ref_grads,
                                   got_grads))
    return summarise("fla mappings (fla's semantics in PyTorch) == recurrent form (o, grads)", results)


def check_rule_split():
    """Every rule has exactly one fast path: an fla op or the chunked form only."""
    chunked_only = [r for r in ft.RULES if r not in ff.FLA_OPS]
    ok = set(ff.FLA_OPS) <= set(ft.RULES) and chunked_only == ["falcon2", "falcon3", "falcon2a", "falcon3a"]
    return [(ok, "fla ops for %s; chunked only: %s" % (", ".join(ff.FLA_OPS), ", ".join(chunked_only)))]


def tiny_config(rule, alignment):
    return {
        "vocab_size": 11, "hidden_size": 8, "num_hidden_layers": 2, "num_heads": 2, "intermediate_size": 16,
        "rule": rule, "alignment": alignment, "qk_norm": "l2" if rule in ("deltanet", "gated_deltanet") else "rms",
        "use_short_conv": True, "use_output_gate": True, "parameterisation": "token", "beta_max": 2.0,
        "window": 3, "tie_word_embeddings": True, "rope_theta": 10000.0, "chunk_size": 4,
    }


def check_model():
    results = []
    g = torch.Generator().manual_seed(9)
    ids = torch.randint(0, 11, (2, 10), generator=g)
    starts = torch.zeros(2, 10, dtype=torch.bool)
    starts[1, 4] = True
    for i, rule in enumerate(ft.RULES):
        alignment = ft.ALIGNMENTS[i % 2]
        torch.manual_seed(i)
        model = ft.FalconLM(tiny_config(rule, alignment)).to(D)
        with torch.no_grad():  # move every parameter off its initial value (biases, norms, constants)
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=g, dtype=D) * 0.3)
        grads = {}
        logits = {}
        for form in ("recurrent", "chunked"):
            model.set_form(form)
            out = model(ids, starts)
            params = list(model.parameters())
            grads[form] = torch.autograd.grad((out * out).sum(), params)
            logits[form] = out
        results.append(compare("%s %s" % (rule, alignment), [logits["recurrent"]], [logits["chunked"]],
                               grads["recurrent"], grads["chunked"]))
    return summarise("FalconLM chunked == recurrent (logits, every parameter's gradient)", results)


def summarise(title, results):
    worst = max(r[1] for r in results)
    failed = [r[2] + " (%.3e)" % r[1] for r in results if not r[0]]
    msg = "%s: %d cases, worst rel L2 %.3e" % (title, len(results), worst)
    if failed:
        msg += "; failing: " + "; ".join(failed)
    return [(not failed, msg)]


def main():
    results = check_chunked() + check_fla_mappings() + check_rule_split() + check_model()
    failed = 0
    for ok, msg in results:
        print(("ok   " if ok else "FAIL ") + msg)
        failed += 0 if ok else 1
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
