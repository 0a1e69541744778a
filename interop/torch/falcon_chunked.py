"""The chunk-parallel form (SPEC section 4) of every rule of falcon_torch.py, in plain PyTorch
(autograd gives the backward), and the per-step coefficient streams that it, the fla mappings
(falcon_fla.py) and bench/torch_peer.py share.

Every rule is written as one recurrence over per-step coefficient streams (SPEC section 6's
implementation note, with the window rules as `W` write instances per step):

    S_t = gamma_t S_{t-1} + sum_{o < W} x_{t,o} (b_t y_{t,o} - a_t S_{t-1}^T x_{t,o})^T,   o_t = S_t^T q_t

with `x_{t,o} = x_{t-o}` (zero where the pair `t-o` is not in `t`'s window), `log gamma_t`, `a_t`,
`b_t` scalars, or one per value column for falcon2/falcon2a (`P = Dv` "column groups"; `P = 1`
otherwise). `a = 0` is the additive family (no solve). Per chunk of `C` positions `a..e` with entry
state `S_a` (shapes per column group; instance rows `(t, o)`, `C*W` of them):

    Gam[t,s] = prod_{r=s+1}^{t} gamma_r,  Gp[t,s] = prod_{r=s+1}^{t-1} gamma_r  (0 across a sequence start)
    A  = block_strictly_lower(diag(a) (X X^T * Gp))
    Wv = (I + A)^-1 [diag(b) Y - diag(a cp) X S_entry]      (pseudo-values, one triangular solve)
    O  = diag(c) Q S_entry + (Q X^T * Gam) Wv,    S_e = c_e S_entry + X^T diag(Gam[e,:]) Wv

`c_t`, `cp_t = c_{t-1}` are the decays from the state each row starts from: `S_a`, or `S0` when a
sequence start lies inside the chunk at or before `t` (packing: a start resets to `S0`). Every
log-ratio is a masked segment sum of `log gamma`, masked before `exp`; where the clamp binds,
`log gamma = log(eps_gamma)` exactly. Positions past `T` are padded with no-op steps.

Shapes: `N` independent rows (batch x heads), `T` positions, `Dk`, `Dv`; `W` window instances.
"""

import math

import torch

import falcon_torch as ft

DEFAULT_CHUNK = 64


def sequence_start_positions(starts):
    """For `starts [N, T]` bool (position 0 is always a start), the latest start `<= t` `[N, T]` long."""
    N, T = starts.shape
    idx = torch.arange(T, device=starts.device)[None, :].expand(N, T)
    flags = starts.clone()
    flags[:, 0] = True
    return torch.cummax(torch.where(flags, idx, torch.zeros_like(idx)), dim=1)[0]


