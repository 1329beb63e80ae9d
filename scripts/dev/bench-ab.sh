#!/usr/bin/env bash
# Before and after in ONE device call (after gpu-check.sh or a plain unpack of .gpurun): each item
# as `loft bench step` with the staged `loft-before` (stage-gpu-run.sh STAGE_LOFT_BEFORE=...) and
# `loft`, alternating A B A B ... for ROUNDS rounds so drifting clocks hit both alike; each run
# bounded. JSON lines with "binary" and "item" added into $OUT/ab.jsonl, then the table
# (bench-ab-table.py). An item is SHAPE:BATCH:SEQ:METHOD:RANK[:gc].
#   ITEMS="llama3-8b:2:4096:lora:64 llama3-8b:2:4096:falqon:64" ROUNDS=2 scripts/dev/bench-ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
run=$PWD/.gpurun
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"
OUT=${OUT:-/tmp/loft-out}; mkdir -p "$OUT"
items=${ITEMS:-"llama3-8b:2:4096:lora:64 llama3-8b:2:4096:falqon:64"}
binaries="A=$run/bin/loft-before B=$run/bin/loft"
[ -x "$run/bin/loft-before" ] || binaries="B=$run/bin/loft"  # no before: the after alone
for round in $(seq 1 "${ROUNDS:-1}"); do
  for item in $items; do
    IFS=: read -r shape batch seq method rank gc <<<"$item"
    extra=(); [ "${gc:-}" = gc ] && extra=(--grad-checkpointing)
    for b in $binaries; do
      name=${b%%=*} bin=${b#*=}
      echo "== round $round $item $name"
      timeout "${BENCH_TIMEOUT:-200}" "$bin" bench step --shape "$shape" --batch "$batch" --seq "$seq" \
        --method "$method" --lora-rank "$rank" "${extra[@]}" --warmup "${WARMUP:-2}" --steps "${STEPS:-6}" \
        --profile-steps "${PROFILE_STEPS:-2}" --json 2>>"$OUT/ab.err" |
        python3 -c 'import json, sys
for line in sys.stdin:
    d = json.loads(line); d["binary"] = sys.argv[1]; d["item"] = sys.argv[2]; print(json.dumps(d))' \
          "$name" "$item" | tee -a "$OUT/ab.jsonl" | cut -c1-200
    done
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/bench-ab-table.py" "$OUT/ab.jsonl" | tee "$OUT/ab.md"
