"""The rules that map exactly onto an fla (flash-linear-attention) chunk op, the mapping, and a
pure-PyTorch recurrence with fla's documented semantics (its `naive.py` references) so that the
mapping algebra is tested without fla or a GPU.

fla's recurrences (per head; `S` is `[K, V]`, `o_t = scale * S_t^T q_t`, `scale` defaults to
`1/sqrt(K)`: the SPEC readout has none, so every call passes `scale=1.0`; `g` is a log decay):

| fla op | recurrence |
|---|---|
| `chunk_gated_delta_rule(q, k, v, g, beta)` | `S_t = e^{g_t} (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T` |
| `chunk_simple_gla(q, k, v, g)` | `S_t = e^{g_t} S_{t-1} + k_t v_t^T` |
| `chunk_delta_rule(q, k, v, beta)` | `S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T` (bf16 / fp16 only) |

The rules' streams (falcon_chunked.rule_streams: `S_t = gamma_t S_{t-1} - a_t x_t x_t^T S_{t-1} +
b_t x_t y_t^T`, `x` already shifted by one step with a zero sentinel row under prefix alignment):

| rule | op | mapping |
|---|---|---|
| falcon1 | gated delta rule | `k = x`, `g = log gamma`, `beta = eta / gamma`, `v = gamma y` (`a = b = eta`; `gamma >= eps_gamma`) |
| gated_deltanet | gated delta rule | `k = x`, `g = -lambdabar`, `beta = b`, `v = y` |
| falcon1a, mamba2, retnet, linear | simple GLA | `k = x`, `g = log gamma`, `v = b y` |
| deltanet | delta rule | `k = x`, `beta = b`, `v = y` |

falcon2/2a (a decay per value column), falcon3/3a (windows) have no fla op: the chunked form.
A sequence start (packing) becomes a varlen boundary: rows `[B, T]` are flattened to one sequence
of `B*T` positions with `cu_seqlens` at every row start and every flagged start; each segment starts
from `S0` (zeros when None). The no-op steps (sentinel, zero statistic) are `g = 0, beta = 0`.
"""

import torch

import falcon_chunked as fc

# rule -> fla op name; the rules not listed run the chunked form
FLA_OPS = {
    "falcon1": "chunk_gated_delta_rule",
    "gated_deltanet": "chunk_gated_delta_rule",
    "falcon1a": "chunk_simple_gla",
    "mamba2": "chunk_simple_gla",
    "retnet": "chunk_simple_gla",
    "linear": "chunk_simple_gla",
    "deltanet": "chunk_delta_rule",
}
# ops that refuse float32 inputs (fla asserts it)
HALF_ONLY_OPS = ("chunk_delta_rule",)


def fla_ops():
    """fla's chunk ops `{name: function}` when fla imports and CUDA is present, else None."""
    if not torch.cuda.is_available():
        return None
    try:
        from fla.ops.delta_rule import chunk_delta_rule
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        from fla.ops.simple_gla import chunk_simple_gla
    except ImportError:
        return None
    return {
        "chunk_gated_delta_rule": chunk_gated_delta_rule,
        "chunk_simple_gla": chunk_simple_gla,
        "chunk_delta_rule": chunk_delta_rule,
    }


def gated_backward_refused():
    """Whether fla refuses the backward of its gated ops here (Hopper with Triton >= 3.4 and < 3.7.1, fla
    issue 640: `fla.ops.common.chunk_o` raises). Setting `chunk_o.TRITON_ABOVE_3_7_1 = True` lifts it."""
    try:
        import fla.ops.common.chunk_o as chunk_o
    except ImportError:
        return False
    return bool(getattr(chunk_o, "IS_NVIDIA_HOPPER", False) and getattr(chunk_o, "TRITON_ABOVE_3_4_0", False)
                and not getattr(chunk_o, "TRITON_ABOVE_3_7_1", True))


# ---------------------------------------------------------------------------------------------
# fla's semantics in plain PyTorch (its naive recurrences), varlen and initial states included
# ---------------------------------------------------------------------------------------------


def _naive_scan(q, k, v, g, beta, delta, scale, initial_state, output_final_state, cu_seqlens):
    """`[B, T, H, K]` inputs; `g`, `beta` `[B, T, H]` (None: 0 and 1). The state decays by `e^g`,
    then (delta) `v <- beta (v - S^T k)` (else `v <- beta v`), `S += k v^T`, `o = scale S^T q`."""
    Bn, T, H, K = k.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    if cu_seqlens is not None:
        if Bn != 1:
            raise ValueError("with cu_seqlens the batch size must be 1, got %d" % Bn)
        bounds = [int(x) for x in cu_seqlens.tolist()]
    else:
        bounds = None
    rows = []
    finals = []
    for b in range(Bn):
        segs = list(zip(bounds[:-1], bounds[1:])) if bounds is not None else [(0, T)]
        outs = []
        for si, (lo, hi) in enumerate(segs):
            index = si if bounds is not None else b
            if initial_state is None:
                S = torch.zeros(H, K, V, dtype=q.dtype, device=q.device)
            else:
                S = initial_state[index]
            for t in range(lo, hi):
                if g is not None:
                    S = S * g[b, t].exp()[:, None, None]
                vt = v[b, t]
                if delta:
                    vt = vt - (S * k[b, t][:, :, None]).sum(-2)
                if beta is not None:
                    vt = vt * beta[b, t][:, None]
                S = S + k[b, t][:, :, None] * vt[:, None, :]
                outs.append(scale * (S * q[b, t][:, :, None]).sum(-2))
            finals.append(S)
        rows.append(torch.stack(outs, 0) if outs else torch.zeros(0, H, V, dtype=q.dtype, device=q.device))
    o = torch.stack(rows, 0)
    return o, (torch.stack(finals, 0) if output_final_state else None)


