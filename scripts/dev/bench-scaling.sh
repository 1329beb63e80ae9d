#!/usr/bin/env bash
# Issue 17's scaling bar in ONE device call on a machine with several GPUs: for each shape of
# SHAPES (shape:batch:seq[:gc], the batch being per GPU) `loft bench` over METHODS on one GPU (no
# --gpus), then with --gpus N for each N of GPUS that the machine has (skipped, and said so,
# otherwise). Every GPU takes the batch, so scaling = tokens/s(N) / tokens/s(1). JSON lines into
# $OUT/scaling.jsonl, a log per run, then the table of scripts/dev/bench-scaling-table.py against the
# bars (issue 30: 2 GPUs >= 1.95x, 4 GPUs >= 3.8x one GPU). Each run is bounded by LOFT_TIMEOUT seconds.
# Exit 1 when a run fails or a bar is missed.
#   [SHAPES="llama-7b:4:512"] [METHODS="lora falqon"] [GPUS="2 4"] [STEPS=8] scripts/dev/bench-scaling.sh
# Binary: $LOFT, else .gpurun/bin/loft (unpacked from .gpurun/gpurun.tar.xz, scripts/dev/stage-gpu-run.sh),
# else build/loft.
set -uo pipefail
cd "$(dirname "$0")/../.."
run=$PWD/.gpurun
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"
if [ -z "${LOFT:-}" ]; then LOFT=build/loft; [ -x "$run/bin/loft" ] && LOFT=$run/bin/loft; fi
OUT=${OUT:-/tmp/loft-out}; mkdir -p "$OUT"
shapes=${SHAPES:-"llama-7b:4:512"}
methods=$(echo ${METHODS:-lora falqon} | tr ' ' ,)
steps=${STEPS:-8}
have=$(nvidia-smi --list-gpus 2>/dev/null | grep -c '^GPU')
echo "bench-scaling: $have GPU(s); shapes $shapes; methods $methods; $steps timed steps"
: >"$OUT/scaling.jsonl"
status=0
for s in $shapes; do
  IFS=: read -r shape batch seq gc <<<"$s"
  lgc=""; [ "$gc" = gc ] && lgc=--grad-checkpointing
  for n in 1 ${GPUS:-2 4}; do
    if [ "$n" -gt "$have" ]; then
      echo "== $shape $batch x $seq per GPU on $n GPUs: skipped, this machine has $have"
      continue
    fi
    gpus=(); [ "$n" -gt 1 ] && gpus=(--gpus "$n")
    echo "== $shape $batch x $seq per GPU${lgc:+ $lgc} on $n GPU(s)"
    log=$OUT/scaling-$shape-$n.err
    timeout "${LOFT_TIMEOUT:-600}" "$LOFT" bench step --shape "$shape" --batch "$batch" --seq "$seq" $lgc \
      --steps "$steps" --warmup 3 --profile-steps 0 --method "$methods" "${gpus[@]}" --json \
      2>"$log" | tee -a "$OUT/scaling.jsonl" | cut -c1-300
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
      echo "   failed (exit $rc): $(tail -2 "$log")"
      status=1
    fi
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/bench-scaling-table.py" "$OUT/scaling.jsonl" | tee "$OUT/scaling.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
