// The counter-based generator behind ops::fill_random, shared word for word by the CPU and CUDA
// backends (this header compiles as host code and, under nvcc, as device code too), so both
// produce the same bits for the same (seed, element index) whatever the thread layout.
//
// Element i of a fill with seed s:
//   h = mix64(mix64(s) + (i + 1)·γ)          splitmix64's finaliser and golden-ratio increment γ
//   k = (h >> 40) − 2^23                     24 random bits as an integer in [−2^23, 2^23)
//   x = float(2k + 1) · (bound · 2^−24)      a midpoint of 2^24 equal cells of [−bound, bound)
// float(2k + 1) is exact (|2k + 1| < 2^24) and bound·2^−24 is an exact power-of-two scaling, so x
// is one correctly rounded fp32 multiply: identical on every backend. x is uniform with mean 0
// and variance bound²/3 (less 2^−48 relative), so bound = √3·std gives variance std².
#pragma once
#include <cstdint>

#include "engine/ops/host_device.h"

namespace loft::ops::counter_rng {

// splitmix64's output function (Stafford's "Mix13").
LOFT_HOST_DEVICE uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// mix64(seed), computed once per fill.
LOFT_HOST_DEVICE uint64_t key(uint64_t seed) { return mix64(seed); }

// `scale` is bound · 2^−24 (see uniform_scale).
LOFT_HOST_DEVICE float uniform(uint64_t key, uint64_t index, float scale) {
  const uint64_t h = mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  const int32_t k = int32_t(h >> 40) - (int32_t(1) << 23);
  return float(2 * k + 1) * scale;
}

// The per-element multiplier for values of standard deviation `std`: √3·std·2^−24.
inline float uniform_scale(float std) { return 1.7320508075688772f * std * 0x1p-24f; }

}  // namespace loft::ops::counter_rng

#undef LOFT_HOST_DEVICE
