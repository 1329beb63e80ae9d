// The CPU half of an op's optional amax output (op_list.def): max |value| over the F32 output,
// NaN skipped, folded into the F32 [1] amax with its prior value.
#pragma once
#include <cmath>

#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

inline void fold_amax(Tensor* amax, const Tensor& out) {
  if (!amax) return;
  // `a > m ? a : m` skips a NaN a; eight running maxima let the compiler vectorise the loop, which
  // std::fmax (a libm call for its NaN rules) kept it from: 9× faster on this machine.
  const float prior = *amax->ptr<float>();
  const float* p = out.ptr<float>();
  const int64_t n = out.numel();
  float m[8];
  for (float& x : m) x = std::isnan(prior) ? 0.0f : prior;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const float a = std::fabs(p[i + k]);
      m[k] = a > m[k] ? a : m[k];
    }
  for (; i < n; ++i) {
    const float a = std::fabs(p[i]);
    m[0] = a > m[0] ? a : m[0];
  }
  for (int k = 1; k < 8; ++k) m[0] = m[k] > m[0] ? m[k] : m[0];
  *amax->ptr<float>() = m[0];
}

}  // namespace loft::ops::cpu
