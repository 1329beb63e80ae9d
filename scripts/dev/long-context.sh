#!/usr/bin/env bash
# Runs on the GPU machine with the staged run (.gpurun, scripts/dev/stage-gpu-run.sh) carried: one
# checkpointed training step of llama3-8b at long context per METHOD:TOKENS item, batch 1, r=64,
# under --gpu-memory-limit (default 24GiB), each as `loft bench step --json` into
# $OUT/long-context.jsonl, with the process's peak host memory (VmHWM, pinned checkpoints included)
# beside it in $OUT/long-context-host.txt. Items run in turn on the GPU CUDA_VISIBLE_DEVICES names.
#   scripts/dev/long-context.sh qlora:131072 halo:nf4:131072 falqon:98304 lora:65536
# Env: CAP (24GiB), SHAPE (llama3-8b), STEPS (1), WARMUP (0), LOFT (the staged loft binary).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loft-out}
mkdir -p "$OUT"
run=$PWD/${GPU_RUN_DIR:-.gpurun}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"  # unpacks it on a fresh machine
loft=${LOFT:-$run/bin/loft}
status=0
for item in "$@"; do
  tokens=${item##*:}
  method=${item%:*}
  log="$OUT/long-context-${method//:/-}-$tokens.log"
  "$loft" bench step --shape "${SHAPE:-llama3-8b}" --method "$method" --batch 1 --seq "$tokens" \
    --grad-checkpointing --lora-rank 64 --steps "${STEPS:-1}" --warmup "${WARMUP:-0}" --profile-steps 0 \
    --gpu-memory-limit "${CAP:-24GiB}" --json >"$log.json" 2>"$log" &
  pid=$!
  hwm=0
  while kill -0 $pid 2>/dev/null; do
    v=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null)
    [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
    sleep 1
  done
  wait $pid
  rc=$?
  [ $rc -ne 0 ] && status=1
  echo "$method $tokens: exit $rc, host peak $((hwm / 1024)) MiB" | tee -a "$OUT/long-context-host.txt"
  cat "$log.json" >>"$OUT/long-context.jsonl"
  tail -4 "$log"
done
exit $status
