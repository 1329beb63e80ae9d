#!/usr/bin/env bash
# Runs on the GPU machine in ONE call, from the checkout root, with .gpurun carried (made by
# scripts/stage-gpu-run.sh): every test binary (GPU tests included), then any extra command given
# as arguments (e.g. a benchmark). Logs and JSON results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loft-out}
mkdir -p "$OUT"
run=$PWD/.gpurun
[ -f "$run/gpurun.tgz" ] && tar -C "$run" -xzf "$run/gpurun.tgz"
export LOFT_TEST_DATA=$run/data
export LD_LIBRARY_PATH=$run/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
for t in "$run"/bin/loft_tests_*; do
  name=$(basename "$t")
  if "$t" --gtest_brief=1 --gtest_output=json:"$OUT/$name.json" >"$OUT/$name.log" 2>&1; then
    echo "$name: $(grep -E '^\[  PASSED' "$OUT/$name.log" | tail -1)"
  else
    status=1
    echo "$name: FAILED"; grep -E "Failure|FAILED|error|Expected|Which is|actual" "$OUT/$name.log" | head -40
  fi
done
if [ $# -gt 0 ]; then
  echo "== $*"; "$@" 2>&1 | tee "$OUT/extra.log"; status=$((status | PIPESTATUS[0]))
fi
echo "gpu-check: status $status"
exit $status
