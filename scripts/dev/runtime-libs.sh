#!/usr/bin/env bash
# Copies into DEST the shared libraries BINARY... load that the remote machines' images may lack:
# all but glibc (libc, libm, libpthread, libdl, librt, the loader), libstdc++, libgcc_s and the
# CUDA driver/toolkit libraries, which every image there has, and NCCL (218 MB, past the carry
# limit; the GPU image's PyTorch ships one, which gpu-check.sh puts on the library path). Used by
# the staging scripts
# (stage-gpu-run.sh, fuzz-stage.sh).
# usage: scripts/dev/runtime-libs.sh DEST BINARY...
set -euo pipefail
dest=$1; shift
mkdir -p "$dest"
ldd "$@" | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    libcuda.so*|libcudart*|libcublas*|libnvidia*|libnccl*) ;;
    *) cp -L "$lib" "$dest/";;
  esac
done
