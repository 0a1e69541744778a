"""Falcon fast-weight attention in plain PyTorch: every rule of SPEC sections 3 and 6 in its
recurrent form, and the model of SPEC section 7 loaded from an `hf` export of `falcon convert`.
The model's mixers run in a fast form by default (`fast_weight`, FORMS): the rule's fla op where
one maps exactly and fla and CUDA are present (falcon_fla.py), else the chunk-parallel form
(falcon_chunked.py); `recurrent` is the oracle below.

No dependency but `torch` (1.13 from Debian's python3-torch, or 2.x); fla is optional. Safetensors files
are parsed here with `struct` and `json` (no `safetensors` package); no field of a file is ever
evaluated as code.

Rules (per head; `x_t` the write feature, `y_t = v_t`, `r_t = y_t - S_{t-1}^T x_t`):

| rule | recurrence |
|---|---|
| falcon1 / falcon2 | `S_t = gamma_t S_{t-1} + eta_t x_t r_t^T` (eta per value column for falcon2) |
| falcon3 | `S_t = gamma_t S_{t-1} + (eta_t / B_t) sum_{j in window} x_j (y_j - S_{t-1}^T x_j)^T` |
| falcon1a / falcon2a | `S_t = gamma_t S_{t-1} + eta_t x_t y_t^T` |
| falcon3a | `S_t = gamma_t S_{t-1} + (eta_t / B_t) sum_{j in window} x_j y_j^T` |
| linear | `S_t = S_{t-1} + x_t y_t^T` |
| retnet | `S_t = g_h S_{t-1} + x_t y_t^T`, `g_h = 1 - 2^(-5-h)` |
| mamba2 | `S_t = exp(-dt A_h) S_{t-1} + dt x_t y_t^T` (`dt` in the beta slot) |
| deltanet | `S_t = S_{t-1} + b x_t (y_t - S_{t-1}^T x_t)^T` (`b` in the beta slot) |
| gated_deltanet | `S_t = a (I - b x_t x_t^T) S_{t-1} + b x_t y_t^T`, `a = exp(-lambdabar)` |

Falcon rules: `eta = beta / (E* + lambda + eps)`, `lambda = lambdabar * E*` (coupled ridge, the
default) or `lambdabar`, `gamma = 1 - min(eta lambda, 1 - eps_gamma)`; `E*` is `||x_t||^2`, the
window's `mu_t = lambda_max(Gram) / B_t` (falcon3) or mean `||x_j||^2` (falcon3a). The prefix
sentinel (first step of a sequence) and a zero statistic write and decay nothing. Readout
`o_t = S_t^T phi(q_t)`.

Usage:

    python3 falcon_torch.py HF_DIR [HF_DIR ...] --ids 1,2,3 [--starts 2] [--dtype float64] [--json]

    import falcon_torch
    model = falcon_torch.load_hf("export_dir")            # FalconLM (torch.nn.Module)
    logits = model(torch.tensor([[1, 2, 3]]))             # [B, T, V]
"""

import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

RULES = (
    "falcon1",
    "falcon2",
    "falcon3",
    "falcon1a",
    "falcon2a",
    "falcon3a",
    "linear",
    "retnet",
    "mamba2",
    "deltanet",
    "gated_deltanet",
)
ALIGNMENTS = ("prefix", "same-step")
QK_NORMS = ("rms", "l2", "none")
L2_NORM_FLOOR = 1e-6


def is_falcon_rule(rule):
    return rule.startswith("falcon")


def is_window_rule(rule):
    return rule in ("falcon3", "falcon3a")


def is_per_column_rule(rule):
    return rule in ("falcon2", "falcon2a")


def retnet_decay(h):
    """RetNet decay of 0-based head index h: 1 - 2^(-5-h)."""
    return 1.0 - 2.0 ** (-5 - h)


# ---------------------------------------------------------------------------------------------
# Rules (SPEC sections 1-3, 6), recurrent form
# ---------------------------------------------------------------------------------------------


def normalize_qk(u, norm, eps_rms=1e-6):
    """Normalise the last dimension: `rms` (no weight), `l2` (floor 1e-6) or `none`."""
    if norm == "none":
        return u
    if norm == "rms":
        return u / torch.sqrt((u * u).sum(-1, keepdim=True) / u.shape[-1] + eps_rms)
    if norm == "l2":
        return u / torch.clamp(torch.sqrt((u * u).sum(-1, keepdim=True)), min=L2_NORM_FLOOR)
    raise ValueError("unknown qk_norm %r; expected rms, l2 or none" % (norm,))


