#!/usr/bin/env bash
# Packs the fuzz targets for long runs on the GPU machine's CPU cores (scripts/dev/fuzz-device.sh
# there, with .fuzzrun carried): .fuzzrun/fuzzrun.tgz holds bin/ (the instrumented targets, debug
# info stripped: ASan still names functions; symbolize with the unstripped build-fuzz/fuzz/
# binaries here), lib/ (the shared libraries scripts/dev/runtime-libs.sh picks), dict/ and corpus/
# (build-fuzz/corpus: the seeds plus whatever local runs found). Refuses to leave more than 50 MiB.
# usage: scripts/dev/fuzz-stage.sh [TARGET...]   (default every target; named ones get all the cores there)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
[ -x "$BUILD/fuzz/fuzz_gguf" ] || scripts/dev/fuzz-build.sh
[ -d "$BUILD/corpus/gguf" ] || python3 tests/fuzz/make_corpus.py "$BUILD/corpus" "${LOFT_TEST_DATA:-../shared/data}"
dst=.fuzzrun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/dict"
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=($(cd "$BUILD/fuzz" && ls fuzz_* | sed 's/^fuzz_//'))
mkdir -p "$tmp/corpus"
for t in "${targets[@]}"; do
  [ -x "$BUILD/fuzz/fuzz_$t" ] || { echo "fuzz-stage: no target $t in $BUILD/fuzz" >&2; exit 2; }
  strip --strip-debug -o "$tmp/bin/fuzz_$t" "$BUILD/fuzz/fuzz_$t"
  cp -r "$BUILD/corpus/$t" "$tmp/corpus/$t"
done
scripts/dev/runtime-libs.sh "$tmp/lib" "$tmp"/bin/*
cp tests/fuzz/*.dict "$tmp/dict/"
rm -rf "$dst" && mkdir -p "$dst"
tar -C "$tmp" -czf "$dst/fuzzrun.tgz" bin lib dict corpus
size=$(stat -c %s "$dst/fuzzrun.tgz")
if [ "$size" -gt $((50 << 20)) ]; then
  echo "fuzz-stage: $dst/fuzzrun.tgz is $((size >> 20)) MiB, over 50 MiB: shrink $BUILD/corpus (libFuzzer -merge=1)" >&2
  exit 1
fi
echo "fuzz-stage: $dst/fuzzrun.tgz, $((size >> 20)) MiB: $(ls "$tmp/bin" | wc -l) targets, libs: $(ls "$tmp/lib" | tr '\n' ' ')"
