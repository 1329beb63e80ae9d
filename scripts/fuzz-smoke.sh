#!/usr/bin/env bash
# CI: builds the fuzz targets and runs each for a short time (default 20 s); a crash, leak,
# timeout or out-of-memory finding, or a target that exits non-zero, fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${1:-20}
scripts/fuzz-build.sh
for bin in "$BUILD"/fuzz/fuzz_*; do
  t=$(basename "$bin"); t=${t#fuzz_}
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  log="$BUILD/findings/$t.log"
  rc=0
  "$bin" -max_total_time="$SECONDS_EACH" -max_len=262144 -timeout=10 -rss_limit_mb=4096 \
    -dict=tests/fuzz/loft.dict -artifact_prefix="$BUILD/findings/$t/" -print_final_stats=1 \
    "$BUILD/corpus/$t" >"$log" 2>&1 || rc=$?
  echo "fuzz $t (${SECONDS_EACH}s): $(grep -E '^#[0-9]+' "$log" | tail -1 | tr -s ' ' | cut -c1-100)"
  found=$(find "$BUILD/findings/$t" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | head -1)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    grep -E "==[0-9]+==ERROR|^SUMMARY|runtime error" "$log" | head -5 >&2 || true
    echo "fuzz $t: exit $rc; findings in $BUILD/findings/$t, log $log" >&2
    exit 1
  fi
done
