#!/usr/bin/env bash
# Runs on the GPU machine with the staged run (.gpurun) carried: loft's attention forward and
# backward (`loft bench kernels --only attention,attention_backward`, llama3-8b's heads: 32 query,
# 8 KV, head dim 128) beside FlashAttention-2's (PyTorch SDPA's flash backend,
# scripts/dev/attention_sdpa.py) at the same shapes, in one call; TFLOP/s in loft's convention.
#   scripts/dev/attention-vs-fa2.sh [BATCHxSEQ ...]   (default 32x512 8x2048 4x4096 1x16384)
# Env: LOFT (the staged loft binary), GPU_RUN_DIR (.gpurun), REPEATS (20).
set -uo pipefail
cd "$(dirname "$0")/../.."
run=$PWD/${GPU_RUN_DIR:-.gpurun}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"  # unpacks it on a fresh machine
loft=${LOFT:-$run/bin/loft}
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(32x512 8x2048 4x4096 1x16384)
status=0
for s in "${shapes[@]}"; do
  "$loft" bench kernels --shape llama3-8b --batch "${s%x*}" --seq "${s#*x}" --repeats "${REPEATS:-20}" \
    --only attention,attention_backward | grep -E "^attention" | sed 's/^/loft       /' || status=1
done
python3 "$(dirname "${BASH_SOURCE[0]}")/attention_sdpa.py" --repeats "${REPEATS:-20}" "${shapes[@]}" || status=1
exit $status
