// CUDA AdamW and sum of squares (semantics: ops.h), per tensor (optim_cuda.cu) and over all of an
// optimizer's tensors in one launch each (multi_tensor_optim.cu). F32 tensors on one CUDA device;
// callers validate through ops.cpp. The AdamW kernels round each operation like the CPU reference
// (no fused multiply-adds, adamw_element.cuh), so both backends take the same steps.
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops::cuda_optim {

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s);
// Σ x², accumulated in double on the device in a fixed order; waits for the result.
double sum_squares(const Tensor& x);
double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale);
void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s);

}  // namespace loft::ops::cuda_optim
