"""train_ddp.py refuses bad input with an error naming the thing and the value: a truncated or
headless batch file, an export of another model or task, an export at another step, a batch that does
not split over the processes, --steps beyond the file. No training runs (the loop is tested by
bridge_test.ts). Also: the safetensors writer round-trips through the validating reader.

Run: python3 interop/torch/test_train_inputs.py   (exits 1 on any failure)
"""

import json
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_torch as ft  # noqa: E402
import train_ddp as td  # noqa: E402

MODEL = {"vocabSize": 14, "mixer": "falcon1"}
TASK = {"task": "addition", "maxDigits": 2}


def write_batches(path, header, body_bytes):
    with open(path, "wb") as f:
        f.write((json.dumps(header) + "\n").encode())
        f.write(body_bytes)


def header(**over):
    h = {"B": 2, "T": 3, "firstStep": 1, "batches": 1, "rngStateAfter": 5, "rngStates": [5], "model": MODEL,
         "task": TASK, "train": {"steps": 1}}
    h.update(over)
    return h


def refused(fn, *needles):
    try:
        fn()
    except td.RunError as err:
        text = str(err)
        return all(n in text for n in needles), text
    return False, "no error"


def main():
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "b.bin")
        write_batches(path, header(), b"\0" * (2 * 3 * 13 - 1))
        results.append(("truncated batch file", refused(lambda: td.read_batch_file(path), path, "77 bytes", "78")))
        h = header()
        del h["rngStates"]
        write_batches(path, h, b"\0" * 78)
        results.append(("header without rngStates", refused(lambda: td.read_batch_file(path), "rngStates")))
        meta = {"model_config": json.dumps(dict(MODEL, mixer="deltanet")), "task_config": json.dumps(TASK),
                "step": "0"}
        results.append(("export of another model", refused(
            lambda: td.check_same_run({"falcon_metadata": meta}, header(), "INIT", "B.BIN"),
            "INIT", "model_config", "deltanet", "B.BIN")))
        meta = {"model_config": json.dumps(MODEL), "task_config": json.dumps(TASK), "step": "4"}
        results.append(("export at another step", refused(
            lambda: td.check_same_run({"falcon_metadata": meta}, header(), "INIT", "B.BIN"),
            "step 4", "starts at step 1")))
        results.append(("export without task_config", refused(
            lambda: td.check_same_run({"falcon_metadata": {"model_config": json.dumps(MODEL)}}, header(), "INIT", "B.BIN"),
            "falcon_metadata.task_config")))
        # the safetensors writer against the validating reader
        tensors = {"a": torch.arange(6, dtype=torch.float64).reshape(2, 3), "b": torch.ones(5, dtype=torch.float32),
                   "c": torch.zeros(0, dtype=torch.float32)}
        st = os.path.join(tmp, "t.safetensors")
        ft.write_safetensors(st, tensors, {"format": "pt"})
        back, metadata = ft.read_safetensors(st)
        same = all(torch.equal(back[n], tensors[n]) and back[n].dtype == tensors[n].dtype for n in tensors)
        results.append(("safetensors written and read back", (same and metadata == {"format": "pt"},
                                                               "%s %s" % (sorted(back), metadata))))
    results.append(("a batch that does not split over the processes",
                    refused(lambda: td.rows_of(6, 4, 0, "B.BIN"), "batchSize 6", "B.BIN", "4 processes")))
    results.append(("rank 1 of 2 takes the second half of the rows", (td.rows_of(6, 2, 1, "B.BIN") == slice(3, 6), "")))
    results.append(("learning rate follows src/train/schedule.ts", (
        td.learning_rate(5, {"lr": 1.0, "warmupSteps": 10, "steps": 110, "minLrRatio": 0.1}) == 0.5
        and abs(td.learning_rate(60, {"lr": 1.0, "warmupSteps": 10, "steps": 110, "minLrRatio": 0.1}) - 0.55) < 1e-15
        and td.learning_rate(110, {"lr": 1.0, "warmupSteps": 10, "steps": 110, "minLrRatio": 0.1}) == 0.1, "")))
    failed = 0
    for name, (ok, detail) in results:
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
        failed += 0 if ok else 1
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
