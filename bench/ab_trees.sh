#!/usr/bin/env bash
# A/B of kernel trees in one device call (issue 16's rounds in docs/performance.md):
#   OUT=dir bash bench/ab_trees.sh "LABEL TREE RULES [FLAGS...]" ...
# each spec runs bench/gpu_bench.ts of TREE (--skip-gemm --reps 5 --profile, RULES comma-separated) and writes
# $OUT/ab_LABEL.json and .log. A tree is a commit exported beside the checkout, e.g.
#   git archive REV | tar -x -C .device/trees/NAME --exclude=docs --exclude=experiments --exclude=fixtures
# (carried with .device), optionally with one constant changed; run after `source .device/setup.sh`.
set -u
for spec in "$@"; do
  set -- $spec
  label=$1 tree=$2 rules=$3
  shift 3
  t0=$(date +%s)
  (cd "$tree" && timeout 200 deno run --allow-read --allow-write bench/gpu_bench.ts --skip-gemm --reps 5 --profile \
    --rules "$rules" "$@" --out "$OUT/ab_$label.json") > "$OUT/ab_$label.log" 2>&1
  echo "$(date -u +%H:%M:%S) $label rc=$? $(($(date +%s) - t0))s" | tee -a "$OUT/ab_summary.txt"
done