def top_gram_eigenvalue(X):
    """Largest eigenvalue of the Gram matrix `X X^T` of the window rows `X` `[N, W, Dk]`.

    Rows that are not in the window are zero, which adds zero eigenvalues and leaves the largest
    (the Gram matrix is positive semi-definite) unchanged. Never forms a `Dk x Dk` matrix.
    """
    gram = X @ X.transpose(-1, -2)
    if gram.shape[-1] == 1:
        return gram[..., 0, 0]
    return torch.linalg.eigvalsh(gram)[..., -1]


def _check_rule_args(rule, alignment, qk_norm, window):
    if rule not in RULES:
        raise ValueError("unknown rule %r; expected one of %s" % (rule, ", ".join(RULES)))
    if alignment not in ALIGNMENTS:
        raise ValueError("unknown alignment %r; expected prefix or same-step" % (alignment,))
    if qk_norm not in QK_NORMS:
        raise ValueError("unknown qk_norm %r; expected rms, l2 or none" % (qk_norm,))
    if int(window) != window or window < 1:
        raise ValueError("window must be an integer >= 1, got %r" % (window,))


def _per_row(value, lead, dtype, device, name):
    """A per-row constant (scalar, or a tensor broadcastable to `lead`) flattened to `[N]`."""
    t = torch.as_tensor(value, dtype=dtype, device=device)
    try:
        return t.expand(lead).reshape(-1)
    except RuntimeError:
        raise ValueError("%s of shape %s does not broadcast to %s" % (name, tuple(t.shape), tuple(lead)))


