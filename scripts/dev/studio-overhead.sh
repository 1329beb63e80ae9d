#!/usr/bin/env bash
# What starting a run from `loft studio` costs in training speed: the same CPU finetune of
# examples/stories260K on examples/demo.jsonl, RUNS times from the shell and RUNS times as a studio
# job (POST /api/runs), alternating so machine load hits both alike. tokens/s of a run is the
# median of its metrics.jsonl lines after the first WARM steps; prints each run and the mean of
# each way, and exits 1 when the studio's mean is more than 1% below the shell's.
#   LOFT=build/loft RUNS=5 STEPS=60 WARM=5 scripts/dev/studio-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
loft=${LOFT:-build/loft}
runs=${RUNS:-5}
steps=${STEPS:-60}
warm=${WARM:-5}
tmp=$(mktemp -d)
studio_pid=
cleanup() {
  [ -n "$studio_pid" ] && kill "$studio_pid" 2>/dev/null && wait "$studio_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

model=examples/stories260K
data=examples/demo.jsonl
args=(--model "$model" --data "$data" --steps "$steps" --batch 8 --seq 128 --lr 5e-3 --device cpu --seed 1 --no-report)
recipe=$(jq -n --arg m "$PWD/$model" --arg d "$PWD/$data" --argjson s "$steps" \
  '{base_model: $m, datasets: [$d], max_steps: $s, batch: 8, sequence_len: 128, learning_rate: 5e-3,
    device: "cpu", seed: 1, report: false}')

tokens_per_s() {  # median tokens/s of a run folder's metrics after the warm-up steps
  python3 - "$1/metrics.jsonl" "$warm" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{statistics.median(r['tokens_per_s'] for r in rows[int(sys.argv[2]):]):.1f}")
PY
}

"$loft" studio --port 0 --root examples --runs "$tmp/studio-runs" >"$tmp/studio.out" 2>&1 &
studio_pid=$!
for _ in $(seq 100); do grep -q '?token=' "$tmp/studio.out" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$tmp/studio.out")
base=${url%%/?token=*}
token=${url##*token=}
auth=(-H "Authorization: Bearer $token")
csrf=$(curl -sf "${auth[@]}" "$base/api/session" | jq -r .csrf)

shell=() studio=()
for i in $(seq "$runs"); do
  "$loft" finetune "${args[@]}" --out "$tmp/shell-$i" >/dev/null
  shell+=("$(tokens_per_s "$tmp/shell-$i")")
  id=$(curl -sf "${auth[@]}" -H "X-CSRF-Token: $csrf" -H 'Content-Type: application/json' \
    -d "$(jq --arg o "$tmp/studio-runs/studio-$i" '. + {output_dir: $o}' <<<"$recipe")" "$base/api/runs" | jq -r .id)
  while :; do
    status=$(curl -sf "${auth[@]}" "$base/api/runs/$id" | jq -r .status)
    case $status in finished) break ;; failed|stopped) echo "studio run $id $status" >&2; exit 1 ;; esac
    sleep 0.2
  done
  studio+=("$(tokens_per_s "$tmp/studio-runs/$id")")
  echo "run $i: shell ${shell[-1]} tokens/s, studio ${studio[-1]} tokens/s"
done
python3 - "${shell[*]}" "${studio[*]}" <<'PY'
import statistics, sys
shell = [float(x) for x in sys.argv[1].split()]
studio = [float(x) for x in sys.argv[2].split()]
a, b = statistics.mean(shell), statistics.mean(studio)
print(f"shell  mean {a:.1f} tokens/s (stdev {statistics.pstdev(shell):.1f}, {len(shell)} runs)")
print(f"studio mean {b:.1f} tokens/s (stdev {statistics.pstdev(studio):.1f}, {len(studio)} runs)")
print(f"studio / shell = {b / a:.4f} ({(b / a - 1) * 100:+.2f}%)")
sys.exit(0 if b >= 0.99 * a else 1)
PY
