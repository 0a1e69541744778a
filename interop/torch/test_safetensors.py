"""falcon_torch.read_safetensors refuses every hand-made hostile container in
fixtures/bad_checkpoints/ with a CheckpointError naming the file, and reads the valid ones.

Run: python3 interop/torch/test_safetensors.py   (exits 1 on any failure)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import falcon_torch as ft  # noqa: E402

BAD = os.path.join(HERE, "..", "..", "fixtures", "bad_checkpoints")
# valid containers whose fault is in the weights (caught by falcon convert, not by the reader)
WEIGHT_FAULTS = {"missing_tensor.safetensors", "nonfinite_weight.safetensors", "infinite_weight.safetensors"}


def main():
    names = sorted(n for n in os.listdir(BAD) if n.endswith(".safetensors"))
    results = []
    for name in names:
        path = os.path.join(BAD, name)
        if name in WEIGHT_FAULTS:
            try:
                tensors, metadata = ft.read_safetensors(path)
                ok = metadata.get("format") == "falcon-checkpoint" and len(tensors) > 0
                results.append((ok, "%s: valid container with %d tensors" % (name, len(tensors))))
            except ft.CheckpointError as err:
                results.append((False, "%s: refused a valid container: %s" % (name, err)))
            continue
        try:
            ft.read_safetensors(path)
            results.append((False, "%s: accepted" % name))
        except ft.CheckpointError as err:
            results.append((path in str(err), "%s: refused: %s" % (name, err)))
    failed = 0
    for ok, msg in results:
        print(("ok   " if ok else "FAIL ") + msg)
        failed += 0 if ok else 1
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
