#!/usr/bin/env bash
# Issue 30's multi-GPU checks in ONE device call on a machine with 2 or 4 GPUs (carrying .gpurun,
# staged with STAGE_TESTS=loft_tests_gpu), each part bounded so the call ends inside its limit
# and its results come back (one tarball: the device returns only 8 files):
#   1. the GPU tests that need several GPUs: NcclCommCuda.*, DataParallelCuda.*, BenchParallelCuda.*,
#      ShardedBackboneCuda.* (the NCCL watchdog's test among them);
#   2. the scaling bars (bench-scaling.sh: llama-7b 4x512, lora and falqon, 1 GPU and each N);
#   3. llama-70b with qlora and halo:nf4 (and falqon, on 4 GPUs or more: its FP8 backbone is 70 GB)
#      on every GPU of the machine, --shard-backbone, under --gpu-memory-limit 24GiB, batch
#      1 x 2048 with checkpointing (issue 30's "done");
#   4. dp-check.sh (its sharded kill -9 and the resume on one GPU).
# Results: $OUT/mgpu.tgz (every log, gtest JSON, scaling.jsonl, the 70B JSON lines) and a summary on
# stdout. MGPU_BUDGET (seconds, default 540) is the whole call's; PARTS (default "tests scaling 70b
# dp") picks the parts, in that order.
#   bash scripts/dev/multi-gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loft-out}
res=$OUT/mgpu
mkdir -p "$res"
run=$PWD/.gpurun
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"
export LOFT_TEST_DATA=$run/data LOFT_SOURCE_DIR=$PWD NCCL_NVLS_ENABLE=0
export LOFT=${LOFT:-$run/bin/loft}
end=$(( $(date +%s) + ${MGPU_BUDGET:-540} ))
gpus=$(nvidia-smi --list-gpus 2>/dev/null | grep -c '^GPU')
say() { echo "$*" | tee -a "$res/summary.txt"; }
# part NAME LIMIT CMD...: runs CMD with stdout/stderr in $res/NAME.{out,err}, bounded by LIMIT and
# by what is left of the budget (skipped, and said so, when under 10 s are left).
part() {
  local name=$1 lim=$2; shift 2
  local left=$(( end - $(date +%s) - 15 ))  # the tarball's time
  [ "$left" -lt "$lim" ] && lim=$left
  if [ "$lim" -lt 10 ]; then say "$name: skipped, the budget is spent"; return; fi
  local start=$(date +%s)
  timeout "$lim" "$@" >"$res/$name.out" 2>"$res/$name.err"
  say "$name: exit $? after $(( $(date +%s) - start )) s (limit $lim s)"
}
say "multi-gpu-check: $gpus GPU(s), $LOFT"
for p in ${PARTS:-tests scaling 70b dp}; do
  case $p in
    tests)
      part tests 240 "$run/bin/loft_tests_gpu" --gtest_output=json:"$res/tests.json" \
        --gtest_filter='NcclCommCuda.*:DataParallelCuda.*:BenchParallelCuda.*:ShardedBackboneCuda.*'
      grep -E '^\[  (PASSED|FAILED) ' "$res/tests.out" | tee -a "$res/summary.txt" ;;
    scaling)
      ns=""; for n in 2 4; do [ "$n" -le "$gpus" ] && ns="$ns $n"; done
      part scaling 150 env OUT="$res" GPUS="$ns" LOFT_TIMEOUT=60 bash scripts/dev/bench-scaling.sh
      tail -n 12 "$res/scaling.out" >>"$res/summary.txt" ;;
    70b)
      methods="qlora halo:nf4"; [ "$gpus" -ge 4 ] && methods="$methods falqon"
      for m in $methods; do
        part "70b-${m/:/-}" 100 "$LOFT" bench step --shape llama-70b --gpus "$gpus" --shard-backbone \
          --method "$m" --lora-rank 16 --batch 1 --seq 2048 --grad-checkpointing \
          --gpu-memory-limit 24GiB --steps 2 --warmup 1 --profile-steps 0 --json
        grep '^{' "$res/70b-${m/:/-}.out" | python3 -c '
import json, sys
for line in sys.stdin:
    for m in json.loads(line)["methods"]:
        print("  %s: %s tokens/s, peak %.2f GiB per GPU, fits %s %s" % (m["method"], m.get("tokens_per_s"),
              (m.get("peak_bytes") or 0) / 2**30, m["fits"], m.get("error", "")))' | tee -a "$res/summary.txt"
      done ;;
    dp)
      part dp 240 env OUT="$res" bash scripts/dev/dp-check.sh
      cat "$res/dp-check/summary.txt" >>"$res/summary.txt" 2>/dev/null ;;
    *) say "unknown part $p" ;;
  esac
done
tar -C "$OUT" -czf "$OUT/mgpu.tgz" mgpu
