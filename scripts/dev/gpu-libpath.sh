# Sourced by the scripts that run loft on the GPU machine, with the staged folder as $1: the
# libraries carried there (runtime-libs.sh), then NCCL, which is not carried (218 MB, past the carry
# limit) but ships with the image's PyTorch (the CUDA build of loft loads libnccl.so.2 at first use).
export LD_LIBRARY_PATH=$1/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nccl_dir=$(python3 -c 'import os, nvidia.nccl; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
if [ -n "$nccl_dir" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$nccl_dir; fi