def fast_weight_recurrent(
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
    S0=None,
    starts=None,
    carry=None,
):
    """Run one rule over a sequence in its recurrent form (SPEC sections 2, 3 and 6).

    Shapes (`...` any leading dims, e.g. batch and head; `T` positions):
      q, k `[..., T, Dk]` raw (normalised here by `qk_norm`); v `[..., T, Dv]`;
      beta `[..., T]`, or `[..., T, Dv]` for falcon2/falcon2a (dt for mamba2, b for the deltanets);
      lambdabar `[..., T]` (the ridge itself with coupling off; `-log a` for gated_deltanet);
      mamba_A, retnet_g: scalars or tensors broadcastable to `[...]` (per head);
      S0 `[..., Dk, Dv]` or None (zeros); starts `[..., T]` bool, broadcastable, or None.
    Position 0 is a sequence start unless `carry` (from a previous call) is given.
    Returns `(o [..., T, Dv], carry)`; `carry["S"]` is the final state `[..., Dk, Dv]`.
    """
    if qk_norm is None:
        qk_norm = "l2" if rule in ("deltanet", "gated_deltanet") else "rms"
    _check_rule_args(rule, alignment, qk_norm, window)
    lead = tuple(q.shape[:-2])
    T, dk = q.shape[-2], q.shape[-1]
    dv = v.shape[-1]
    dtype, device = q.dtype, q.device
    N = 1
    for s in lead:
        N *= s
    W = int(window) if is_window_rule(rule) else 1
    per_column = is_per_column_rule(rule)
    falcon = is_falcon_rule(rule)
    regression = rule in ("falcon1", "falcon2", "falcon3")

    qn = normalize_qk(q, qk_norm, eps_rms).reshape(N, T, dk)
    kn = normalize_qk(k, qk_norm, eps_rms).reshape(N, T, dk)
    vv = v.reshape(N, T, dv)
    if beta is None:
        beta = torch.ones(lead + ((T, dv) if per_column else (T,)), dtype=dtype, device=device)
    if lambdabar is None:
        lambdabar = torch.zeros(lead + (T,), dtype=dtype, device=device)
    bt = beta.reshape(N, T, dv) if per_column else beta.reshape(N, T, 1)
    lb = lambdabar.reshape(N, T)
    if starts is None:
        st = torch.zeros(N, T, dtype=torch.bool, device=device)
    else:
        st = torch.as_tensor(starts, device=device).to(torch.bool).expand(lead + (T,)).reshape(N, T)
    s0 = torch.zeros(N, dk, dv, dtype=dtype, device=device) if S0 is None else S0.reshape(N, dk, dv)
    A = _per_row(mamba_A, lead, dtype, device, "mamba_A") if rule == "mamba2" else None
    if rule == "retnet":
        if retnet_g is None:
            raise ValueError("retnet needs retnet_g (per head, g_h = 1 - 2^(-5-h))")
        G = _per_row(retnet_g, lead, dtype, device, "retnet_g")

    if carry is None:
        S = s0.clone()
        prev_key = torch.zeros(N, dk, dtype=dtype, device=device)
        Xw = torch.zeros(N, W, dk, dtype=dtype, device=device)
        Yw = torch.zeros(N, W, dv, dtype=dtype, device=device)
        valid = torch.zeros(N, W, dtype=dtype, device=device)
    else:
        S = carry["S"].reshape(N, dk, dv).to(dtype)
        prev_key = carry["last_key"].reshape(N, dk).to(dtype)
        Xw = carry["window_x"].reshape(N, W, dk).to(dtype)
        Yw = carry["window_y"].reshape(N, W, dv).to(dtype)
        valid = carry["window_valid"].reshape(N, W).to(dtype)

    one = torch.ones((), dtype=dtype, device=device)
    outputs = []
    for t in range(T):
        reset = st[:, t].clone()
        if t == 0 and carry is None:
            reset[:] = True
        S = torch.where(reset[:, None, None], s0, S)
        valid = torch.where(reset[:, None], torch.zeros_like(valid), valid)
        sentinel = reset if alignment == "prefix" else torch.zeros_like(reset)
        x = prev_key if alignment == "prefix" else kn[:, t]
        y = vv[:, t]
        # append the step's pair to the window (oldest first); the sentinel appends nothing
        newX = torch.cat([Xw[:, 1:], x[:, None]], 1)
        newY = torch.cat([Yw[:, 1:], y[:, None]], 1)
        newV = torch.cat([valid[:, 1:], torch.ones_like(valid[:, :1])], 1)
        keep = sentinel[:, None]
        Xw = torch.where(keep[:, :, None], Xw, newX)
        Yw = torch.where(keep[:, :, None], Yw, newY)
        valid = torch.where(keep, valid, newV)
        Xm = Xw * valid[:, :, None]
        count = valid.sum(1)

        if falcon:
            if rule == "falcon3":
                stat = top_gram_eigenvalue(Xm) / torch.clamp(count, min=1)
            elif rule == "falcon3a":
                stat = (Xm * Xm).sum((1, 2)) / torch.clamp(count, min=1)
            else:
                stat = (x * x).sum(1)
            noop = sentinel | (stat == 0)
            # coupled ridge: the statistic is a stop-gradient multiplier (SPEC section 3)
            lam = lb[:, t] * stat.detach() if coupling else lb[:, t]
            den = stat + lam + eps
            eta = bt[:, t] / den[:, None]  # [N, Dv] or [N, 1]
            alpha_raw = eta * lam[:, None]
            gamma = torch.where(alpha_raw > 1 - eps_gamma, eps_gamma * one, 1 - alpha_raw)
            gain = eta / torch.clamp(count, min=1)[:, None]
            b = gain
            a = gain if regression else torch.zeros_like(gain)
        else:
            noop = sentinel
            bcol = bt[:, t]  # [N, 1]
            zero = torch.zeros_like(bcol)
            if rule == "linear":
                gamma, a, b = zero + 1, zero, zero + 1
            elif rule == "retnet":
                gamma, a, b = G[:, None] + zero, zero, zero + 1
            elif rule == "mamba2":
                gamma, a, b = torch.exp(-bcol * A[:, None]), zero, bcol
            elif rule == "deltanet":
                gamma, a, b = zero + 1, bcol, bcol
            else:  # gated_deltanet
                g = torch.exp(-lb[:, t])[:, None] + zero
                gamma, a, b = g, g * bcol, bcol
        nm = noop[:, None]
        gamma = torch.where(nm, one, gamma)
        a = torch.where(nm, 0 * one, a)
        b = torch.where(nm, 0 * one, b)
        # column j: s_j <- gamma_j s_j + sum_p x_p (b_j y_pj - a_j x_p^T s_j)
        XS = Xm @ S  # [N, W, Dv]
        R = b[:, None, :] * Yw - a[:, None, :] * XS
        S = gamma[:, None, :] * S + Xm.transpose(1, 2) @ (R * valid[:, :, None])
        outputs.append((qn[:, t, None, :] @ S)[:, 0])
        prev_key = kn[:, t]

    o = torch.stack(outputs, 1) if T > 0 else torch.zeros(N, 0, dv, dtype=dtype, device=device)
    new_carry = {
        "S": S.reshape(lead + (dk, dv)),
        "last_key": prev_key.reshape(lead + (dk,)),
        "window_x": Xw.reshape(lead + (W, dk)),
        "window_y": Yw.reshape(lead + (W, dv)),
        "window_valid": valid.reshape(lead + (W,)),
    }
    return o.reshape(lead + (T, dv)), new_carry


FORMS = ("auto", "fla", "chunked", "recurrent")


