#!/usr/bin/env bash
# Prepares .gpurun/ (ignored) for a run on the remote GPU machine, which gets the working tree
# (tests/data included) and nothing beside it, and may lack some runtime libraries: stripped
# binaries from BUILD_DIR, the shared libraries they need that are not part of the CUDA toolkit or
# glibc, and the test data files tests/data leaves out, from $LOFT_TEST_DATA or ../shared/data.
# Then, on the GPU machine: scripts/dev/gpu-check.sh (with .gpurun carried). STAGE_DIR (default .gpurun)
# stages a second build beside the first (BUILD_DIR=build-sm89 STAGE_DIR=.gpurun89), which
# GPU_RUN_DIR=.gpurun89 scripts/dev/gpu-check.sh runs. STAGE_LOFT_BEFORE and STAGE_CUBLASLT_ALGOS
# add binaries (below).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
data=${LOFT_TEST_DATA:-../shared/data}
dst=${STAGE_DIR:-.gpurun}
rm -rf "$dst"
mkdir -p "$dst/bin" "$dst/lib" "$dst/data"
# STAGE_TESTS narrows the test binaries (e.g. "loft_tests_gpu") to keep under the carry limit.
for b in "$build"/loft "$build"/tests/loft_tests_*; do
  if [ -n "${STAGE_TESTS:-}" ] && [ "$b" != "$build/loft" ] && ! [[ " $STAGE_TESTS " == *" $(basename "$b") "* ]]; then continue; fi
  case "$b" in *.cmake) continue;; esac
  [ -x "$b" ] && strip -o "$dst/bin/$(basename "$b")" "$b"
done
# STAGE_LOFT_BEFORE=path: another build's loft, staged as bin/loft-before (bench-ab.sh's A).
if [ -n "${STAGE_LOFT_BEFORE:-}" ]; then strip -o "$dst/bin/loft-before" "$STAGE_LOFT_BEFORE"; fi
# STAGE_CUBLASLT_ALGOS=1: the survey of cuBLASLt's algorithms (scripts/dev/cublaslt_algos.cu).
if [ -n "${STAGE_CUBLASLT_ALGOS:-}" ]; then
  nvcc -O2 -arch=sm_90 -o "$dst/bin/cublaslt_algos" scripts/dev/cublaslt_algos.cu -lcublasLt
  strip "$dst/bin/cublaslt_algos"
fi
# Libraries from the distribution that the GPU image may not have (OpenBLAS, SentencePiece...).
scripts/dev/runtime-libs.sh "$dst/lib" "$dst"/bin/*
# Test data the GPU-side tests read (models, golden values, tokenizers, references).
mkdir -p "$dst/data/models"
# STAGE_EXTRA adds folders of the data dir (e.g. "mmlu gsm8k" for scripts/dev/bench-eval.sh).
# Only the files the working tree's tests/data lacks (it travels with the tree; tests name the
# file they read and look in $LOFT_TEST_DATA, then tests/data), and STAGE_EXTRA's folders whole
# (evaluate reads a folder: the full MMLU/GSM8K).
for d in golden reference tokenizers tinystories alpaca models/stories260K-hf models/wide-random; do
  (cd "$data" && find "$d" -type f) | while read -r f; do
    cmp -s "$data/$f" "tests/data/$f" && continue
    mkdir -p "$dst/data/$(dirname "$f")" && cp "$data/$f" "$dst/data/$f"
  done
done
for d in ${STAGE_EXTRA:-}; do mkdir -p "$dst/data/$(dirname "$d")" && cp -r "$data/$d" "$dst/data/$d"; done
# One compressed archive keeps the carried size under the 64 MiB limit (OpenBLAS alone is 36 MB;
# -9e: the tree itself is 37 MB since the Qwen3 tokenizer, and -6 left a GPU stage 2 MB over).
XZ_OPT="-T0 -9e" tar -C "$dst" -cJf gpurun.tar.xz bin lib data
rm -rf "$dst"/*
mv gpurun.tar.xz "$dst/"
du -sh "$dst"
# What a device call would carry: the tracked tree plus this archive. The device tool refused
# 61.5 MiB (64.5 million bytes) on 2026-11-29 and took 50.6 MiB: count its 64 MB as 64e6 bytes.
tree_bytes=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
total=$((tree_bytes + $(stat -c %s "$dst/gpurun.tar.xz")))
echo "a device call carries about $((total / 1000000)) MB (tree + $dst; the limit is 64 MB)"
if [ "$total" -ge 64000000 ]; then
  echo "over the limit: stage fewer suites (STAGE_TESTS), or move a large tracked file the device" \
    "tests do not read out of the tree for the call (largest:)" >&2
  git ls-files -z | xargs -0 du -k | sort -rn | sed -n 1,3p >&2  # not head: sort would die of SIGPIPE under pipefail
fi
