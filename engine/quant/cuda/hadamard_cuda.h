// CUDA Hadamard transforms behind engine/quant/hadamard.h and rotate_quantize.h (which validate
// the operands first). Plain C++ header: callable from .cpp files of a CUDA build.
#pragma once
#include "engine/quant/hadamard.h"

namespace loft::quant {

// Rotates every row of x into y (F32 or BF16, same dtype, both on one CUDA device; y may be x),
// fp32 math, one thread block per row, queued on cuda::stream(device). Throws Error naming n when
// a row does not fit in the device's shared memory.
void hadamard_transform_cuda(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                             bool inverse);
// Rotates every column (token_transform's contract): one thread block per token block × 32
// columns, the tile staged in shared memory; reads x once, writes y once.
void token_transform_cuda(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                          bool inverse);
// codes (code dtype of the format, [rows..., n] or [plan.n, N] for token_dim) and scale (F32 [1])
// of the rotated x, rotated twice on the fly: an amax pass, then a cast pass.
void rotate_quantize_cuda(const HadamardPlan& plan, const Tensor& x, bool token_dim, Tensor& codes,
                          Tensor& scale);

}  // namespace loft::quant