def fast_weight(rule, q, k, v, beta=None, lambdabar=None, form="auto", chunk=64, **options):
    """One rule over `[B, H, T, ...]` inputs in the form asked for; returns `o [B, H, T, Dv]`.

    `recurrent`: `fast_weight_recurrent`; `chunked`: the chunk-parallel form of falcon_chunked.py
    (`chunk` positions per chunk); `fla`: the rule's fla op (falcon_fla.py; needs fla, CUDA, CUDA
    inputs and a rule with an fla op, else ValueError); `auto`: `fla` where it applies (and, for
    fla's bf16-only delta rule, inputs in bf16 or fp16; for its gated ops, where fla does not refuse their
    backward: `falcon_fla.gated_backward_refused`), else `chunked`.
    Options as `fast_weight_recurrent` (S0 and starts included; no carry).
    """
    if form not in FORMS:
        raise ValueError("unknown form %r; expected one of %s" % (form, ", ".join(FORMS)))
    if form == "recurrent":
        return fast_weight_recurrent(rule, q, k, v, beta, lambdabar, **options)[0]
    import falcon_chunked
    import falcon_fla

    if form in ("auto", "fla"):
        ops = falcon_fla.fla_ops() if q.is_cuda else None
        op = falcon_fla.FLA_OPS.get(rule)
        half = q.dtype in (torch.bfloat16, torch.float16)
        usable = ops is not None and op is not None and options.get("S0") is None
        if usable and form == "auto":
            if op in falcon_fla.HALF_ONLY_OPS:
                usable = half
            elif torch.is_grad_enabled():
                usable = not falcon_fla.gated_backward_refused()
        if usable:
            return falcon_fla.fast_weight_fla(rule, q, k, v, beta, lambdabar, ops=ops, **options)
        if form == "fla":
            why = (
                "rule %r has no fla op" % rule if op is None
                else "S0 is not supported by the fla forms" if options.get("S0") is not None
                else "fla is not importable, no CUDA device is present or the inputs are not on it"
            )
            raise ValueError("form fla: %s" % why)
    return falcon_chunked.fast_weight_chunked(rule, q, k, v, beta, lambdabar, chunk=chunk, **options)[0]


# ---------------------------------------------------------------------------------------------
# Safetensors (read-only, validating; no code is ever evaluated from a file)
# ---------------------------------------------------------------------------------------------

MAX_HEADER_BYTES = 100 * 1000 * 1000
_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}


class CheckpointError(ValueError):
    """A refused safetensors file or hf export; the message names the file and the field."""


def read_safetensors(path):
    """Read a safetensors file: returns `(tensors: dict name -> torch.Tensor, metadata: dict)`.

    Validates the header length (<= 100 MB and inside the file), the JSON header (an object),
    every dtype, shape and data_offsets (integers, in range, matching the byte length, aligned to
    the element size, not overlapping).
    """
    if sys.byteorder != "little":
        raise CheckpointError("%s: safetensors data is little-endian; big-endian hosts are not supported" % path)
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise CheckpointError("%s: file has %d bytes, shorter than the 8-byte header length" % (path, len(blob)))
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER_BYTES:
        raise CheckpointError("%s: header length %d is above the 100 MB limit" % (path, n))
    if 8 + n > len(blob):
        raise CheckpointError("%s: header length %d is larger than the file (%d bytes)" % (path, n, len(blob)))
    try:
        header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError("%s: header is not JSON (%s)" % (path, err))
    if not isinstance(header, dict):
        raise CheckpointError("%s: header is not a JSON object" % path)
    data = memoryview(blob)[8 + n :]
    metadata = header.pop("__metadata__", {}) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError("%s: __metadata__ must map names to strings" % path)
    spans = []
    tensors = {}
    for name, info in header.items():
        where = "%s: tensor %r" % (path, name)
        if not isinstance(info, dict):
            raise CheckpointError("%s: entry is not an object" % where)
        dtype = info.get("dtype")
        if dtype not in _DTYPES:
            raise CheckpointError("%s: unknown dtype %r" % (where, dtype))
        torch_dtype, size = _DTYPES[dtype]
        shape = info.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise CheckpointError("%s: invalid shape %r" % (where, shape))
        offsets = info.get("data_offsets")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= len(data)
        ):
            raise CheckpointError("%s: data_offsets %r outside the %d data bytes" % (where, offsets, len(data)))
        count = 1
        for d in shape:
            count *= d
        if offsets[1] - offsets[0] != count * size:
            raise CheckpointError(
                "%s: %s shape %r needs %d bytes, data_offsets give %d"
                % (where, dtype, shape, count * size, offsets[1] - offsets[0])
            )
        if offsets[0] % size != 0:
            raise CheckpointError("%s: data_offsets start %d is not aligned to %d bytes" % (where, offsets[0], size))
        spans.append((offsets[0], offsets[1], name))
        raw = bytes(data[offsets[0] : offsets[1]])
        if count == 0:
            t = torch.zeros(shape, dtype=torch_dtype)
        else:
            t = torch.frombuffer(bytearray(raw), dtype=torch_dtype).reshape(shape).clone()
        tensors[name] = t
    spans.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise CheckpointError("%s: tensors %r and %r overlap" % (path, an, bn))
    return tensors, metadata


