#!/usr/bin/env bash
# Builds the exports scripts/dev/check_export_hf.py checks with transformers/PEFT, and loft's own numbers
# for them, on a model whose widths are multiples of 128 (hidden 256, intermediate 768: the
# fp8-block-transformers reference, converted to bf16 by `loft export`, with stories260K's
# 512-token tokenizer). Run on the GPU machine from the checkout root:
#
#   scripts/dev/export-hf-fixture.sh [WORK=/tmp/loft-export-hf] [STEPS=40]
#   python3 scripts/dev/check_export_hf.py /tmp/loft-export-hf
#
# WORK/loft_results.json holds, per method (lora, qlora, falqon, halo): loft's mean NLL on the
# tinystories sample for the trained adapter (recorded method) and for each export as loft loads
# it (fp8 block and bf16 via --model, peft via --adapter --method lora), the PEFT gap the export
# reported, and a greedy continuation's token ids for each export.
set -euo pipefail
work=${1:-/tmp/loft-export-hf}
steps=${2:-40}
loft=${LOFT:-build/loft}
data=${LOFT_TEST_DATA:-$PWD/tests/data}
text="$data/tinystories/tinystories_sample.txt"
prompt="Once upon a time, there was a little"
rm -rf "$work" && mkdir -p "$work"

"$loft" export --model "$data/reference/fp8-block-transformers" --format bf16 --out "$work/base"
for f in tokenizer.json tokenizer.model tokenizer_config.json; do cp "$data/models/stories260K-hf/$f" "$work/base/"; done
"$loft" tokenize --model "$work/base" --jsonl < <(grep -v '^\s*$' "$text" | python3 -c '
import json, sys
for line in sys.stdin: print(json.dumps({"text": line.rstrip("\n").rstrip("\r")}))') > "$work/ids.jsonl"
"$loft" tokenize --model "$work/base" --add-special --text "$prompt" > "$work/prompt_ids.txt"

nll() { "$loft" evaluate --model "$1" "${@:2}" --task ppl --data "$text" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nll"])'; }
greedy() { "$loft" generate --model "$1" "${@:2}" --prompt "$prompt" --max-new-tokens 24 --json | python3 -c 'import json,sys; print(json.dumps(json.loads(sys.stdin.readline())["tokens"]))'; }

echo "{" > "$work/loft_results.json"
echo "\"base\": {\"nll\": $(nll "$work/base"), \"greedy\": $(greedy "$work/base")}," >> "$work/loft_results.json"
sep=""
for m in lora qlora falqon halo; do
  "$loft" finetune --model "$work/base" --data examples/demo.jsonl --method "$m" --steps "$steps" \
    --batch 8 --seq 128 --out "$work/run-$m" > "$work/run-$m.log"
  ad="$work/run-$m/adapter"
  "$loft" export --model "$work/base" --adapter "$ad" --format fp8 --fp8-layout block --out "$work/$m-fp8block"
  "$loft" export --model "$work/base" --adapter "$ad" --format fp8 --out "$work/$m-fp8channel"
  "$loft" export --model "$work/base" --adapter "$ad" --format bf16 --out "$work/$m-bf16"
  "$loft" export --model "$work/base" --adapter "$ad" --format peft --out "$work/$m-peft" | tee "$work/$m-peft.log"
  gap=$(python3 -c "import json; print(json.load(open('$work/$m-peft/export_report.json'))['gap'])")
  {
    echo "$sep\"$m\": {"
    echo "  \"trained\": $(nll "$work/base" --adapter "$ad"),"
    echo "  \"fp8block\": $(nll "$work/$m-fp8block"),"
    echo "  \"fp8channel\": $(nll "$work/$m-fp8channel"),"
    echo "  \"bf16\": $(nll "$work/$m-bf16"),"
    echo "  \"peft\": $(nll "$work/base" --adapter "$work/$m-peft" --method lora),"
    echo "  \"peft_gap\": $gap,"
    echo "  \"greedy_bf16\": $(greedy "$work/$m-bf16"),"
    echo "  \"greedy_fp8block\": $(greedy "$work/$m-fp8block")"
    echo "}"
  } >> "$work/loft_results.json"
  sep=","
done
echo "}" >> "$work/loft_results.json"
python3 -m json.tool "$work/loft_results.json" > /dev/null && echo "wrote $work/loft_results.json"
