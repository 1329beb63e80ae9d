#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/fuzz/ and writes the seed
# corpus to build-fuzz/corpus/. Needs clang and libFuzzer's runtime (Debian: clang and
# libclang-rt-dev, installed here with apt-get when missing). Only the parsers' sources are
# compiled (tests/fuzz/CMakeLists.txt), so this takes a couple of minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "fuzz-build: installing clang libclang-rt-dev"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq clang libclang-rt-dev >/dev/null
fi
BUILD=${LOFT_FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOFT_CUDA=OFF -DLOFT_FUZZ=ON \
  -DLOFT_BUILD_TESTS=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
ninja -C "$BUILD" fuzz_all
rm -rf "$BUILD/corpus" && python3 tests/fuzz/make_corpus.py "$BUILD/corpus" "${LOFT_TEST_DATA:-../shared/data}"
