#!/usr/bin/env bash
# Installs loft's build dependencies from the distribution (Debian/Ubuntu) and builds it into
# build/. Safe to re-run: installs only what is missing, then rebuilds incrementally.
#   LOFT_CUDA=AUTO|ON|OFF      build the CUDA backend (AUTO: when nvcc is found)
#   LOFT_CUDA_ARCHS="89;90a;120" GPU architectures (one is enough for CI and test runs; 90a, not
#                              90, gives the H100/H200 their wgmma kernels)
#   BUILD_DIR=build            where to build
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libsentencepiece-dev libcli11-dev
          nlohmann-json3-dev libzstd-dev zstd libgtest-dev libopenblas-dev libpcre2-dev
          libutf8proc-dev libyaml-cpp-dev protobuf-compiler libcpp-httplib-dev libjs-chart.js
          node-js-yaml)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Optional: headless Chromium renders a run report in a test (which skips without it). Debian
# packages it (~40 s to install); Ubuntu ships Chromium only as a snap.
if ! command -v chromium-headless-shell >/dev/null && ! command -v chromium >/dev/null; then
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq chromium-headless-shell >/dev/null ||
    echo "setup: chromium-headless-shell is not available; the report rendering test will skip"
fi

# nvcc usually lives outside PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLOFT_CUDA="${LOFT_CUDA:-AUTO}" -DLOFT_CUDA_ARCHS="${LOFT_CUDA_ARCHS:-89;90a;120}"
cmake --build "$build" -j "$(nproc)"
echo "setup: built $build/loft"
