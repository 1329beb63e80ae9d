// max(prior, |p[i]|) over n floats, NaN skipped: the amax of a per-tensor scale on the CPU (the
// ops' amax outputs, the quantizer). `a > m ? a : m` skips a NaN a, and eight running maxima let
// the compiler vectorise the loop, which std::fmax (a libm call for its NaN rules) kept it from:
// 9x faster on the development machine. Any order gives the same maximum.
#pragma once
#include <cmath>
#include <cstdint>

namespace loft {

inline float max_abs(const float* p, int64_t n, float prior = 0.0f) {
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
  return m[0];
}

}  // namespace loft
