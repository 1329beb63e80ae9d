#!/usr/bin/env bash
# Runs on the GPU machine in ONE call, from the checkout root, with .gpurun carried (made by
# scripts/dev/stage-gpu-run.sh): every test binary (GPU tests included), then any extra command given
# as arguments (e.g. a benchmark). Logs and JSON results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loft-out}
mkdir -p "$OUT"
run=$PWD/${GPU_RUN_DIR:-.gpurun}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$run"
export LOFT_TEST_DATA=$run/data
export LOFT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
# GPU_SHARDS=N (N > 1, and no GTEST_FILTER) runs each binary as N gtest shards side by side on the
# GPU (the whole loft_tests_gpu in ~210 s at 3 on an H200, against ~500 s in one process), then,
# in one process alone, the tests that compare two training runs bit for bit
# (GPU_ALONE_TESTS): the flash backward's dQ atomics add in a fixed order only while no other
# process shares the GPU (docs/gpu-runs.md).
shards=${GPU_SHARDS:-1}
[ -n "${GTEST_FILTER:-}" ] && shards=1
alone=${GPU_ALONE_TESTS:-'NcclCommCuda.LlamaSteps*:DataParallelCuda.*:BenchParallelCuda.*:ShardedBackboneCuda.*'}
# GPU_SHARD_GPUS="0 1 2" (a machine with several GPUs): shard i runs alone on the i-th GPU of the
# list (CUDA_VISIBLE_DEVICES), so no shard shares a GPU; the alone part then holds the tests that
# need several GPUs (every NcclCommCuda test with them) and sees every GPU of the list.
shard_gpus=(${GPU_SHARD_GPUS:-})
if [ ${#shard_gpus[@]} -gt 0 ]; then
  shards=${#shard_gpus[@]}
  alone=${GPU_ALONE_TESTS:-'NcclCommCuda.*:DataParallelCuda.*:BenchParallelCuda.*:ShardedBackboneCuda.*'}
fi

# One gtest process of binary $1 with its log and JSON as $2.*, bounded by GPU_TEST_TIMEOUT
# (seconds), so a hung kernel cannot eat the whole call; extra arguments go to gtest.
run_part() {
  local t=$1 part=$2
  shift 2
  timeout "${GPU_TEST_TIMEOUT:-3000}" "$t" --gtest_output=json:"$part.json" "$@" >"$part.log" 2>&1
}

# Says how a part ended; on a crash (no gtest summary) a cuda-gdb backtrace of the binary.
report_part() {
  local name=$1 t=$2 part=$3 rc=$4
  if [ "$rc" -eq 0 ]; then
    echo "$name: $(grep -E '^\[  PASSED' "$part.log" | tail -1)"
    return 0
  fi
  echo "$name: FAILED (exit $rc)"
  grep -E "^\[  FAILED|Failure$|Expected|actual:|error" "$part.log" | head -60
  tail -3 "$part.log"
  if ! grep -q "^\[==========\].*ran" "$part.log" && command -v cuda-gdb >/dev/null; then
    echo "-- backtrace of the crash:"
    cuda-gdb -q -batch -ex run -ex bt --args "$t" 2>&1 | tail -25
  fi
  return 1
}

# The GPU suite, plus the model and method suites (CPU tests, but built with CUDA: checks that build too).
# The CPU-only folders run in CI; their data is not carried.
for name in ${GPU_CHECK_TESTS:-loft_tests_gpu loft_tests_models loft_tests_methods}; do
  t=$run/bin/$name
  if [ "$shards" -le 1 ]; then
    run_part "$t" "$OUT/$name"
    report_part "$name" "$t" "$OUT/$name" $? || status=1
    continue
  fi
  pids=()
  for ((i = 0; i < shards; i++)); do
    (
      [ ${#shard_gpus[@]} -gt 0 ] && export CUDA_VISIBLE_DEVICES=${shard_gpus[$i]}
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i run_part "$t" "$OUT/$name.shard$i" --gtest_filter="-$alone"
    ) &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}"
    report_part "$name (shard $((i + 1)) of $shards)" "$t" "$OUT/$name.shard$i" $? || status=1
  done
  (
    [ ${#shard_gpus[@]} -gt 0 ] && export CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${shard_gpus[*]}")
    run_part "$t" "$OUT/$name.alone" --gtest_filter="$alone"
  )
  report_part "$name (alone: $alone)" "$t" "$OUT/$name.alone" $? || status=1
done
if [ $# -gt 0 ]; then
  echo "== $*"; "$@"; status=$((status | $?))
fi
echo "gpu-check: status $status"
exit $status
