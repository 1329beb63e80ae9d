#!/usr/bin/env bash
# Runs on the GPU machine in ONE call: GPU tests, then (when built) the benchmark, with logs and
# JSON results under $OUT. The build folder and a copy of the test data travel with the call:
#   carry: build-gpu, .testdata      (see docs/gpu-runs.md)
# Usage: scripts/gpu-check.sh [extra ctest args]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loft-out}
mkdir -p "$OUT"
export LOFT_TEST_DATA=${LOFT_TEST_DATA:-$PWD/.testdata}
build=${BUILD_DIR:-build-gpu}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# The build dir was configured on the dev machine; ctest only needs the test binaries and paths.
status=0
"$build/tests/loft_tests_gpu" --gtest_output=json:"$OUT/gpu-tests.json" 2>&1 | tee "$OUT/gpu-tests.log" | tail -60 || status=1
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
for t in "$build"/tests/loft_tests_*; do
  case "$t" in *_gpu|*.json) continue;; esac
  [ -x "$t" ] || continue
  "$t" --gtest_brief=1 >"$OUT/$(basename "$t").log" 2>&1 || { status=1; tail -30 "$OUT/$(basename "$t").log"; }
done
echo "gpu-check: status $status"
exit $status
