#!/usr/bin/env bash
# CI: builds the fuzz targets and runs each for a short time (default 20 s); a crash, leak,
# timeout or out-of-memory finding, or a target that exits non-zero, fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/dev/fuzz-common.sh
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${1:-20}
scripts/dev/fuzz-build.sh
for bin in "$BUILD"/fuzz/fuzz_*; do
  t=$(basename "$bin"); t=${t#fuzz_}
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  log="$BUILD/findings/$t.log"
  rc=0
  # shellcheck disable=SC2046
  "$bin" -max_total_time="$SECONDS_EACH" $(fuzz_flags "$t" tests/fuzz) -artifact_prefix="$BUILD/findings/$t/" \
    "$BUILD/corpus/$t" >"$log" 2>&1 || rc=$?
  echo "fuzz $t (${SECONDS_EACH}s): $(grep -E '^#[0-9]+' "$log" | tail -1 | tr -s ' ' | cut -c1-100)"
  found=$(fuzz_findings "$BUILD/findings/$t" | head -1)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    grep -E "==[0-9]+==ERROR|^SUMMARY|runtime error" "$log" | head -5 >&2 || true
    echo "fuzz $t: exit $rc; findings in $BUILD/findings/$t, log $log" >&2
    exit 1
  fi
done
