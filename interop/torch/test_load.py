"""falcon_torch.load_hf: a saved FalconLM reloads to the same logits, and an export whose tensors or
config do not match is refused with a CheckpointError naming the file and the tensor or field.

Run: python3 interop/torch/test_load.py   (exits 1 on any failure)
"""

import json
import os
import shutil
import struct
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_torch as ft  # noqa: E402

TAGS = {torch.float32: ("F32", "f"), torch.float64: ("F64", "d")}
CONFIG = dict(
    model_type="falcon_fast_weight",
    falcon_format_version=1,
    vocab_size=11,
    hidden_size=8,
    num_hidden_layers=2,
    num_heads=2,
    intermediate_size=16,
    rule="falcon3",
    alignment="prefix",
    qk_norm="rms",
    use_short_conv=True,
    use_output_gate=True,
    parameterisation="token",
    beta_max=2.0,
    window=4,
    chunk_size=64,
    tie_word_embeddings=False,
    rope_theta=10000.0,
)


def write_safetensors(path, tensors):
    """A plain safetensors writer (the format's reference layout), for building test exports."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        tag, code = TAGS[t.dtype]
        values = t.reshape(-1).tolist()
        raw = struct.pack("<%d%s" % (len(values), code), *values)
        header[name] = {"dtype": tag, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def export(directory, model, config, drop=(), reshape=()):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    state = {n: t.detach().clone() for n, t in model.state_dict().items() if n not in drop}
    for n in reshape:
        state[n] = state[n].reshape(-1)
    write_safetensors(os.path.join(directory, "model.safetensors"), state)


def expect_error(label, fn, *words):
    try:
        fn()
    except ft.CheckpointError as err:
        missing = [w for w in words if w not in str(err)]
        return (not missing, "%s: refused (%s)%s" % (label, err, " but lacks %s" % missing if missing else ""))
    return (False, "%s: accepted" % label)


def main():
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="falcon_torch_load_")
    results = []
    try:
        model = ft.FalconLM(CONFIG).double()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
        ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
        want = model(ids)
        good = os.path.join(root, "good")
        export(good, model, CONFIG)
        got = ft.load_hf(good, torch.float64)(ids)
        err = (got - want).abs().max().item()
        results.append((err == 0.0, "reloaded export gives the same float64 logits (max abs diff %g)" % err))

        bad = os.path.join(root, "missing")
        export(bad, model, CONFIG, drop=("model.layers.1.attn.k_proj.weight",))
        results.append(expect_error("missing tensor", lambda: ft.load_hf(bad), "model.safetensors",
                                    "model.layers.1.attn.k_proj.weight"))
        bad = os.path.join(root, "shape")
        export(bad, model, CONFIG, reshape=("model.layers.0.attn.o_proj.weight",))
        results.append(expect_error("wrong shape", lambda: ft.load_hf(bad), "model.layers.0.attn.o_proj.weight"))
        bad = os.path.join(root, "config")
        export(bad, model, {k: v for k, v in CONFIG.items() if k != "num_heads"})
        results.append(expect_error("config without num_heads", lambda: ft.load_hf(bad), "config.json", "num_heads"))
        bad = os.path.join(root, "rule")
        export(bad, model, dict(CONFIG, rule="falcon9"))
        results.append(expect_error("unknown rule", lambda: ft.load_hf(bad), "config.json", "falcon9"))
        bad = os.path.join(root, "tied")
        export(bad, model, dict(CONFIG, tie_word_embeddings=True))
        results.append(expect_error("extra lm_head for a tied config", lambda: ft.load_hf(bad), "lm_head.weight"))
        bad = os.path.join(root, "future")
        export(bad, model, dict(CONFIG, falcon_format_version=3))
        results.append(
            expect_error("layout version 3", lambda: ft.load_hf(bad), "config.json", "falcon_format_version")
        )

        # layout version 1 ran every Transformer plain, whatever use_short_conv and qk_norm said
        plain_cfg = dict(CONFIG, rule="transformer", use_short_conv=False, qk_norm="none", falcon_format_version=2)
        plain = ft.FalconLM(plain_cfg).double()
        with torch.no_grad():
            for p in plain.parameters():
                p.add_(torch.randn_like(p) * 0.1)
        v1 = os.path.join(root, "transformer_v1")
        export(v1, plain, dict(plain_cfg, use_short_conv=True, qk_norm="rms", falcon_format_version=1))
        loaded = ft.load_hf(v1, torch.float64)
        err = (loaded(ids) - plain(ids)).abs().max().item()
        results.append((
            err == 0.0 and not loaded.cfg["use_short_conv"] and loaded.cfg["qk_norm"] == "none",
            "a version-1 Transformer export loads plain (max abs diff %g against the plain model)" % err,
        ))
        # version 2 honours the fields: the same tensors no longer match a config with short conv
        bad = os.path.join(root, "transformer_v2_no_conv")
        export(bad, plain, dict(plain_cfg, use_short_conv=True))
        results.append(expect_error("version-2 Transformer with use_short_conv but no conv tensors",
                                    lambda: ft.load_hf(bad), "model.layers.0.attn.q_conv1d.weight"))
        normed_cfg = dict(plain_cfg, qk_norm="rms")
        normed = os.path.join(root, "transformer_v2_rms")
        export(normed, plain, normed_cfg)
        err = (ft.load_hf(normed, torch.float64)(ids) - plain(ids)).abs().max().item()
        results.append((err > 1e-6, "qk_norm rms changes a version-2 Transformer's logits (max diff %g)" % err))
    finally:
        shutil.rmtree(root)
    failed = 0
    for ok, msg in results:
        print(("ok   " if ok else "FAIL ") + msg)
        failed += 0 if ok else 1
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
