#!/usr/bin/env bash
# The addition experiment's runs on a machine without the npm packages (the GPU machine): trains and
# evaluates every run of a plan with experiments/addition/run_one.ts, JOBS at a time, seed 0 of every
# variant first, skipping runs that already have a result.json (so a later call resumes), and starts no
# new run after BUDGET seconds. Aggregate afterwards with `deno task experiment:addition --plan PLAN
# --runs DIR --replot` on a machine with the packages.
# The device tool brings back only a limited number of files: keep RUNS_DIR outside $OUT and name a PACK
# file under $OUT; every run's result.json, metrics.jsonl and log go into that one archive at the end
# (unpack it into RUNS_DIR to resume or aggregate).
# RUNS_DIR does not survive between device calls (a fresh machine): set FROM to a directory of earlier
# results carried in the working tree (e.g. docs/results/addition-gpu-runs, tracked) and every
# FROM/<run>/result.json is copied into RUNS_DIR first, so those runs are skipped.
# Every run still going when the budget is reached is left to finish: pick BUDGET so that the last
# start plus the slowest run (falcon3, ~8.3 min with 14 at once on the H200) fits in the call.
#   [FROM=DIR] experiments/addition/run_many.sh PLAN RUNS_DIR JOBS BUDGET_SECONDS [BACKEND] [PACK.tar.gz]
# JOBS may be `auto`: 8 on the GPU (experiments/addition/jobs.ts says why), one per core otherwise.
set -uo pipefail
plan=$1; runs=$2; jobs=$3; budget=$4; backend=${5:-webgpu}; pack=${6:-}
mkdir -p "$runs"
if [ "$jobs" = auto ]; then
  device=cpu; [ "$backend" = webgpu ] && device=gpu
  jobs=$(deno eval "import { autoJobs } from './experiments/addition/jobs.ts';
console.log(autoJobs('$device', navigator.hardwareConcurrency, Infinity));")
  echo "JOBS auto: $jobs at once ($device)"
fi
if [ -n "${FROM:-}" ]; then
  for result in "$FROM"/*/result.json; do
    [ -f "$result" ] || continue
    name=$(basename "$(dirname "$result")")
    mkdir -p "$runs/$name" && cp "$result" "$runs/$name/result.json"
  done
  echo "copied $(find "$runs" -name result.json | wc -l) stored results from $FROM"
fi
names=$(deno eval "import { makePlan, runName } from './experiments/addition/plan.ts';
const p = makePlan('$plan');
for (const s of p.seeds) for (const v of p.variants) console.log(runName(v, s));")
start=$(date +%s)
running=0
for name in $names; do
  [ -f "$runs/$name/result.json" ] && continue
  if [ $(( $(date +%s) - start )) -ge "$budget" ]; then echo "budget reached: not starting $name"; continue; fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  variant=${name%-s*}; seed=${name##*-s}
  echo "$(date +%T) start $name"
  (deno run --allow-read --allow-write experiments/addition/run_one.ts --plan "$plan" --variant "$variant" \
     --seed "$seed" --runs "$runs" --backend "$backend" >"$runs/$name.log" 2>&1; rc=$?
   # the result holds the evaluation; checkpoints stay only when KEEP_CHECKPOINTS=1 (they are ~4 MB each)
   [ "${KEEP_CHECKPOINTS:-0}" = 1 ] || rm -f "$runs/$name/checkpoint.safetensors"
   echo "$(date +%T) done $name rc=$rc") &
done
wait
if [ -n "$pack" ]; then
  tar -czf "$pack" -C "$runs" --exclude='*.safetensors' .
  echo "packed $(find "$runs" -name result.json | wc -l) results into $pack"
fi
