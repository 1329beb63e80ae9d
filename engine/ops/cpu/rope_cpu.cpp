// Rotary position embedding on the CPU, Hugging Face rotate-half convention. Angles and their
// cos/sin are fp32 exactly as transformers computes them (θ = float(pos) · inv_freq[i]).
#include <cmath>
#include <vector>

#include "engine/ops/cpu/amax_cpu.h"
#include "engine/ops/ops.h"

namespace loft::ops::cpu {

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse,
          Tensor* x_amax) {
  const int64_t tokens = x.size(0), heads = x.size(1), half = x.size(2) / 2;
  const int32_t* pos = positions.ptr<int32_t>();
  const float* freq = inv_freq.ptr<float>();
  float* xp = x.ptr<float>();
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float theta = float(pos[t]) * freq[i];
      cs[size_t(i)] = std::cos(theta);
      // Rotating by −θ is the transpose of the rotation, i.e. the backward pass.
      sn[size_t(i)] = inverse ? -std::sin(theta) : std::sin(theta);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = xp + (t * heads + h) * 2 * half;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cs[size_t(i)] - b * sn[size_t(i)];
        v[i + half] = b * cs[size_t(i)] + a * sn[size_t(i)];
      }
    }
  }
  fold_amax(x_amax, x);
}

}  // namespace loft::ops::cpu
