#!/usr/bin/env bash
# The evaluator's speed on the GPU machine (docs/perf.md): `loft bench eval` on a random-init
# llama-7b with Llama 2's tokenizer and the real MMLU / GSM8K data, each result one JSON line in
# $OUT/bench-eval.jsonl. Run through scripts/dev/gpu-check.sh after staging with
# STAGE_EXTRA="mmlu gsm8k". Arguments: the tasks to run (default: decode mmlu gsm8k); MMLU_LIMIT
# and GSM8K_LIMIT shorten a run (questions per subject / in all).
set -uo pipefail
cd "$(dirname "$0")/../.."
run=$PWD/.gpurun
OUT=${OUT:-/tmp/loft-out}
shape=${SHAPE:-llama-7b}
tok=$run/data/tokenizers/llama2
tasks=${*:-decode mmlu gsm8k}
status=0
for t in $tasks; do
  case $t in
    decode) args=(--batch "${BATCH:-64}" --seq "${SEQ:-512}" --max-gen-toks 256);;
    mmlu) args=(--data "$run/data/mmlu" --slots "${SLOTS:-64}" ${MMLU_LIMIT:+--limit "$MMLU_LIMIT"});;
    gsm8k) args=(--data "$run/data/gsm8k" --slots "${SLOTS:-64}" ${GSM8K_LIMIT:+--limit "$GSM8K_LIMIT"});;
    *) echo "bench-eval: unknown task $t"; exit 2;;
  esac
  echo "== bench eval --task $t ${args[*]}"
  "$run/bin/loft" bench eval --task "$t" --shape "$shape" --tokenizer "$tok" --json "${args[@]}" \
    2> >(tr '\r' '\n' | tail -3 >&2) | tee -a "$OUT/bench-eval.jsonl"
  status=$((status | PIPESTATUS[0]))
done
exit $status
