#!/usr/bin/env bash
# Copies into DEST the shared libraries BINARY... load that the remote machines' images may lack:
# all but glibc (libc, libm, libpthread, libdl, librt, the loader), libstdc++, libgcc_s and the
# CUDA driver/toolkit libraries, which every image there has. Used by the staging scripts
# (stage-gpu-run.sh, fuzz-stage.sh).
# usage: scripts/runtime-libs.sh DEST BINARY...
set -euo pipefail
dest=$1; shift
mkdir -p "$dest"
ldd "$@" | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    libcuda.so*|libcudart*|libcublas*|libnvidia*) ;;
    *) cp -L "$lib" "$dest/";;
  esac
done
