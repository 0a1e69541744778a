#!/usr/bin/env bash
# Aggregate training throughput of N falcon training processes sharing one GPU (issue 14): for each N
# in the list, start N `bench/train_bench.ts` processes at once on the same preset and backend, wait,
# and print one JSON line with each process's tokens/s (after its warm-up steps) and their sum.
#   bench/train_concurrency.sh OUT_DIR "1 2 4 8" [--backends webgpu --presets addition --steps 30 --warmup 8]
set -euo pipefail
out=$1; counts=$2; shift 2
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--backends webgpu --presets addition --rule falcon1 --steps 30 --warmup 8)
mkdir -p "$out"
for n in $counts; do
  pids=()
  for i in $(seq 1 "$n"); do
    deno run --allow-read --allow-write bench/train_bench.ts "${args[@]}" --out "$out/n${n}_p${i}.json" \
      >/dev/null 2>"$out/n${n}_p${i}.log" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  python3 - "$out" "$n" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
each = [json.load(open(f"{out}/n{n}_p{i}.json"))["results"][0]["tokensPerSecond"] for i in range(1, n + 1)]
print(json.dumps({"processes": n, "tokensPerSecondEach": [round(x) for x in each], "tokensPerSecondTotal": round(sum(each))}))
PY
done
