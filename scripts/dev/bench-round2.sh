#!/usr/bin/env bash
# Issue 15's measurement in ONE device call (after scripts/dev/gpu-check.sh or a plain unpack of
# .gpurun): for each of the three shapes, the PEFT baseline and `loft bench` over every method,
# JSON lines into $OUT/round2.jsonl and a log per shape. Each piece is bounded so one slow shape
# cannot take the whole call.
#   [METHODS=lora,qlora,falqon,halo,halo:nf4] [STEPS=4] scripts/dev/bench-round2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
run=$PWD/.gpurun
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"
OUT=${OUT:-/tmp/loft-out}; mkdir -p "$OUT"
methods=${METHODS:-lora,qlora,falqon,halo,halo:nf4}
steps=${STEPS:-4}
shapes=${SHAPES:-"llama-7b:4:512: llama-13b:16:512:gc llama3-8b:2:2048:gc"}
for s in $shapes; do
  IFS=: read -r shape batch seq gc <<<"$s"
  lgc=""; pgc=""; [ "$gc" = gc ] && lgc=--grad-checkpointing && pgc=--gc
  echo "== $shape $batch x $seq $lgc"
  timeout "${PEFT_TIMEOUT:-150}" python3 scripts/dev/peft_baseline.py --shape "$shape" \
    --batch "$batch" --seq "$seq" $pgc --steps "$steps" --warmup 2 2>&1 | grep -v Warning \
    | tee -a "$OUT/round2.jsonl"
  timeout "${LOFT_TIMEOUT:-240}" "$run/bin/loft" bench step --shape "$shape" --batch "$batch" \
    --seq "$seq" $lgc --steps "$steps" --warmup 2 --profile-steps 1 --method "$methods" --json \
    2>"$OUT/$shape.err" | tee -a "$OUT/round2.jsonl" | cut -c1-300
done
