#!/usr/bin/env python3
"""Train a falcon model in PyTorch, on one process or many (torchrun + DistributedDataParallel),
with the task, config and batches of `falcon train`, and write an hf export that `falcon convert`
turns back into a native checkpoint for `falcon eval` / `predict`.

Input: an hf export (the model; `prepare_run.ts` writes one initialised as `falcon train` would,
or `falcon convert CKPT DIR --to hf` makes one of a checkpoint) and a batch file written by
`interop/torch/prepare_run.ts` (the trainer's own data stream, so no second copy of the tasks).

    deno run -A interop/torch/prepare_run.ts --out RUN --preset addition --rule falcon1 --steps 2000
    torchrun --nproc_per_node 8 interop/torch/train_ddp.py RUN            # or: python3 train_ddp.py RUN
    deno run -A cli/main.ts convert RUN/hf RUN/checkpoint.safetensors --to native
    deno run -A cli/main.ts eval RUN/checkpoint.safetensors

What one step does, as `falcon train` (src/train/trainer.ts, optimizer.ts, schedule.ts): the global
batch of `B` rows is split into `B / N` rows per process (rank `r` takes rows `r*B/N ..`); each
process's loss is its weighted cross-entropy sum times `N / W` (`W` the batch's total weight), so
DDP's gradient average is the gradient of the global mean loss whatever the split; the global
gradient norm is clipped to `clipNorm` (factor `clipNorm / norm` above it); AdamW with bias
correction and decoupled weight decay on matrices only (tensors of two or more dimensions), the
learning rate of the step from the warmup + cosine schedule. A non-finite loss or gradient stops
the run before that step's update, and nothing is written.

Output (rank 0): `OUT/` (default `RUN/hf`) with `config.json` (the input's, its `falcon_metadata`
moved on: step, stream state, train config) and `model.safetensors`, and `RUN/metrics.jsonl` (one
line per step: step, loss, lr, gradNorm, tokens, elapsed). The last stdout line is a JSON summary.
Backend: gloo on CPU, nccl on CUDA. The optimizer state is not written (hf exports hold none).
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_torch as ft  # noqa: E402

BATCH_BYTES_PER_TOKEN = 13


class RunError(ValueError):
    """A refused input (batch file, export, sizes); the message names the thing and the value."""


def read_batch_file(path):
    """`(header, body bytes)` of a batch file of prepare_run.ts (module doc there), validated."""
    with open(path, "rb") as f:
        try:
            header = json.loads(f.readline())
        except ValueError as err:
            raise RunError("%s: the first line is not JSON (%s)" % (path, err))
        body = f.read()
    for key in ("B", "T", "firstStep", "batches", "rngStates", "model", "task", "train"):
        if key not in header:
            raise RunError("%s: header has no field %s" % (path, key))
    need = header["batches"] * header["B"] * header["T"] * BATCH_BYTES_PER_TOKEN
    if len(body) != need:
        raise RunError("%s: %d bytes of batches, the header (%d batches of %d x %d) needs %d"
                       % (path, len(body), header["batches"], header["B"], header["T"], need))
    return header, body


def batch_rows(header, body, index, rows):
    """Batch `index` restricted to `rows` (a slice): ids, targets (long), weights (float64), starts
    (bool), each `[len(rows), T]`, and the whole batch's weight."""
    Bn, T = header["B"], header["T"]
    n = Bn * T
    base = index * n * BATCH_BYTES_PER_TOKEN
    part = lambda off, size, dtype: torch.frombuffer(  # noqa: E731
        bytearray(body[base + off * n: base + off * n + size * n]), dtype=dtype).view(Bn, T)
    ids = part(0, 4, torch.int32).long()
    targets = part(4, 4, torch.int32).long()
    weights = part(8, 4, torch.float32).double()
    starts = part(12, 1, torch.uint8).bool()
    return ids[rows], targets[rows], weights[rows], starts[rows], float(weights.sum())