_DTYPE_NAMES = {torch_dtype: name for name, (torch_dtype, _) in _DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    """Write `tensors` (dict name -> torch.Tensor, written in sorted name order, contiguous,
    little-endian) and string `metadata` as a safetensors file at `path`."""
    if sys.byteorder != "little":
        raise CheckpointError("%s: safetensors data is little-endian; big-endian hosts are not supported" % path)
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        if t.dtype not in _DTYPE_NAMES:
            raise CheckpointError("%s: tensor %r has dtype %s, which safetensors here cannot hold" % (path, name, t.dtype))
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def save_hf(model, directory, config):
    """Write `model`'s weights and `config` (a dict; `torch_dtype` is set from the weights) as an
    hf export at `directory`: written into `directory.tmp`, renamed when complete (an existing
    directory is replaced)."""
    state = {name: t for name, t in model.state_dict().items()}
    dtypes = {t.dtype for t in state.values()}
    if len(dtypes) != 1:
        raise CheckpointError("%s: the weights have several dtypes %s" % (directory, sorted(map(str, dtypes))))
    torch_dtype = str(dtypes.pop()).replace("torch.", "")
    tmp = directory.rstrip("/") + ".tmp"
    if os.path.isdir(tmp):
        for name in os.listdir(tmp):
            os.remove(os.path.join(tmp, name))
    else:
        os.makedirs(tmp)
    write_safetensors(os.path.join(tmp, "model.safetensors"), state, {"format": "pt"})
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(dict(config, torch_dtype=torch_dtype), f, indent=2)
        f.write("\n")
    if os.path.isdir(directory):
        old = directory.rstrip("/") + ".old"
        os.rename(directory, old)
        os.rename(tmp, directory)
        for name in os.listdir(old):
            os.remove(os.path.join(old, name))
        os.rmdir(old)
    else:
        os.rename(tmp, directory)


# ---------------------------------------------------------------------------------------------
# Model (SPEC section 7)
# ---------------------------------------------------------------------------------------------


def rms_norm(x, weight, eps):
    """`x / sqrt(mean(x^2) + eps) * weight` over the last dimension (weight may be None)."""
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def short_conv(x, weight, starts):
    """Causal depthwise convolution then SiLU: x `[B, T, C]`, weight `[C, 1, W]` (the last tap
    multiplies the current position); taps before the latest sequence start read zero."""
    Bn, T, C = x.shape
    W = weight.shape[-1]
    out = torch.zeros_like(x)
    seq_start = _sequence_starts(starts, Bn, T, x.device)  # [B, T]
    for j in range(W):
        # tap weight[:, 0, W-1-j] multiplies x[t-j]
        if j >= T:
            break
        shifted = torch.zeros_like(x)
        shifted[:, j:] = x[:, : T - j]
        pos = torch.arange(T, device=x.device)[None, :]
        ok = (pos - j >= seq_start).to(x.dtype)[:, :, None]
        out = out + shifted * ok * weight[:, 0, W - 1 - j]
    return F.silu(out)


def _sequence_starts(starts, Bn, T, device):
    """For each position, the position where its sequence began ([B, T] long)."""
    idx = torch.arange(T, device=device)[None, :].expand(Bn, T)
    flags = starts.to(torch.bool).clone()
    flags[:, 0] = True
    marked = torch.where(flags, idx, torch.zeros_like(idx))
    return torch.cummax(marked, dim=1)[0]


def rope(x, positions, base):
    """GPT-NeoX "rotate half" RoPE on `[B, T, H, D]` with per-position angles `p * base^(-2i/D)`."""
    D = x.shape[-1]
    half = D // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64, device=x.device) / D)
    ang = (positions.to(torch.float64)[:, :, None] * inv)[:, :, None, :]
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1)


def softplus(z):
    """`log(1 + exp(z))` without F.softplus's linear cut-off above 20 (as the TypeScript model)."""
    return torch.where(z > 0, z + torch.log1p(torch.exp(-z.abs())), torch.log1p(torch.exp(-z.abs())))


def _stream(z, kind, scale):
    if kind == "sigmoid":
        return scale * torch.sigmoid(z)
    return scale * softplus(z)


def coefficient_plan(rule, beta_max):
    """`(beta, lambda)` streams of a rule: each `(activation, scale, per_column)` or None."""
    lam = ("softplus", 1.0, False)
    if rule in ("linear", "retnet"):
        return None, None
    if rule == "mamba2":
        return ("softplus", 1.0, False), None
    if rule == "deltanet":
        return ("sigmoid", 1.0, False), None
    if rule == "gated_deltanet":
        return ("sigmoid", 1.0, False), lam
    return ("sigmoid", float(beta_max), is_per_column_rule(rule)), lam


