#!/usr/bin/env python3
"""Training speed of the PyTorch bridge (interop/torch): the same model and batches trained with
AdamW, the fast-weight mixers in each form (fla ops, the chunked PyTorch form, the recurrent
form), tokens/s after warm-up. One JSON line per form, then the ratios to the recurrent form.

The model, its initial weights and the batches come from a run directory of
`interop/torch/prepare_run.ts` (the `addition` preset's model by default: 4 layers x 256, B=32 x T=128),
so every form trains the same thing `falcon train --preset addition` would. Each step is one
train_ddp.py step (global-mean loss, clipping, AdamW, the schedule's learning rate). Batches are
reused cyclically when the file holds fewer than the steps asked for.

    deno run -A interop/torch/prepare_run.ts --out /tmp/bridge --preset addition --rule falcon1 --steps 64
    python3 bench/torch_bridge_bench.py /tmp/bridge --forms fla,chunked,recurrent --steps 40 --warmup 10

On Hopper with Triton >= 3.4 and < 3.7.1 fla refuses the gated backward (fla issue 640);
`--force-gated` sets `fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True` so the gated ops run, and
their lines say `timing_only`. `--autocast bf16` runs the forward under bf16 autocast (fla's
`chunk_delta_rule` needs bf16 inputs; the fla form casts them itself otherwise).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "interop", "torch"))
import falcon_fla as ff  # noqa: E402
import falcon_torch as ft  # noqa: E402
import train_ddp as td  # noqa: E402


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(form, args, header, body, device):
    model = ft.load_hf(os.path.join(args.run, "init"), torch.float32, form).train().to(device)
    train_cfg = header["train"]
    optimizer = td.optimizer_for(model, train_cfg)
    V = model.cfg["vocab_size"]
    rows = slice(0, header["B"])
    steps = args.steps_recurrent if form == "recurrent" else args.steps
    warmup = min(args.warmup, steps - 1)
    losses = []
    t0 = None
    for i in range(steps):
        if i == warmup:
            sync(device)
            t0 = time.perf_counter()
        ids, targets, weights, starts, total = td.batch_rows(header, body, i % header["batches"], rows)
        ids, targets, starts = ids.to(device), targets.to(device), starts.to(device)
        weights = weights.to(device=device, dtype=torch.float32)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            logits = model(ids, starts)
        per = F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1), reduction="none")
        loss = (per * weights.reshape(-1)).sum() / total
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.sqrt(sum((g.float() * g.float()).sum() for g in grads))
        factor = torch.clamp(train_cfg["clipNorm"] / norm, max=1.0)  # on the device: no sync per step
        for g in grads:
            g.mul_(factor)
        for group in optimizer.param_groups:
            group["lr"] = td.learning_rate(header["firstStep"] + i, train_cfg)
        optimizer.step()
        if i % 10 == 0 or i == steps - 1:
            losses.append([i + 1, round(loss.item(), 4)])
    sync(device)
    seconds = time.perf_counter() - t0
    tokens = (steps - warmup) * header["B"] * header["T"]
    return {
        "form": form, "rule": model.cfg["rule"], "device": str(device), "autocast": args.autocast,
        "B": header["B"], "T": header["T"], "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps, "warmup": warmup, "tokensPerSecond": tokens / seconds,
        "stepMs": 1000 * seconds / (steps - warmup), "losses": losses,
        "peakMemoryMiB": round(torch.cuda.max_memory_allocated() / 2 ** 20) if device.type == "cuda" else None,
    }


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", help="run directory of prepare_run.ts (init/ and batches.bin)")
    p.add_argument("--forms", default="fla,chunked,recurrent")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--steps-recurrent", type=int, default=12, help="steps of the (slow) recurrent form")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--autocast", choices=("off", "bf16"), default="off")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--force-gated", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # how one would train; the parity checks turn it off
    timing_only = False
    if args.force_gated:
        import fla.ops.common.chunk_o as chunk_o

        chunk_o.TRITON_ABOVE_3_7_1 = True
        timing_only = True
    header, body = td.read_batch_file(os.path.join(args.run, "batches.bin"))
    results = {}
    for form in args.forms.split(","):
        try:
            r = measure(form, args, header, body, device)
            rule = r["rule"]
            r["timing_only"] = bool(form == "fla" and timing_only and ff.FLA_OPS.get(rule) != "chunk_delta_rule")
            if form == "fla" and ff.FLA_OPS.get(rule) is None:
                r["note"] = "rule %s has no fla op: this is the chunked form" % rule
        except Exception as err:  # report and go on to the next form
            r = {"form": form, "error": ("%s: %s" % (type(err).__name__, err))[:500]}
        results[form] = r
        print(json.dumps(r), flush=True)
    base = results.get("recurrent", {}).get("tokensPerSecond")
    if base:
        print(json.dumps({"ratio_to_recurrent": {f: r["tokensPerSecond"] / base for f, r in results.items()
                                                 if "tokensPerSecond" in r},
                          "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
