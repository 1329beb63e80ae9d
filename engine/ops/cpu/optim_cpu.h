// CPU AdamW step and sum of squares, and their multi-tensor forms (see ops.h).
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops::cpu {
void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s);
double sum_squares(const Tensor& x);
double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale);
void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s);
}  // namespace loft::ops::cpu
