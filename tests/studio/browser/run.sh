#!/usr/bin/env bash
# Runs the studio's browser test (studio.test.mjs) against LOFT_BINARY ($1). Needs Node, Debian's
# headless Chromium and puppeteer-core (npm ci --prefix tests/studio/browser; .ci/run does it).
# Without one of them it fails under CI=true and otherwise skips (exit 77, ctest's SKIP_RETURN_CODE),
# saying which is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LOFT_BINARY=${1:?usage: run.sh PATH/TO/loft}
export LOFT_SOURCE_DIR=$(cd "$here/../../.." && pwd)

missing=()
command -v node >/dev/null || missing+=("node (apt-get install nodejs)")
[ -n "${LOFT_CHROMIUM:-}" ] || [ -x /usr/bin/chromium-headless-shell ] || [ -x /usr/bin/chromium ] ||
  missing+=("Chromium (apt-get install chromium-headless-shell)")
[ -f "$here/node_modules/puppeteer-core/package.json" ] ||
  missing+=("puppeteer-core (npm ci --prefix tests/studio/browser)")
if ((${#missing[@]})); then
  if [ "${CI:-}" = true ]; then
    echo "studio browser test: missing ${missing[*]}" >&2
    exit 1
  fi
  echo "studio browser test skipped: missing ${missing[*]}"
  exit 77
fi
cd "$here"
exec node --test --test-reporter=spec studio.test.mjs
