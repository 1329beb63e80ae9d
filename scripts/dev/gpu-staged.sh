# Sourced by the scripts that run loft on the GPU machine, with the staged folder as $1
# (stage-gpu-run.sh): on a fresh machine its archive is unpacked first (bin/loft is not there yet),
# then gpu-libpath.sh puts its libraries and the image's NCCL on the library path.
if [ -f "$1/gpurun.tar.xz" ] && [ ! -x "$1/bin/loft" ]; then tar -C "$1" -xf "$1/gpurun.tar.xz"; fi
source "$(dirname "${BASH_SOURCE[0]}")/gpu-libpath.sh" "$1"
