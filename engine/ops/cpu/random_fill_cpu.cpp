// fill_random on the CPU: the counter_rng formula, element by element.
#include "engine/ops/counter_rng.h"
#include "engine/ops/ops.h"

namespace loft::ops::cpu {

void fill_random(Tensor& x, uint64_t seed, float std) {
  const uint64_t key = counter_rng::key(seed);
  const float scale = counter_rng::uniform_scale(std);
  float* p = x.ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    p[i] = counter_rng::uniform(key, uint64_t(i), scale);
}

}  // namespace loft::ops::cpu
