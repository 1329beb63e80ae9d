// CUDA Hadamard transform behind quant::hadamard_transform (which validates the operands first).
// Plain C++ header: callable from .cpp files of a CUDA build.
#pragma once
#include "engine/quant/hadamard.h"

namespace loft::quant {

// Rotates every row of x into y (F32 or BF16, same dtype, both on one CUDA device; y may be x),
// fp32 math, one thread block per row, queued on cuda::stream(device). Throws Error naming n when
// a row does not fit in the device's shared memory.
void hadamard_transform_cuda(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                             bool inverse);

}  // namespace loft::quant
