// Low-precision GEMM on quantized codes: C = alpha · sa · sb · A·Bᵀ + beta · C, A [M, K] and B [N, K] codes
// (both K-major, as a projection's X [T×in] and W [out×in] are), sa and sb their F32 [1] scales,
// products accumulated in fp32 (int32 for INT8), the scales applied to the accumulator once.
// Formats: E4M3×E4M3, E5M2×E4M3 and E4M3×E5M2 (gradients), INT8×INT8.
// CUDA: cuBLASLt FP8 (compute capability >= 8.9) or INT8 when the shape allows it (M, N, K
// multiples of 16, 16-byte aligned operands); otherwise the codes are decoded to bf16 (exact) and
// the bf16 GEMM runs, which gives the same result up to fp32 summation order. CPU: decode to F32,
// F32 GEMM (the reference). C: F32 or BF16 (CPU: F32).
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::quant {

struct LowpGemmOptions {
  float alpha = 1.0f;
  // C's prior contents times beta are added before C's one rounding (a dX summed over the
  // projections that share an input, or a gradient accumulated, with no product tensor apart);
  // 0 ignores them (NaN in C does not leak).
  float beta = 0.0f;
  bool allow_fast = true;  // false forces the portable decode + bf16 GEMM path (tests compare both)
};

void gemm_lowp(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb, Tensor& c,
               const LowpGemmOptions& opt = {});

}  // namespace loft::quant