def rule_streams(
    rule,
    q,
    k,
    v,
    beta=None,
    lambdabar=None,
    alignment="prefix",
    qk_norm=None,
    coupling=True,
    window=4,
    eps=1e-6,
    eps_gamma=1e-3,
    eps_rms=1e-6,
    mamba_A=1.0,
    retnet_g=None,
    starts=None,
):
    """The per-step streams of a rule (arguments as `falcon_torch.fast_weight_recurrent`).

    Returns a dict of `[N, ...]` tensors (`N` = product of the leading dims):
      `q [N,T,Dk]` normalised queries; `x [N,T,W,Dk]`, `y [N,T,W,Dv]` the write instances (zero
      rows outside the window); `log_gamma`, `a`, `b` `[N,T,P]`; `starts [N,T]` bool (position 0
      set); `lead`, `W`, `P`. The coupled ridge's statistic is stop-gradient (SPEC section 3), the
      clamp and the no-op steps (prefix sentinel, zero statistic) are applied.
    """
    if qk_norm is None:
        qk_norm = "l2" if rule in ("deltanet", "gated_deltanet") else "rms"
    ft._check_rule_args(rule, alignment, qk_norm, window)
    lead = tuple(q.shape[:-2])
    T, dk = q.shape[-2], q.shape[-1]
    dv = v.shape[-1]
    dtype, device = q.dtype, q.device
    N = 1
    for s in lead:
        N *= s
    W = int(window) if ft.is_window_rule(rule) else 1
    per_column = ft.is_per_column_rule(rule)
    P = dv if per_column else 1
    regression = rule in ("falcon1", "falcon2", "falcon3")

    qn = ft.normalize_qk(q, qk_norm, eps_rms).reshape(N, T, dk)
    kn = ft.normalize_qk(k, qk_norm, eps_rms).reshape(N, T, dk)
    y = v.reshape(N, T, dv)
    if beta is None:
        beta = torch.ones(lead + ((T, dv) if per_column else (T,)), dtype=dtype, device=device)
    if lambdabar is None:
        lambdabar = torch.zeros(lead + (T,), dtype=dtype, device=device)
    bt = beta.reshape(N, T, P)
    lb = lambdabar.reshape(N, T, 1)
    if starts is None:
        st = torch.zeros(N, T, dtype=torch.bool, device=device)
    else:
        st = torch.as_tensor(starts, device=device).to(torch.bool).expand(lead + (T,)).reshape(N, T).clone()
    if T > 0:
        st[:, 0] = True
    prefix = alignment == "prefix"
    sentinel = st if prefix else torch.zeros_like(st)
    # write features: prefix x_t = phi(k_{t-1}) (zero at a start), same-step x_t = phi(k_t)
    if prefix:
        x1 = torch.cat([torch.zeros_like(kn[:, :1]), kn[:, :-1]], 1) * (~st)[:, :, None].to(dtype)
    else:
        x1 = kn
    # window instances (t, o) = pair t - o, valid when t - o >= j0(t), the first pair of t's sequence
    first_pair = sequence_start_positions(st) + (1 if prefix else 0)
    pos = torch.arange(T, device=device)
    xs, ys, valids = [], [], []
    for o in range(W):
        shifted_x = torch.cat([torch.zeros_like(x1[:, :o]), x1[:, : T - o]], 1) if o else x1
        shifted_y = torch.cat([torch.zeros_like(y[:, :o]), y[:, : T - o]], 1) if o else y
        ok = (pos[None, :] - o) >= first_pair
        xs.append(shifted_x * ok[:, :, None].to(dtype))
        ys.append(shifted_y * ok[:, :, None].to(dtype))
        valids.append(ok)
    x = torch.stack(xs, 2)  # [N, T, W, Dk]
    yw = torch.stack(ys, 2)  # [N, T, W, Dv]
    count = torch.stack(valids, 2).to(dtype).sum(2)  # [N, T]
    one = torch.ones((), dtype=dtype, device=device)

    if ft.is_falcon_rule(rule):
        if rule == "falcon3":
            stat = ft.top_gram_eigenvalue(x.reshape(N * T, W, dk)).reshape(N, T) / torch.clamp(count, min=1)
        elif rule == "falcon3a":
            stat = (x * x).sum((2, 3)) / torch.clamp(count, min=1)
        else:
            stat = (x1 * x1).sum(-1)
        noop = sentinel | (stat == 0)
        stat = stat[:, :, None]
        lam = lb * stat.detach() if coupling else lb
        eta = bt / (stat + lam + eps)  # [N, T, P]
        alpha_raw = eta * lam
        clamped = alpha_raw > 1 - eps_gamma
        log_gamma = torch.where(
            clamped,
            math.log(eps_gamma) * one,
            torch.log1p(-torch.clamp(alpha_raw, max=1 - eps_gamma)),
        )
        gain = eta / torch.clamp(count, min=1)[:, :, None]
        b = gain
        a = gain if regression else torch.zeros_like(gain)
    else:
        noop = sentinel
        zero = torch.zeros_like(bt)
        if rule == "linear":
            log_gamma, a, b = zero, zero, zero + 1
        elif rule == "retnet":
            if retnet_g is None:
                raise ValueError("retnet needs retnet_g (per head, g_h = 1 - 2^(-5-h))")
            G = ft._per_row(retnet_g, lead, dtype, device, "retnet_g")
            log_gamma, a, b = torch.log(G)[:, None, None] + zero, zero, zero + 1
        elif rule == "mamba2":
            A = ft._per_row(mamba_A, lead, dtype, device, "mamba_A")
            log_gamma, a, b = -bt * A[:, None, None], zero, bt
        elif rule == "deltanet":
            log_gamma, a, b = zero, bt, bt
        else:  # gated_deltanet
            log_gamma, a, b = -lb + zero, torch.exp(-lb) * bt, bt
    keep = (~noop)[:, :, None].to(dtype)
    return {
        "q": qn,
        "x": x,
        "y": yw,
        "log_gamma": log_gamma * keep,
        "a": a * keep,
        "b": b * keep,
        "starts": st,
        "additive": not (regression or rule in ("deltanet", "gated_deltanet")),
        "lead": lead,
        "W": W,
        "P": P,
    }


