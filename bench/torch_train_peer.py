#!/usr/bin/env python3
"""PyTorch CPU eager training peer of a falcon model (issue 5's benchmark).

Loads an `hf` export (`falcon convert CKPT DIR --to hf`) with interop/torch/falcon_torch.py, then times
AdamW training steps on random token batches of the same shape as the preset (B rows of T tokens,
cross-entropy on every position). falcon_torch.py computes the rules in their RECURRENT form (a Python
loop over positions), so this peer measures PyTorch eager on the same model and shapes, not the same
kernel algorithm. Prints one JSON line.

  python3 bench/torch_train_peer.py DIR --threads 2 --B 16 --T 32 --steps 20 --warmup 3
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop", "torch"))
import falcon_torch  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("hf_dir")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--B", type=int, default=16)
    p.add_argument("--T", type=int, default=32)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = falcon_torch.load_hf(a.hf_dir)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    V = model.cfg["vocab_size"]
    t0 = None
    for step in range(a.steps):
        if step == a.warmup:
            t0 = time.perf_counter()
        ids = torch.randint(0, V, (a.B, a.T))
        targets = torch.randint(0, V, (a.B, a.T))
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    seconds = time.perf_counter() - t0
    tokens = (a.steps - a.warmup) * a.B * a.T
    print(json.dumps({"peer": "pytorch-eager-training", "torch": torch.__version__, "rule": model.cfg["rule"],
                      "threads": torch.get_num_threads(), "B": a.B, "T": a.T, "steps": a.steps - a.warmup,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "tokens_per_s": tokens / seconds}))


if __name__ == "__main__":
    main()