def learning_rate(step, train):
    """src/train/schedule.ts: linear warmup, then cosine to `lr * minLrRatio`."""
    lr, warmup, steps = train["lr"], train["warmupSteps"], train["steps"]
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    span = max(steps - warmup, 1)
    progress = min(max((step - warmup) / span, 0), 1)
    floor = lr * train["minLrRatio"]
    return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def clip_factor(norm, clip_norm):
    """src/train/optimizer.ts clipFactor."""
    return clip_norm / norm if clip_norm > 0 and norm > clip_norm else 1.0


def optimizer_for(model, train):
    """AdamW over `model`: weight decay on tensors of >= 2 dims (matrices, embeddings, convs)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": train["weightDecay"]}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train["lr"], betas=(train["beta1"], train["beta2"]), eps=train["eps"])


def check_same_run(init_cfg, header, init_dir, batches):
    """The export and the batch file must describe the same model and task."""
    meta = init_cfg.get("falcon_metadata", {})
    for key, field in (("model_config", "model"), ("task_config", "task")):
        if key not in meta:
            raise RunError("%s: config.json has no falcon_metadata.%s (export a native checkpoint)" % (init_dir, key))
        if json.loads(meta[key]) != header[field]:
            raise RunError("%s: falcon_metadata.%s %s differs from the %s of %s (%s)"
                           % (init_dir, key, meta[key], field, batches, json.dumps(header[field])))
    step = int(meta.get("step", "0"))
    if step + 1 != header["firstStep"]:
        raise RunError("%s is at step %d, but %s starts at step %d" % (init_dir, step, batches, header["firstStep"]))


def rows_of(batch_size, world, rank, path):
    """The rows of the global batch that process `rank` of `world` trains on (a slice)."""
    if batch_size % world != 0:
        raise RunError("batchSize %d of %s does not split over %d processes" % (batch_size, path, world))
    per = batch_size // world
    return slice(rank * per, (rank + 1) * per)


def setup_distributed(device_kind):
    """`(rank, world, device)`; initialises the process group under torchrun (WORLD_SIZE set)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if device_kind == "auto":
        device_kind = "cuda" if torch.cuda.is_available() else "cpu"
    if device_kind == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if world > 1:
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, device


