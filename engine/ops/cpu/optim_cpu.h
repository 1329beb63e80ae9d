// CPU AdamW step and sum of squares (see ops.h).
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops::cpu {
void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s);
double sum_squares(const Tensor& x);
}  // namespace loft::ops::cpu
