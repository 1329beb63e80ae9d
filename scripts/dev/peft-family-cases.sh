#!/usr/bin/env bash
# Makes the folder scripts/dev/peft_family_check.py reads on the GPU machine (default .peftcheck/,
# git-ignored: name it in the device call's carry): for each tiny family model, the model with
# stories260K's tokenizer, a LoRA adapter `loft finetune` trains in 4 steps, loft's perplexity of
# three TinyStories lines with and without it, and each line's token ids (llama.cpp's tokenization
# of loft's GGUF, which LlamaCpp.Families checks equals loft's). Needs build/loft and
# tests/llamacpp's node_modules.
#   scripts/dev/peft-family-cases.sh [OUT]
#   then on the device: python3 scripts/dev/peft_family_check.py .peftcheck
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.peftcheck}
loft=${LOFT:-build/loft}
rm -rf "$out" && mkdir -p "$out"
python3 - "$out" <<'PY'
import sys
lines = [l for l in open("tests/data/tinystories/tinystories_sample.txt").read().split("\n")
         if len(l.strip()) > 40 and "<|endoftext|>" not in l][:3]
open(sys.argv[1] + "/docs.txt", "w").write("\n".join(lines) + "\n")
PY
cases=()
for m in qwen2-tiny qwen2-tiny-tied qwen3-tiny mistral-tiny stories260K-hf; do
  mkdir -p "$out/$m" "$out/adapter-$m"
  cp tests/data/models/$m/config.json tests/data/models/$m/model.safetensors "$out/$m/"
  cp tests/data/models/stories260K-hf/tokenizer.model "$out/$m/"
  "$loft" finetune --model "$out/$m" --data tests/data/alpaca/alpaca_tiny.json --steps 4 --batch 2 --seq 256 \
    --lora-rank 8 --lr 2e-2 --out "$out/run-$m" --no-report >/dev/null 2>&1
  cp "$out/run-$m/adapter/adapter_config.json" "$out/run-$m/adapter/adapter_model.safetensors" "$out/adapter-$m/"
  rm -rf "$out/run-$m"
  base=$("$loft" evaluate --model "$out/$m" --task ppl --data "$out/docs.txt" --json 2>/dev/null)
  adapted=$("$loft" evaluate --model "$out/$m" --adapter "$out/adapter-$m" --task ppl --data "$out/docs.txt" --json 2>/dev/null)
  "$loft" export --model "$out/$m" --format gguf --gguf-type f32 --out "$out/$m.gguf" >/dev/null 2>&1
  ids=$(node tests/llamacpp/score.mjs --model "$out/$m.gguf" --text "$out/docs.txt" |
        python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)['ids']))")
  rm "$out/$m.gguf"
  cases+=("{\"name\": \"$m\", \"base\": $base, \"adapted\": $adapted, \"ids\": $ids}")
done
(IFS=,; echo "[${cases[*]}]") >"$out/cases.json"
echo "peft-family-cases: wrote $out ($(du -sh "$out" | cut -f1))"