def _pad_time(t, T_pad, value=0):
    """Pad dim 1 of `t` to `T_pad` with `value`."""
    extra = T_pad - t.shape[1]
    if extra == 0:
        return t
    pad = torch.full((t.shape[0], extra) + tuple(t.shape[2:]), value, dtype=t.dtype, device=t.device)
    return torch.cat([t, pad], 1)


def chunked_scan(streams, S0=None, chunk=DEFAULT_CHUNK):
    """Run the streams of `rule_streams` in the chunk-parallel form (module doc).

    `S0 [N, Dk, Dv]` or None (zeros). Returns `(o [N, T, Dv], S_final [N, Dk, Dv])`.
    """
    if int(chunk) != chunk or chunk < 1:
        raise ValueError("chunk must be an integer >= 1, got %r" % (chunk,))
    Q, X, Y = streams["q"], streams["x"], streams["y"]
    N, T, dk = Q.shape
    W, P = streams["W"], streams["P"]
    dv = Y.shape[-1]
    dtype, device = Q.dtype, Q.device
    C = int(chunk)
    n = max(1, -(-T // C))
    Tp = n * C
    CW = C * W
    starts = _pad_time(streams["starts"], Tp, False)
    Qc = _pad_time(Q, Tp).reshape(N, n, C, dk)
    Xc = _pad_time(X, Tp).reshape(N, n, CW, dk)  # instance rows (t, o), t-major
    Yc = _pad_time(Y, Tp).reshape(N, n, CW, P, dv // P).permute(0, 1, 3, 2, 4)  # [N,n,P,CW,dv/P]
    lg = _pad_time(streams["log_gamma"], Tp).reshape(N, n, C, P).permute(0, 1, 3, 2)  # [N,n,P,C]
    a = _pad_time(streams["a"], Tp).reshape(N, n, C, P).permute(0, 1, 3, 2)
    b = _pad_time(streams["b"], Tp).reshape(N, n, C, P).permute(0, 1, 3, 2)
    seg = starts.to(torch.long).cumsum(1).reshape(N, n, C)
    seg_before = torch.cat([torch.zeros_like(seg[:, :1, -1]), seg[:, :-1, -1]], 1)  # seg of position a-1
    from_entry = seg == seg_before[:, :, None]  # [N,n,C]: no start in [a, t], the row sees S_a
    local = torch.arange(C, device=device)
    start_local = torch.cummax(torch.where(starts.reshape(N, n, C), local, torch.zeros_like(local)), dim=2)[0]

    cs = lg.cumsum(-1)  # [N,n,P,C]: sum_{r=a}^{t} log gamma_r
    cs0 = torch.cat([torch.zeros_like(cs[..., :1]), cs], -1)  # cs0[j] = sum_{r=a}^{a+j-1}
    base_index = torch.where(from_entry, torch.zeros_like(start_local), start_local)  # [N,n,C]
    base = torch.gather(cs0, -1, base_index[:, :, None, :].expand(N, n, P, C))
    log_c = cs - base  # decay from the row's entry state (S_a or S0) through t
    log_cp = log_c - lg  # ... through t-1
    same = seg[..., :, None] == seg[..., None, :]  # [N,n,C,C]
    lower = torch.ones(C, C, dtype=torch.bool, device=device).tril()
    strict = lower & ~torch.eye(C, dtype=torch.bool, device=device)
    diff = cs[..., :, None] - cs[..., None, :]  # [N,n,P,C,C]
    minus_inf = torch.full_like(diff, -math.inf)
    gam = torch.where((lower & same)[:, :, None], diff, minus_inf).exp()
    gp = torch.where((strict & same)[:, :, None], diff - lg[..., :, None], minus_inf).exp()
    c = log_c.exp()
    cp = log_cp.exp()
    entry = from_entry[:, :, None, :].to(dtype)  # [N,n,1,C]

    def per_instance(t):  # [..., C] -> [..., C*W] (each step's value on its W instance rows)
        return t.repeat_interleave(W, -1) if W > 1 else t

    gam_cols = per_instance(gam)  # [N,n,P,C,CW]
    if S0 is None:
        S0p = None
    else:
        S0p = S0.reshape(N, dk, P, dv // P).permute(0, 2, 1, 3).to(dtype)  # [N,P,dk,dv/P]
    bY = per_instance(b)[..., None] * Yc  # [N,n,P,CW,dv/P]
    Xp = Xc[:, :, None]  # [N,n,1,CW,dk]
    if streams["additive"]:
        U = bY
        Kw = None
    else:
        gram = Xc @ Xc.transpose(-1, -2)  # [N,n,CW,CW]
        gp_inst = per_instance(per_instance(gp).transpose(-1, -2)).transpose(-1, -2)  # [N,n,P,CW,CW]
        A = per_instance(a)[..., None] * gram[:, :, None] * gp_inst
        eye = torch.eye(CW, dtype=dtype, device=device)
        L = eye + A
        a_cp = per_instance(a * cp)[..., None]  # [N,n,P,CW,1]
        rhs = bY
        if S0p is not None:
            rhs = rhs - a_cp * (1 - per_instance(entry))[..., None] * (Xp @ S0p[:, None])
        U = torch.linalg.solve_triangular(L, rhs, upper=False)
        Kw = torch.linalg.solve_triangular(L, (a_cp * per_instance(entry)[..., None]) * Xp.expand(N, n, P, CW, dk), upper=False)
    QX = (Qc @ Xc.transpose(-1, -2))[:, :, None] * gam_cols  # [N,n,P,C,CW]
    if S0p is not None:
        QS0 = Qc[:, :, None] @ S0p[:, None]  # [N,n,P,C,dv/P]
    S = torch.zeros(N, P, dk, dv // P, dtype=dtype, device=device) if S0p is None else S0p
    last_gam = gam_cols[..., -1, :]  # [N,n,P,CW]: Gam[e, s] on the instance rows
    outs = []
    for i in range(n):
        Wv = U[:, i] if Kw is None else U[:, i] - Kw[:, i] @ S
        ci = (c[:, i] * entry[:, i])[..., None]  # [N,P,C,1]
        o = ci * (Qc[:, i, None] @ S) + QX[:, i] @ Wv
        if S0p is not None:
            o = o + (c[:, i] * (1 - entry[:, i]))[..., None] * QS0[:, i]
        outs.append(o)
        e_entry = entry[:, i, :, -1, None, None]
        ce = c[:, i, :, -1, None, None]
        S_new = ce * e_entry * S + Xc[:, i, None].transpose(-1, -2) @ (last_gam[:, i, :, :, None] * Wv)
        if S0p is not None:
            S_new = S_new + ce * (1 - e_entry) * S0p
        S = S_new
    o = torch.stack(outs, 1)  # [N,n,P,C,dv/P]
    o = o.permute(0, 1, 3, 2, 4).reshape(N, Tp, dv)[:, :T]
    return o, S.permute(0, 2, 1, 3).reshape(N, dk, dv)


def fast_weight_chunked(rule, q, k, v, beta=None, lambdabar=None, S0=None, chunk=DEFAULT_CHUNK, **options):
    """One rule over a sequence in the chunk-parallel form; arguments and shapes as
    `falcon_torch.fast_weight_recurrent` (no `carry`), plus `chunk` (positions per chunk).

    Returns `(o [..., T, Dv], S_final [..., Dk, Dv])`.
    """
    streams = rule_streams(rule, q, k, v, beta, lambdabar, **options)
    lead = streams["lead"]
    N = streams["q"].shape[0]
    dk, dv = q.shape[-1], v.shape[-1]
    s0 = None if S0 is None else S0.reshape(N, dk, dv)
    o, S = chunked_scan(streams, s0, chunk)
    return o.reshape(lead + (q.shape[-2], dv)), S.reshape(lead + (dk, dv))
