// The CPU half of an op's optional amax output (op_list.def): max |value| over the F32 output,
// NaN skipped, folded into the F32 [1] amax with its prior value.
#pragma once
#include <cmath>

#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

inline void fold_amax(Tensor* amax, const Tensor& out) {
  if (!amax) return;
  float m = *amax->ptr<float>();
  const float* p = out.ptr<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) m = std::fmax(m, std::fabs(p[i]));
  *amax->ptr<float>() = m;
}

}  // namespace loft::ops::cpu
