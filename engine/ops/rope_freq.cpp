#include "engine/ops/rope_freq.h"

#include <cmath>

#include "engine/core/error.h"

namespace loft {

std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& s) {
  LOFT_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim ", head_dim, " must be even");
  std::vector<float> inv(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    // transformers: 1.0 / (base ** (torch.arange(0, dim, 2, dtype=int64).float() / dim)), in fp32.
    const float exponent = float(2 * i) / float(head_dim);
    inv[size_t(i)] = 1.0f / std::pow(float(theta), exponent);
  }
  if (s.type == "default") return inv;
  if (s.type == "linear") {
    for (float& f : inv) f = float(f / s.factor);
    return inv;
  }
  if (s.type == "llama3") {
    // transformers' _compute_llama3_parameters.
    const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = float(f / s.factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = float((1 - smooth) * f / s.factor + smooth * f);
      }
    }
    return inv;
  }
  throw Error(cat("rope_scaling type '", s.type, "' is not supported (default, linear, llama3)"));
}

}  // namespace loft
