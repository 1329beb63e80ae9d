#!/usr/bin/env bash
# Regenerates docs/img/report.png, the README's picture of `loft report`: two stories260K runs on
# the CPU (200 steps each, validation, MMLU and GSM8K on their adapters) compared on one page,
# rendered by headless Chromium. Needs build/loft; the MMLU and GSM8K files come from tests/data (or $LOFT_TEST_DATA).
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${LOFT_TEST_DATA:-tests/data}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train() {  # name, then extra finetune options
  local name=$1; shift
  build/loft finetune --model examples/stories260K --data examples/demo.jsonl --steps 200 --batch 2 --seq 128 \
    --val-fraction 0.1 --eval-every 25 --device cpu --log-every 100 --out "$work/$name" "$@" >/dev/null
  build/loft evaluate --model examples/stories260K --adapter "$work/$name/adapter" --device cpu --task mmlu \
    --data "$data/mmlu" --subjects abstract_algebra,anatomy,sociology,world_religions --limit 5 --shots 1 >/dev/null 2>&1
  build/loft evaluate --model examples/stories260K --adapter "$work/$name/adapter" --device cpu --task gsm8k \
    --data "$data/gsm8k" --limit 2 --shots 1 --max-gen-toks 16 >/dev/null 2>&1
}
train lora-r8-lr3e-3 --lora-rank 8 --lr 3e-3 --schedule cosine --warmup 10
train lora-r16-lr1e-3 --lora-rank 16 --lr 1e-3
build/loft report "$work/lora-r8-lr3e-3" "$work/lora-r16-lr1e-3" --out "$work/report.html"
browser=$(command -v chromium-headless-shell || echo "chromium --headless")
$browser --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1560 \
  --screenshot="$PWD/docs/img/report.png" "file://$work/report.html" >/dev/null 2>&1
echo "wrote docs/img/report.png"
