#!/usr/bin/env bash
# Runs on the GPU machine in ONE call, from the checkout root, with .gpurun carried (made by
# scripts/dev/stage-gpu-run.sh): every test binary (GPU tests included), then any extra command given
# as arguments (e.g. a benchmark). Logs and JSON results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loft-out}
mkdir -p "$OUT"
run=$PWD/${GPU_RUN_DIR:-.gpurun}
[ -f "$run/gpurun.tar.xz" ] && tar -C "$run" -xf "$run/gpurun.tar.xz"
export LOFT_TEST_DATA=$run/data
export LOFT_SOURCE_DIR=$PWD
source "$(dirname "${BASH_SOURCE[0]}")/gpu-libpath.sh" "$run"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
# The GPU suite, plus the model and method suites (CPU tests, but built with CUDA: checks that build too).
# The CPU-only folders run in CI; their data is not carried.
for name in ${GPU_CHECK_TESTS:-loft_tests_gpu loft_tests_models loft_tests_methods}; do
  t=$run/bin/$name
  # GPU_TEST_TIMEOUT (seconds) bounds a binary, so a hung kernel cannot eat the whole call.
  timeout "${GPU_TEST_TIMEOUT:-3000}" "$t" --gtest_output=json:"$OUT/$name.json" >"$OUT/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "$name: $(grep -E '^\[  PASSED' "$OUT/$name.log" | tail -1)"
  else
    status=1
    echo "$name: FAILED (exit $rc)"
    grep -E "^\[  FAILED|Failure$|Expected|actual:|error" "$OUT/$name.log" | head -60
    tail -3 "$OUT/$name.log"
    if ! grep -q "^\[==========\].*ran" "$OUT/$name.log" && command -v cuda-gdb >/dev/null; then
      echo "-- backtrace of the crash:"
      cuda-gdb -q -batch -ex run -ex bt --args "$t" 2>&1 | tail -25
    fi
  fi
done
if [ $# -gt 0 ]; then
  echo "== $*"; "$@"; status=$((status | $?))
fi
echo "gpu-check: status $status"
exit $status
