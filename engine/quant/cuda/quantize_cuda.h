// CUDA halves of engine/quant (built only with the CUDA backend). Callers have validated
// shapes, dtypes and devices (engine/quant/quantize.cpp, lowp_gemm.cpp).
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::quant::cuda {

// Fused amax pass (skipped when amax is given), then one cast pass writing codes (and codes_t for
// 2-D x when given) and scale.
void quantize(const Tensor& x, Tensor& codes, Tensor* codes_t, Tensor& scale,
              const Tensor* amax = nullptr);
// out = decode(codes) * (scale ? *scale : 1).
void dequantize(const Tensor& codes, const Tensor* scale, Tensor& out);
// c = alpha * sa * sb * acc + beta * c (c's prior contents unread when beta is 0), acc F32 or
// I32 [M, N], c F32 or BF16 [M, N]; scales F32 [1] on device.
void apply_scales(const Tensor& acc, const Tensor& sa, const Tensor& sb, float alpha, float beta,
                  Tensor& c);
// The cuBLASLt FP8 / INT8 path for c = alpha·sa·sb·a·bᵀ + beta·c (an N that is not a multiple
// of 16 padded); returns false (doing nothing) when the GPU, the formats, the shapes (M and K
// multiples of 16) or the alignments do not allow it, or cuBLASLt's kernel cannot add C.
bool gemm_lowp_fast(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb, Tensor& c,
                    float alpha, float beta = 0.0f);
// acc I32 [M, N] = a·bᵀ for INT8 a [M, K] and b [N, K] through cuBLASLt's IGEMM (exact int32);
// false (nothing done) when the shapes (multiples of 16), alignments or cuBLASLt do not allow it.
bool igemm_i32(const Tensor& a, const Tensor& b, Tensor& acc);

}  // namespace loft::quant::cuda
