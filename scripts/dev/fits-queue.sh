#!/usr/bin/env bash
# Runs README "what fits" cells (scripts/dev/fits_check.py, one cell per run) from a shared queue
# on several GPUs at once, several workers per GPU (each run stays under its own
# --gpu-memory-limit, so a large GPU holds a few), until the queue is empty or DEADLINE (seconds
# since the epoch) is too near to start another. On the GPU machine, with the staged run unpacked
# and scripts/dev/gpu-libpath.sh sourced:
#   scripts/dev/fits-queue.sh QUEUE_FILE WORKER_GPU...    (e.g. "2 2 3 3": two workers each on 2, 3)
# QUEUE_FILE: one "model method kind" per line (kind: plain, gc or long), in the order to run; it
# is consumed (taken cells are removed), so a later invocation on other GPUs can join the same one.
# Results: $OUT/fits/<gpu>-<pid>/fits-check.jsonl and a summary line per cell on stdout.
set -u
queue=$1; shift
deadline=${DEADLINE:-$(( $(date +%s) + 3600 ))}
min_left=${MIN_LEFT:-150}  # seconds a cell needs at least: none starts with less left
take() {  # the next cell, removed from the queue under a lock
  flock "$queue.lock" bash -c "head -1 '$queue'; sed -i 1d '$queue'"
}
worker() {
  local n=$1 gpu=$2 line left
  local dir="$OUT/fits/$gpu-$BASHPID"
  mkdir -p "$dir"
  while :; do
    left=$(( deadline - $(date +%s) ))
    (( left < min_left )) && break
    line=$(take); [ -z "$line" ] && break
    set -- $line
    CUDA_VISIBLE_DEVICES=$gpu OUT=$dir timeout "$left" python3 scripts/dev/fits_check.py --card 24 \
      --models "$1" --methods "$2" --kinds "$3" 2>&1 | sed "s/^/[gpu $gpu] /"
  done
}
n=0
for gpu in "$@"; do worker $n "$gpu" & n=$((n + 1)); done
wait
echo "left in the queue: $(tr '\n' ';' < "$queue")"
