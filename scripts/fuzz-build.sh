#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/fuzz/ and writes the seed
# corpus to build-fuzz/corpus/. Needs clang and libclang-rt (Debian: libclang-rt-14-dev or the
# libclang-common-14-dev that ships libclang_rt.fuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOFT_CUDA=OFF -DLOFT_FUZZ=ON \
  -DLOFT_BUILD_TESTS=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
ninja -C "$BUILD" fuzz_all
rm -rf "$BUILD/corpus" && python3 tests/fuzz/make_corpus.py "$BUILD/corpus" "${LOFT_TEST_DATA:-../shared/data}"
