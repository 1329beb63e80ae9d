#!/usr/bin/env bash
# Measures `loft export` on a llama-7b-shaped checkpoint (random bf16 weights, 13.5 GB, and a random
# rank-16 LoRA adapter on all 7 projections): wall time and peak resident memory (RSS, from
# /usr/bin/time -v) for --format bf16 and --format fp8 (channel), against one layer's weights in
# fp32 (202M parameters, 0.81 GB). Needs ~35 GB free disk under WORK (base 13.5 GB + bf16 export
# 13.5 GB + fp8 export 7 GB; each export is removed after it is measured) and python3 (stdlib only).
#
#   scripts/dev/bench-export-7b.sh [BUILD_DIR=build] [WORK=/tmp/loft-export-7b]
set -euo pipefail
build=${1:-build}
work=${2:-/tmp/loft-export-7b}
loft="$build/loft"
[ -x "$loft" ] || { echo "no $loft: build first" >&2; exit 1; }
mkdir -p "$work"
if [ ! -f "$work/base/model.safetensors.index.json" ]; then
  python3 "$(dirname "$0")/make_random_llama.py" --shape llama-7b --out "$work/base" \
    --adapter "$work/adapter" --rank 16
fi
one_layer_gb=$(python3 -c "print(round((4*4096*4096 + 3*4096*11008)*4/1e9, 2))")
for fmt in bf16 fp8; do
  rm -rf "$work/out-$fmt"
  /usr/bin/time -v "$loft" export --model "$work/base" --adapter "$work/adapter" --format "$fmt" \
    --out "$work/out-$fmt" 2> "$work/time-$fmt.txt" > "$work/log-$fmt.txt" || {
      cat "$work/time-$fmt.txt" >&2; exit 1; }
  rss_kb=$(grep "Maximum resident set size" "$work/time-$fmt.txt" | awk '{print $NF}')
  wall=$(grep "Elapsed (wall clock)" "$work/time-$fmt.txt" | awk '{print $NF}')
  size=$(du -sh "$work/out-$fmt" | cut -f1)
  echo "export --format $fmt: wall $wall, peak RSS $(python3 -c "print(round($rss_kb/1048576, 2))") GiB" \
       "(one layer in fp32: ${one_layer_gb} GB), output $size"
  rm -rf "$work/out-$fmt"
done
echo "(the random base and adapter stay in $work; rm -rf $work when done)"
