#!/usr/bin/env bash
# Long fuzzing: every target (or those named) for -runs=RUNS executions (default 10^7) with JOBS
# parallel workers each; writes build-fuzz/report/<target>.txt with executions, coverage (cov:
# edges, ft: features) and any findings. usage: scripts/fuzz-long.sh [-r RUNS] [-j JOBS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
RUNS=10000000 JOBS=$(( $(nproc) > 1 ? $(nproc) / 2 : 1 ))
while getopts "r:j:" o; do case $o in r) RUNS=$OPTARG ;; j) JOBS=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
[ -x "$BUILD/fuzz/fuzz_csv" ] || scripts/fuzz-build.sh
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=($(cd "$BUILD/fuzz" && ls fuzz_* | sed 's/^fuzz_//'))
mkdir -p "$BUILD/report"
for t in "${targets[@]}"; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  per_job=$(( RUNS / JOBS ))
  log="$BUILD/report/$t.log"
  # -fork keeps going after a finding and merges coverage of all jobs into one corpus.
  nice -n 15 "$BUILD/fuzz/fuzz_$t" -fork="$JOBS" -runs="$RUNS" -max_len=262144 -timeout=10 \
    -rss_limit_mb=4096 -dict=tests/fuzz/loft.dict -artifact_prefix="$BUILD/findings/$t/" \
    -print_final_stats=1 "$BUILD/corpus/$t" >"$log" 2>&1 || true
  {
    echo "target $t: runs requested $RUNS ($JOBS jobs, $per_job each)"
    grep -E "^#[0-9]+" "$log" | tail -1
    grep -E "stat::number_of_executed_units" "$log" | tail -1 || true
    echo "findings: $(ls "$BUILD/findings/$t" | wc -l)"
  } | tee "$BUILD/report/$t.txt"
done
