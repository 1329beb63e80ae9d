#!/usr/bin/env bash
# Long fuzzing: every target (or those named) for RUNS executions in all (default 10^7), split over
# JOBS processes sharing one corpus; writes build-fuzz/report/<target>.txt with the executions
# summed over the jobs, the coverage reached (cov: edges, ft: features, the best job's) and the
# findings (crash-/leak-/timeout-/oom- files under build-fuzz/findings/<target>/).
# usage: scripts/fuzz-long.sh [-r RUNS] [-j JOBS] [-t SECONDS_PER_TARGET] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
RUNS=10000000 JOBS=$(( $(nproc) > 1 ? $(nproc) / 2 : 1 )) TIME=0
while getopts "r:j:t:" o; do case $o in r) RUNS=$OPTARG ;; j) JOBS=$OPTARG ;; t) TIME=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
[ -x "$BUILD/fuzz/fuzz_csv" ] || scripts/fuzz-build.sh
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=($(cd "$BUILD/fuzz" && ls fuzz_* | sed 's/^fuzz_//'))
mkdir -p "$BUILD/report"
for t in "${targets[@]}"; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  pids=()
  for j in $(seq 1 "$JOBS"); do
    nice -n 15 "$BUILD/fuzz/fuzz_$t" -runs=$(( RUNS / JOBS )) -max_total_time="$TIME" -max_len=262144 \
      -timeout=10 -rss_limit_mb=4096 -dict=tests/fuzz/loft.dict -artifact_prefix="$BUILD/findings/$t/" \
      -print_final_stats=1 "$BUILD/corpus/$t" >"$BUILD/report/$t.$j.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  runs=0 cov=0 ft=0
  for j in $(seq 1 "$JOBS"); do
    n=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$BUILD/report/$t.$j.log" | grep -oE "[0-9]+$" || echo 0)
    line=$(grep -E "^#[0-9]+" "$BUILD/report/$t.$j.log" | tail -1)
    c=$(grep -oE "cov: [0-9]+" <<<"$line" | grep -oE "[0-9]+" || echo 0)
    f=$(grep -oE "ft: [0-9]+" <<<"$line" | grep -oE "[0-9]+" || echo 0)
    runs=$((runs + n)); cov=$((c > cov ? c : cov)); ft=$((f > ft ? f : ft))
  done
  findings=$(find "$BUILD/findings/$t" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
  echo "target $t: executions $runs ($JOBS jobs), cov $cov, ft $ft, findings $findings" | tee "$BUILD/report/$t.txt"
done
