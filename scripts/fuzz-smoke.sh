#!/usr/bin/env bash
# CI: builds the fuzz targets and runs each for a short time (default 20 s); any crash fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${1:-20}
scripts/fuzz-build.sh
for bin in "$BUILD"/fuzz/fuzz_*; do
  t=$(basename "$bin"); t=${t#fuzz_}
  mkdir -p "$BUILD/corpus/$t" "$BUILD/findings/$t"
  echo "== fuzz $t (${SECONDS_EACH}s)"
  "$bin" -max_total_time="$SECONDS_EACH" -max_len=262144 -timeout=10 -rss_limit_mb=4096 \
    -dict=tests/fuzz/loft.dict -artifact_prefix="$BUILD/findings/$t/" -print_final_stats=1 \
    "$BUILD/corpus/$t" 2>&1 | grep -E "^(stat::number_of_executed_units|#[0-9]+ +DONE|==[0-9]+==ERROR)" || true
  if ls "$BUILD/findings/$t"/crash-* "$BUILD/findings/$t"/leak-* "$BUILD/findings/$t"/timeout-* >/dev/null 2>&1; then
    echo "fuzz $t: findings in $BUILD/findings/$t" >&2; exit 1
  fi
done