class FastWeightAttention(torch.nn.Module):
    """Fast-weight mixer: q/k/v projections, optional short conv + SiLU, beta and lambdabar
    streams, the rule (recurrent form), per-head RMSNorm of o, optional SiLU gate, output projection."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D, H = cfg["hidden_size"], cfg["num_heads"]
        self.H, self.Dh = H, D // H
        lin = lambda i, o, b=False: torch.nn.Linear(i, o, bias=b)  # noqa: E731
        self.q_proj, self.k_proj, self.v_proj = lin(D, D), lin(D, D), lin(D, D)
        if cfg["use_short_conv"]:
            W = cfg.get("conv_size", 4)
            self.q_conv1d = torch.nn.Conv1d(D, D, W, groups=D, bias=False)
            self.k_conv1d = torch.nn.Conv1d(D, D, W, groups=D, bias=False)
            self.v_conv1d = torch.nn.Conv1d(D, D, W, groups=D, bias=False)
        self.beta_plan, self.lambda_plan = coefficient_plan(cfg["rule"], cfg["beta_max"])
        token = cfg["parameterisation"] == "token"
        if self.beta_plan:
            width = D if self.beta_plan[2] else H
            if token:
                self.b_proj = lin(D, width, cfg["rule"] == "mamba2")
            else:
                self.b_const = torch.nn.Parameter(torch.zeros(width))
        if self.lambda_plan:
            if token:
                self.l_proj = lin(D, H, True)
            else:
                self.l_const = torch.nn.Parameter(torch.zeros(H))
        self.o_norm = torch.nn.Module()
        self.o_norm.weight = torch.nn.Parameter(torch.ones(self.Dh))
        if cfg["use_output_gate"]:
            self.g_proj = lin(D, D)
        self.o_proj = lin(D, D)
        self.form = "auto"

    def _coefficient(self, x, plan, proj, const):
        if plan is None:
            return None
        z = proj(x) if proj is not None else const.expand(x.shape[:-1] + const.shape)
        return _stream(z, plan[0], plan[1])

    def forward(self, x, starts):
        cfg = self.cfg
        Bn, T, D = x.shape
        H, Dh = self.H, self.Dh
        qkv = []
        for name in ("q", "k", "v"):
            u = getattr(self, name + "_proj")(x)
            if cfg["use_short_conv"]:
                u = short_conv(u, getattr(self, name + "_conv1d").weight, starts)
            qkv.append(u.reshape(Bn, T, H, Dh).transpose(1, 2))  # [B, H, T, Dh]
        q, k, v = qkv
        beta = self._coefficient(x, self.beta_plan, getattr(self, "b_proj", None), getattr(self, "b_const", None))
        lam = self._coefficient(x, self.lambda_plan, getattr(self, "l_proj", None), getattr(self, "l_const", None))
        if beta is None:
            beta = torch.zeros(Bn, T, H, dtype=x.dtype, device=x.device)
        if beta.shape[-1] == D and is_per_column_rule(cfg["rule"]):
            beta = beta.reshape(Bn, T, H, Dh).permute(0, 2, 1, 3)  # [B, H, T, Dv]
        else:
            beta = beta.permute(0, 2, 1)  # [B, H, T]
        lam = torch.zeros(Bn, H, T, dtype=x.dtype, device=x.device) if lam is None else lam.permute(0, 2, 1)
        retnet_g = torch.tensor(cfg.get("retnet_decay") or [retnet_decay(h) for h in range(H)], dtype=x.dtype)
        o = fast_weight(
            cfg["rule"],
            q,
            k,
            v,
            beta,
            lam,
            alignment=cfg["alignment"],
            qk_norm=cfg["qk_norm"],
            coupling=cfg.get("coupling", True),
            window=cfg["window"],
            eps=cfg.get("eps", 1e-6),
            eps_gamma=cfg.get("eps_gamma", 1e-3),
            eps_rms=cfg.get("eps_rms", 1e-6),
            mamba_A=cfg.get("mamba_A", 1.0),
            retnet_g=retnet_g.to(x.device)[None, :],
            starts=starts[:, None, :],
            form=self.form,
            chunk=cfg.get("chunk_size", 64),
        )
        o = rms_norm(o, self.o_norm.weight, cfg.get("norm_eps", 1e-6))  # [B, H, T, Dv]
        y = o.transpose(1, 2).reshape(Bn, T, D)
        if cfg["use_output_gate"]:
            y = F.silu(self.g_proj(x)) * y
        return self.o_proj(y)


class SoftmaxAttention(torch.nn.Module):
    """Transformer baseline mixer: q/k/v projections, with use_short_conv the causal depthwise conv
    + SiLU (as the fast-weight mixer), with qk_norm "rms" the parameter-free RMS norm of q and k per
    head (before RoPE), causal softmax attention with RoPE (positions restart at each sequence
    start; attention does not cross starts), output projection. qk_norm "none" and no conv is the
    plain Transformer (and what every layout-version-1 Transformer ran)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D, H = cfg["hidden_size"], cfg["num_heads"]
        self.H, self.Dh = H, D // H
        if cfg["qk_norm"] not in ("rms", "none"):
            raise ValueError("the transformer takes qk_norm rms or none, got %r" % (cfg["qk_norm"],))
        self.q_proj = torch.nn.Linear(D, D, bias=False)
        self.k_proj = torch.nn.Linear(D, D, bias=False)
        self.v_proj = torch.nn.Linear(D, D, bias=False)
        if cfg["use_short_conv"]:
            W = cfg.get("conv_size", 4)
            self.q_conv1d = torch.nn.Conv1d(D, D, W, groups=D, bias=False)
            self.k_conv1d = torch.nn.Conv1d(D, D, W, groups=D, bias=False)
            self.v_conv1d = torch.nn.Conv1d(D, D, W, groups=D, bias=False)
        self.o_proj = torch.nn.Linear(D, D, bias=False)

    def _head(self, x, name, starts):
        Bn, T, D = x.shape
        u = getattr(self, name + "_proj")(x)
        if self.cfg["use_short_conv"]:
            u = short_conv(u, getattr(self, name + "_conv1d").weight, starts)
        u = u.reshape(Bn, T, self.H, self.Dh)
        if name != "v":
            u = normalize_qk(u, self.cfg["qk_norm"], self.cfg.get("eps_rms", 1e-6))
        return u

    def forward(self, x, starts):
        Bn, T, D = x.shape
        H, Dh = self.H, self.Dh
        seq = _sequence_starts(starts, Bn, T, x.device)
        pos = torch.arange(T, device=x.device)[None, :] - seq
        q = rope(self._head(x, "q", starts), pos, self.cfg["rope_theta"])
        k = rope(self._head(x, "k", starts), pos, self.cfg["rope_theta"])
        v = self._head(x, "v", starts)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(Dh)
        t_idx = torch.arange(T, device=x.device)
        allowed = (t_idx[None, :, None] >= t_idx[None, None, :]) & (t_idx[None, None, :] >= seq[:, :, None])
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        att = torch.softmax(scores, -1)
        y = torch.einsum("bhts,bshd->bthd", att, v).reshape(Bn, T, D)
        return self.o_proj(y)