def naive_chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                 cu_seqlens=None):
    """fla's `chunk_gated_delta_rule` semantics (no kernel options)."""
    return _naive_scan(q, k, v, g, beta, True, scale, initial_state, output_final_state, cu_seqlens)


def naive_chunk_simple_gla(q, k, v, g=None, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None):
    """fla's `chunk_simple_gla` semantics (head-wise `g`, no `g_gamma`)."""
    return _naive_scan(q, k, v, g, None, False, scale, initial_state, output_final_state, cu_seqlens)


def naive_chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None):
    """fla's `chunk_delta_rule` semantics (any dtype, unlike the kernel)."""
    return _naive_scan(q, k, v, None, beta, True, scale, initial_state, output_final_state, cu_seqlens)


NAIVE_OPS = {
    "chunk_gated_delta_rule": naive_chunk_gated_delta_rule,
    "chunk_simple_gla": naive_chunk_simple_gla,
    "chunk_delta_rule": naive_chunk_delta_rule,
}


# ---------------------------------------------------------------------------------------------
# The mapping
# ---------------------------------------------------------------------------------------------


def _to_fla(t, Bn, H):
    """`[B*H, T, ...]` -> fla's flattened varlen layout `[1, B*T, H, ...]`."""
    T = t.shape[1]
    rest = tuple(t.shape[2:])
    return t.reshape((Bn, H, T) + rest).transpose(1, 2).reshape((1, Bn * T, H) + rest).contiguous()


def _from_fla(t, Bn, H, T):
    """fla's `[1, B*T, H, D]` -> `[B*H, T, D]`."""
    D = t.shape[-1]
    return t.reshape(Bn, T, H, D).transpose(1, 2).reshape(Bn * H, T, D)


def varlen_boundaries(starts, Bn, H, T):
    """`cu_seqlens` (long, on `starts`' device) of the flattened rows: every row start and every
    flagged start, then `B*T`; also each segment's row. `starts [B*H, T]` must agree over heads."""
    st = starts.reshape(Bn, H, T)
    if H > 1 and not bool((st == st[:, :1]).all()):
        raise ValueError("the fla forms need the same sequence starts for every head")
    flags = st[:, 0].clone()
    flags[:, 0] = True
    where = torch.nonzero(flags.reshape(-1), as_tuple=False)[:, 0]
    cu = torch.cat([where, torch.tensor([Bn * T], device=where.device)]).to(torch.long)
    return cu, (where // T)


def fla_arguments(rule, streams, Bn, H):
    """The op name and keyword arguments of `rule`'s fla call for `streams` (rule_streams of
    `[B, H, ...]` inputs, prefix or same-step). Raises ValueError for a rule without an fla op."""
    if rule not in FLA_OPS:
        raise ValueError("rule %r has no fla op; the fla forms cover %s" % (rule, ", ".join(FLA_OPS)))
    N, T, _ = streams["q"].shape
    lg, a, b = streams["log_gamma"][..., 0], streams["a"][..., 0], streams["b"][..., 0]
    x, y = streams["x"][:, :, 0], streams["y"][:, :, 0]
    op = FLA_OPS[rule]
    if rule == "falcon1":
        # gamma S - eta x x^T S + eta x y^T = gamma (I - (eta/gamma) x x^T) S + (eta/gamma) x (gamma y)^T
        beta, v, g = a * torch.exp(-lg), y * torch.exp(lg)[..., None], lg
    elif rule == "gated_deltanet":
        beta, v, g = b, y, lg
    elif op == "chunk_simple_gla":
        beta, v, g = None, y * b[..., None], lg
    else:  # deltanet
        beta, v, g = b, y, None
    cu, _ = varlen_boundaries(streams["starts"], Bn, H, T)
    kwargs = {
        "q": _to_fla(streams["q"], Bn, H),
        "k": _to_fla(x, Bn, H),
        "v": _to_fla(v, Bn, H),
        "scale": 1.0,
        "cu_seqlens": cu,
    }
    if g is not None:
        kwargs["g"] = _to_fla(g, Bn, H)
    if beta is not None:
        kwargs["beta"] = _to_fla(beta, Bn, H)
    return op, kwargs


def fast_weight_fla(rule, q, k, v, beta=None, lambdabar=None, ops=None, **options):
    """One rule through its fla op (`ops`: fla's functions, default `fla_ops()`, or `NAIVE_OPS`).

    `q, k [B, H, T, Dk]`, `v [B, H, T, Dv]`, `beta`/`lambdabar` `[B, H, T]`, `starts` broadcastable
    to `[B, H, T]` and equal across heads; other options as `falcon_torch.fast_weight_recurrent`
    (S0 zeros). Returns `o [B, H, T, Dv]` in the dtype of `q`.
    """
    if ops is None:
        ops = fla_ops()
        if ops is None:
            raise RuntimeError("fla is not importable or no CUDA device is present")
    if q.dim() != 4:
        raise ValueError("the fla forms take q of shape [B, H, T, Dk], got %s" % (tuple(q.shape),))
    Bn, H, T, _ = q.shape
    streams = fc.rule_streams(rule, q, k, v, beta, lambdabar, **options)
    op, kwargs = fla_arguments(rule, streams, Bn, H)
    dtype = q.dtype
    if op in HALF_ONLY_OPS and ops is not NAIVE_OPS and dtype == torch.float32:
        kwargs = {n: (t.to(torch.bfloat16) if torch.is_tensor(t) and t.is_floating_point() else t)
                  for n, t in kwargs.items()}
    o, _ = ops[op](**kwargs)
    return _from_fla(o, Bn, H, T).to(dtype).reshape(Bn, H, T, v.shape[-1])
