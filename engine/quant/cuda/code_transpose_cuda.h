// CUDA half of engine/quant/code_transpose (built only with the CUDA backend). The caller has
// validated dtypes, shapes, devices and that the buffers do not overlap.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::quant::cuda {

// 64×128-byte tiles through shared memory with 16-byte loads and stores when both dimensions are
// multiples of 16 and both pointers 16-byte aligned (every Llama projection); 32×32 byte tiles
// otherwise.
void transpose_codes(const Tensor& src, Tensor& dst);

}  // namespace loft::quant::cuda