class _Norm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(torch.nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.gate_proj = torch.nn.Linear(D, F_, bias=False)
        self.up_proj = torch.nn.Linear(D, F_, bias=False)
        self.down_proj = torch.nn.Linear(F_, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg.get("norm_eps", 1e-6)
        self.attn_norm = _Norm(cfg["hidden_size"], eps)
        self.attn = SoftmaxAttention(cfg) if cfg["rule"] == "transformer" else FastWeightAttention(cfg)
        self.mlp_norm = _Norm(cfg["hidden_size"], eps)
        self.mlp = SwiGLU(cfg["hidden_size"], cfg["intermediate_size"])

    def forward(self, h, starts):
        h = h + self.attn(self.attn_norm(h), starts)
        return h + self.mlp(self.mlp_norm(h))


class _Backbone(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = torch.nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = torch.nn.ModuleList([Block(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = _Norm(cfg["hidden_size"], cfg.get("norm_eps", 1e-6))


class FalconLM(torch.nn.Module):
    """The language model of SPEC section 7 with the hf parameter names of `falcon convert --to hf`.

    `forward(ids [B, T] long, starts [B, T] bool or None) -> logits [B, T, V]`. `form` (one of
    FORMS, default `auto`) picks how the fast-weight mixers run (`fast_weight`).
    """

    def __init__(self, cfg, form="auto"):
        super().__init__()
        self.cfg = cfg
        self.model = _Backbone(cfg)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = torch.nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.set_form(form)

    def set_form(self, form):
        """Run every fast-weight mixer in `form` (auto, fla, chunked or recurrent)."""
        if form not in FORMS:
            raise ValueError("unknown form %r; expected one of %s" % (form, ", ".join(FORMS)))
        self.form = form
        for block in self.model.layers:
            if isinstance(block.attn, FastWeightAttention):
                block.attn.form = form
        return self

    def forward(self, ids, starts=None):
        if starts is None:
            starts = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        h = self.model.embeddings(ids)
        for block in self.model.layers:
            h = block(h, starts)
        h = self.model.norm(h)
        if self.cfg["tie_word_embeddings"]:
            return h @ self.model.embeddings.weight.t()
        return self.lm_head(h)


REQUIRED_CONFIG = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_heads",
    "intermediate_size",
    "rule",
    "alignment",
    "qk_norm",
    "use_short_conv",
    "use_output_gate",
    "parameterisation",
    "beta_max",
    "window",
    "tie_word_embeddings",
    "rope_theta",
)


HF_FORMAT_VERSION = 2


def config_as_trained(cfg):
    """The config of an export as its falcon ran it: layout version 1 ran every Transformer plain
    (no short conv, no QK norm) whatever use_short_conv and qk_norm said; version 2 honours them."""
    if cfg.get("falcon_format_version", 1) < 2 and cfg["rule"] == "transformer":
        return dict(cfg, use_short_conv=False, qk_norm="none")
    return cfg


def load_hf(directory, dtype=torch.float32, form="auto"):
    """Load an `hf` export (config.json + model.safetensors) into a FalconLM of `dtype` whose
    fast-weight mixers run in `form` (FORMS).

    Refuses (CheckpointError) a config without a required field, an unknown rule or layout version,
    and a tensor set that differs from the model's: every missing and every unexpected name is
    listed. A layout-version-1 Transformer is loaded plain (`config_as_trained`).
    """
    cfg_path = os.path.join(directory, "config.json")
    with open(cfg_path) as f:
        try:
            cfg = json.load(f)
        except ValueError as err:
            raise CheckpointError("%s: not JSON (%s)" % (cfg_path, err))
    if not isinstance(cfg, dict):
        raise CheckpointError("%s: not a JSON object" % cfg_path)
    for key in REQUIRED_CONFIG:
        if key not in cfg:
            raise CheckpointError("%s: missing field %s" % (cfg_path, key))
    if cfg["rule"] not in RULES + ("transformer",):
        raise CheckpointError("%s: field rule %r is not a known rule" % (cfg_path, cfg["rule"]))
    version = cfg.get("falcon_format_version", 1)
    if type(version) is not int or not 1 <= version <= HF_FORMAT_VERSION:
        raise CheckpointError(
            "%s: field falcon_format_version %r is not supported (expected 1 to %d)"
            % (cfg_path, version, HF_FORMAT_VERSION)
        )
    cfg = config_as_trained(cfg)
    if cfg["rule"] == "transformer" and cfg["qk_norm"] not in ("rms", "none"):
        raise CheckpointError(
            "%s: field qk_norm %r: the transformer takes rms or none" % (cfg_path, cfg["qk_norm"])
        )
    model = FalconLM(cfg, form)
    st_path = os.path.join(directory, "model.safetensors")
    tensors, _ = read_safetensors(st_path)
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            "%s: tensors do not match the config: missing %s, unexpected %s" % (st_path, missing, unexpected)
        )
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(own[name].shape):
            raise CheckpointError(
                "%s: tensor %r has shape %s, the config needs %s"
                % (st_path, name, tuple(t.shape), tuple(own[name].shape))
            )
    model = model.to(dtype)
    model.load_state_dict({n: t.to(dtype) for n, t in tensors.items()})
    return model.eval()


def main(argv):
    import argparse

    p = argparse.ArgumentParser(description="logits of a prompt from falcon hf exports")
    p.add_argument("hf_dirs", nargs="+", help="one or more hf export directories")
    p.add_argument("--ids", required=True, help="comma-separated token ids")
    p.add_argument("--starts", default="", help="comma-separated positions where a new sequence starts")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--json", action="store_true", help="print {dir: [[logit, ...], ...]} as JSON")
    p.add_argument("--form", choices=FORMS, default="auto", help="how the fast-weight mixers run")
    args = p.parse_args(argv)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    try:
        ids = torch.tensor([[int(s) for s in args.ids.split(",") if s.strip()]], dtype=torch.long)
        starts = torch.zeros(ids.shape, dtype=torch.bool)
        for s in args.starts.split(","):
            if s.strip():
                starts[0, int(s)] = True
    except (ValueError, IndexError) as err:
        print("falcon_torch: bad --ids or --starts (%s)" % err, file=sys.stderr)
        return 2
    results = {}
    for d in args.hf_dirs:
        try:
            model = load_hf(d, dtype, args.form)
        except (CheckpointError, OSError) as err:
            print("falcon_torch: %s" % err, file=sys.stderr)
            return 2
        if int(ids.max()) >= model.cfg["vocab_size"] or int(ids.min()) < 0:
            print("falcon_torch: token ids must be in [0, %d)" % model.cfg["vocab_size"], file=sys.stderr)
            return 2
        with torch.no_grad():
            results[d] = model(ids, starts)[0].tolist()
    if args.json:
        print(json.dumps(results))
        return 0
    for d, logits in results.items():
        print(d)
        for t, row in enumerate(logits):
            best = max(range(len(row)), key=lambda i: row[i])
            print("  position %d: argmax %d (logit %.6f)" % (t, best, row[best]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
