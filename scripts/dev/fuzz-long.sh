#!/usr/bin/env bash
# Long fuzzing: every target (or those named) for RUNS executions in all (default 10^7), split over
# JOBS processes sharing one corpus; writes build-fuzz/report/<target>.txt with the executions
# summed over the jobs, the coverage reached (cov: edges, ft: features, the best job's) and the
# findings (crash-/leak-/timeout-/oom- files under build-fuzz/findings/<target>/). On the GPU
# machine's cores: scripts/dev/fuzz-stage.sh here, scripts/dev/fuzz-device.sh there.
# usage: scripts/dev/fuzz-long.sh [-r RUNS] [-j JOBS] [-t SECONDS_PER_TARGET] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/dev/fuzz-common.sh
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
RUNS=10000000 JOBS=$(( $(nproc) > 1 ? $(nproc) / 2 : 1 )) TIME=0
while getopts "r:j:t:" o; do case $o in r) RUNS=$OPTARG ;; j) JOBS=$OPTARG ;; t) TIME=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
[ -x "$BUILD/fuzz/fuzz_gguf" ] || scripts/dev/fuzz-build.sh
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=($(cd "$BUILD/fuzz" && ls fuzz_* | sed 's/^fuzz_//'))
mkdir -p "$BUILD/report"
for t in "${targets[@]}"; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  pids=()
  for j in $(seq 1 "$JOBS"); do
    # shellcheck disable=SC2046
    nice -n 15 "$BUILD/fuzz/fuzz_$t" -runs=$(( RUNS / JOBS )) -max_total_time="$TIME" $(fuzz_flags "$t" tests/fuzz) \
      -artifact_prefix="$BUILD/findings/$t/" "$BUILD/corpus/$t" >"$BUILD/report/$t.$j.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  runs=0 cov=0 ft=0
  for j in $(seq 1 "$JOBS"); do
    read -r n c f < <(fuzz_log_stats "$BUILD/report/$t.$j.log")
    runs=$((runs + n)); cov=$((c > cov ? c : cov)); ft=$((f > ft ? f : ft))
  done
  findings=$(fuzz_findings "$BUILD/findings/$t" | wc -l)
  echo "target $t: executions $runs ($JOBS jobs), cov $cov, ft $ft, findings $findings" | tee "$BUILD/report/$t.txt"
done