def train(args):
    rank, world, device = setup_distributed(args.device)
    batches_path = args.batches or os.path.join(args.run, "batches.bin")
    init_dir = args.init or os.path.join(args.run, "init")
    out_dir = args.out or os.path.join(args.run, "hf")
    header, body = read_batch_file(batches_path)
    with open(os.path.join(init_dir, "config.json")) as f:
        init_cfg = json.load(f)
    check_same_run(init_cfg, header, init_dir, batches_path)
    Bn = header["B"]
    rows = rows_of(Bn, world, rank, batches_path)
    steps = header["batches"] if args.steps is None else args.steps
    if not 1 <= steps <= header["batches"]:
        raise RunError("--steps %d: %s holds %d batches" % (steps, batches_path, header["batches"]))
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.dtype]
    model = ft.load_hf(init_dir, dtype, args.form).train().to(device)
    train_cfg = header["train"]
    optimizer = optimizer_for(model, train_cfg)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    V = model.cfg["vocab_size"]
    metrics = []
    tokens = 0
    t0 = time.perf_counter()
    timed_from = None
    for i in range(steps):
        step = header["firstStep"] + i
        if i == args.warmup_steps:
            if device.type == "cuda":
                torch.cuda.synchronize()
            timed_from = (time.perf_counter(), tokens)
        ids, targets, weights, starts, total_weight = batch_rows(header, body, i, rows)
        if not total_weight > 0:
            raise RunError("step %d: the batch has no supervised tokens" % step)
        ids, targets, starts = ids.to(device), targets.to(device), starts.to(device)
        weights = weights.to(device=device, dtype=dtype)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            logits = net(ids, starts)
        per_token = F.cross_entropy(logits.to(dtype).reshape(-1, V), targets.reshape(-1), reduction="none")
        loss_sum = (per_token * weights.reshape(-1)).sum()
        optimizer.zero_grad(set_to_none=True)
        (loss_sum * (world / total_weight)).backward()
        if world > 1:
            torch.distributed.all_reduce(loss_sum)
        mean_loss = loss_sum.item() / total_weight
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        grad_norm = math.sqrt(sum(float((g.double() * g.double()).sum()) for g in grads))
        if not math.isfinite(mean_loss) or not math.isfinite(grad_norm):
            raise RunError("training diverged at step %d: loss %r, gradient norm %r; nothing written"
                           % (step, mean_loss, grad_norm))
        factor = clip_factor(grad_norm, train_cfg["clipNorm"])
        if factor != 1.0:
            for g in grads:
                g.mul_(factor)
        lr = learning_rate(step, train_cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        tokens += Bn * header["T"]
        metrics.append({"step": step, "loss": mean_loss, "lr": lr, "gradNorm": grad_norm, "tokens": total_weight,
                        "elapsed": time.perf_counter() - t0})
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    if timed_from is None:
        timed_from = (t0, 0)
    timed = time.perf_counter() - timed_from[0]
    last_step = header["firstStep"] + steps - 1
    summary = {"steps": steps, "lastStep": last_step, "processes": world, "device": str(device), "form": args.form,
               "dtype": args.dtype, "autocast": args.autocast, "timing_only": args.force_gated,
               "finalLoss": metrics[-1]["loss"],
               "tokensPerSecond": (tokens - timed_from[1]) / max(timed, 1e-9), "elapsedSeconds": elapsed}
    if rank == 0:
        config = dict(init_cfg)
        meta = dict(config.get("falcon_metadata", {}))
        train_done = dict(train_cfg)
        meta["step"] = str(last_step)
        meta["rng_state"] = str(header["rngStates"][steps - 1])  # falcon train --resume continues the stream
        meta["train_config"] = json.dumps(train_done, separators=(",", ":"))
        config["falcon_metadata"] = meta
        ft.save_hf(model, out_dir, config)
        with open(args.metrics or os.path.join(args.run, "metrics.jsonl"), "a") as f:
            for line in metrics:
                f.write(json.dumps(line) + "\n")
        print(json.dumps(summary), flush=True)
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return summary


def main(argv):
    p = argparse.ArgumentParser(description="train a falcon model in PyTorch (DDP under torchrun)")
    p.add_argument("run", help="run directory: init/ (hf export) and batches.bin from prepare_run.ts")
    p.add_argument("--init", help="hf export to start from (default RUN/init)")
    p.add_argument("--batches", help="batch file (default RUN/batches.bin)")
    p.add_argument("--out", help="hf export to write (default RUN/hf)")
    p.add_argument("--metrics", help="metrics log to append to (default RUN/metrics.jsonl)")
    p.add_argument("--steps", type=int, help="steps to run (default: every batch of the file)")
    p.add_argument("--form", choices=ft.FORMS, default="auto", help="how the fast-weight mixers run")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="parameter dtype")
    p.add_argument("--autocast", choices=("off", "bf16"), default="off", help="bf16 autocast of the forward")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--threads", type=int, default=0, help="CPU threads per process (0: torch's default)")
    p.add_argument("--warmup-steps", type=int, default=0, help="steps left out of the tokens/s figure")
    p.add_argument("--force-gated", action="store_true",
                   help="run fla's gated ops on Hopper with Triton < 3.7.1 (fla issue 640; the run is timing only)")
    args = p.parse_args(argv)
    if args.force_gated:
        import fla.ops.common.chunk_o as chunk_o

        chunk_o.TRITON_ABOVE_3_7_1 = True
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        train(args)
    except (RunError, ft.CheckpointError, OSError) as err:
        print("train_ddp: %s" % err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
