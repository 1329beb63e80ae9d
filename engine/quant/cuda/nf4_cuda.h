// NF4 + double quantization on CUDA (see engine/quant/nf4.h for the format). Reached through
// quantize_nf4 / dequantize_nf4_into for tensors on a GPU; inputs arrive validated by nf4.cpp.
#pragma once
#include "engine/quant/nf4.h"

namespace loft {

// Same bytes as the CPU reference: the same fp32 divisions and threshold searches; the absmax
// mean is taken on the host from the device absmaxes with nf4_absmax_mean.
Nf4Tensor quantize_nf4_cuda(const Tensor& w);
// One kernel decodes both levels and writes the weight (F32, or BF16 rounded to nearest even).
void dequantize_nf4_cuda(const Nf4Tensor& q, Tensor& out);
// quant::nf4_to_lowp on CUDA (validated there): one kernel decodes both levels and writes
// Q(deq / scale) codes, through 32×32 shared-memory tiles when transposed.
void nf4_to_lowp_cuda(const Nf4Tensor& q, float scale, bool transposed, Tensor& codes);
// quant::nf4_max_abs on CUDA: one pass over the codes on the GPU, the same float as the CPU's.
float nf4_max_abs_cuda(const Nf4Tensor& q);

}  // namespace loft
