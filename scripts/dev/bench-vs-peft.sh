#!/usr/bin/env bash
# On the GPU machine (after scripts/dev/gpu-check.sh unpacked .gpurun): loft bench and the PEFT
# baseline on the same shape, one after the other in the same call, JSON lines into $OUT/bench.jsonl
# (loft's line holds every method of METHODS, each timed on a fresh model, with its breakdown).
#   [METHODS=lora,qlora,halo] [LOFT_BENCH_ARGS="--halo-format int8"] \
#     scripts/dev/bench-vs-peft.sh llama-7b 4 512 [--grad-checkpointing]
set -uo pipefail
cd "$(dirname "$0")/../.."
shape=${1:-llama-7b}; batch=${2:-4}; seq=${3:-512}; gc=${4:-}
run=$PWD/.gpurun
source "$(dirname "${BASH_SOURCE[0]}")/gpu-libpath.sh" "$run"
methods=${METHODS:-lora,qlora,halo}
OUT=${OUT:-/tmp/loft-out}
echo "== loft bench step $shape batch $batch seq $seq methods $methods $gc ${LOFT_BENCH_ARGS:-}"
"$run/bin/loft" bench step --shape "$shape" --batch "$batch" --seq "$seq" --steps 8 --warmup 3 \
  --method "$methods" ${LOFT_BENCH_ARGS:-} $gc --json \
  | tee -a "$OUT/bench.jsonl"
peft_gc=""; [ -n "$gc" ] && peft_gc="--gc"
echo "== PEFT baseline $shape batch $batch seq $seq $peft_gc"
PYTHONUNBUFFERED=1 python3 scripts/dev/peft_baseline.py --shape "$shape" --batch "$batch" \
  --seq "$seq" $peft_gc 2>&1 | grep -v Warning | tee -a "$OUT/bench.jsonl"
