#!/usr/bin/env python3
"""fla training peer: the `addition` preset's model with fla's DeltaNet / GatedDeltaNet mixers (PyTorch +
Triton), trained with AdamW on the SAME addition batches as `falcon train` (written by
bench/addition_batches.ts), tokens/s after warm-up. Prints one JSON line per run.

The model mirrors FalconLM (SPEC section 7): tied embedding, per block RMSNorm -> mixer -> residual,
RMSNorm -> SwiGLU MLP (ffn hidden from the batch file's model config) -> residual, final RMSNorm, tied
logits; loss = weighted next-token cross-entropy sum / weight sum, AdamW with the preset's lr, betas,
weight decay and gradient-norm clipping. Mixers: fla.layers.DeltaNet (short conv, output gate, L2 qk
norm, beta) and fla.layers.GatedDeltaNet (head_dim = d_model / heads, expand_v 1).

On Hopper with Triton < 3.7.1 fla refuses the gated chunk ops (a backward correctness guard, fla issue
640); `--force-gated` sets `fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True` so they run, and the result
is marked `timing_only`. `chunk_delta_rule` needs bf16 inputs: `--dtype bf16` (autocast) is the default.

  python3 bench/fla_train_peer.py batches.bin --mixers deltanet,gated_deltanet --steps 60 --warmup 15
"""

import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_batches(path):
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        body = f.read()
    n = header["B"] * header["T"]
    out = []
    for i in range(header["batches"]):
        base = i * n * 13
        ids = torch.frombuffer(bytearray(body[base:base + 4 * n]), dtype=torch.int32)
        targets = torch.frombuffer(bytearray(body[base + 4 * n:base + 8 * n]), dtype=torch.int32)
        weights = torch.frombuffer(bytearray(body[base + 8 * n:base + 12 * n]), dtype=torch.float32)
        shape = (header["B"], header["T"])
        out.append((ids.long().view(shape), targets.long().view(shape), weights.view(shape)))
    return header, out


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class PeerLM(nn.Module):
    def __init__(self, cfg, mixer):
        super().__init__()
        from fla.layers.delta_net import DeltaNet
        from fla.layers.gated_deltanet import GatedDeltaNet
        d, heads = cfg["dModel"], cfg["heads"]
        self.embed = nn.Embedding(cfg["vocabSize"], d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.blocks = nn.ModuleList()
        for i in range(cfg["layers"]):
            if mixer == "deltanet":
                m = DeltaNet(hidden_size=d, num_heads=heads, use_gate=True, use_short_conv=True, layer_idx=i)
            else:
                m = GatedDeltaNet(hidden_size=d, num_heads=heads, head_dim=d // heads, expand_v=1,
                                  use_gate=True, use_short_conv=True, layer_idx=i)
            self.blocks.append(nn.ModuleDict({
                "norm1": nn.RMSNorm(d, eps=1e-6), "mixer": m,
                "norm2": nn.RMSNorm(d, eps=1e-6), "mlp": SwiGLU(d, cfg["ffnHidden"]),
            }))
        self.final = nn.RMSNorm(d, eps=1e-6)

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            o = b["mixer"](b["norm1"](h))
            h = h + (o[0] if isinstance(o, tuple) else o)
            h = h + b["mlp"](b["norm2"](h))
        return self.final(h) @ self.embed.weight.t()


def run(mixer, header, batches, args):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = PeerLM(header["model"], mixer).to(dev)
    tc = header["train"]
    opt = torch.optim.AdamW(model.parameters(), lr=tc["lr"], betas=(tc["beta1"], tc["beta2"]),
                            eps=tc["eps"], weight_decay=tc["weightDecay"], fused=True)
    on_dev = [(i.to(dev), t.to(dev), w.to(dev)) for i, t, w in batches]
    V = header["model"]["vocabSize"]
    losses = []
    torch.cuda.reset_peak_memory_stats()
    t0 = None
    for step in range(args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        ids, targets, weights = on_dev[step % len(on_dev)]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
            logits = model(ids)
        per = F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1), reduction="none")
        loss = (per * weights.reshape(-1)).sum() / weights.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc["clipNorm"])
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            losses.append([step + 1, round(loss.item(), 4)])
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    tokens = (args.steps - args.warmup) * header["B"] * header["T"]
    return {
        "peer": "fla", "mixer": mixer, "dtype": args.dtype, "B": header["B"], "T": header["T"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": args.steps, "warmup": args.warmup, "tokensPerSecond": tokens / secs,
        "stepMs": 1000 * secs / (args.steps - args.warmup),
        "peakMemoryMiB": round(torch.cuda.max_memory_allocated() / 2 ** 20),
        "losses": losses,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("batches")
    p.add_argument("--mixers", default="deltanet,gated_deltanet")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--force-gated", action="store_true")
    args = p.parse_args()
    import fla
    timing_only = False
    if args.force_gated:
        import fla.ops.common.chunk_o as chunk_o
        chunk_o.TRITON_ABOVE_3_7_1 = True
        timing_only = True
    header, batches = read_batches(args.batches)
    for mixer in args.mixers.split(","):
        try:
            result = run(mixer, header, batches, args)
            result["timing_only"] = timing_only and mixer == "gated_deltanet"
            result["fla"] = getattr(fla, "__version__", "?")
        except Exception as e:  # report and go on to the next mixer
            result = {"peer": "fla", "mixer": mixer, "error": f"{type(e).__name__}: {e}"[:500]}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
