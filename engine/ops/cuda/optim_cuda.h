// CUDA AdamW step and sum of squares (semantics: ops.h). F32 tensors on one CUDA device; callers
// validate through ops.cpp. The AdamW kernel rounds each operation like the CPU reference
// (no fused multiply-adds), so both backends take the same steps.
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops::cuda_optim {

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s);
// Σ x², accumulated in double on the device; waits for the result.
double sum_squares(const Tensor& x);

}  // namespace loft::ops::cuda_optim
