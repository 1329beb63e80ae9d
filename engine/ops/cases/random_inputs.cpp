#include "engine/ops/cases/random_inputs.h"

#include <algorithm>

namespace loft::cases {

Tensor random_tensor(const Shape& shape, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

Tensor random_ids(const Shape& shape, int32_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, n - 1);
  std::vector<int32_t> v(size_t(shape_numel(shape)));
  for (int32_t& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

Tensor random_doc_start(int64_t rows, int64_t seq, int64_t max_doc_len, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> len(1, std::max<int64_t>(max_doc_len, 1));
  std::vector<int32_t> v(size_t(rows * seq));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t start = 0, end = 0; start < seq; start = end) {
      end = std::min(seq, start + len(rng));
      for (int64_t i = start; i < end; ++i) v[size_t(r * seq + i)] = int32_t(start);
    }
  return Tensor::from_vector(v, {rows * seq});
}

}  // namespace loft::cases
