#!/usr/bin/env bash
# CI: builds the fuzz targets and runs each for a short time (default 20 s); a crash, leak,
# timeout or out-of-memory finding, or a target that exits non-zero, fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/dev/fuzz-common.sh
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${1:-20}
scripts/dev/fuzz-build.sh
# smoke TARGET: one target's run; prints its last status line, and on a finding or a non-zero exit
# the log's error lines, then fails.
smoke() {
  local t=$1 log="$BUILD/findings/$1.log" rc=0 found
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  # shellcheck disable=SC2046
  "$BUILD/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" $(fuzz_flags "$t" tests/fuzz) \
    -artifact_prefix="$BUILD/findings/$t/" "$BUILD/corpus/$t" >"$log" 2>&1 || rc=$?
  echo "fuzz $t (${SECONDS_EACH}s): $(grep -E '^#[0-9]+' "$log" | tail -1 | tr -s ' ' | cut -c1-100)"
  found=$(fuzz_findings "$BUILD/findings/$t" | sed -n 1p)  # sed reads it all: no SIGPIPE under pipefail
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    grep -E "==[0-9]+==ERROR|^SUMMARY|runtime error" "$log" | head -5 >&2 || true
    echo "fuzz $t: exit $rc; findings in $BUILD/findings/$t, log $log" >&2
    return 1
  fi
}
# A target runs on one core: as many at once as there are cores (LOFT_FUZZ_JOBS), each still for
# SECONDS_EACH of its own core (CI: two at a time on its two cores).
jobs=${LOFT_FUZZ_JOBS:-$(nproc)} running=0 failed=0
for bin in "$BUILD"/fuzz/fuzz_*; do
  t=$(basename "$bin"); t=${t#fuzz_}
  if ((running >= jobs)); then wait -n || failed=1; running=$((running - 1)); fi
  smoke "$t" &
  running=$((running + 1))
done
while ((running > 0)); do wait -n || failed=1; running=$((running - 1)); done
exit "$failed"
