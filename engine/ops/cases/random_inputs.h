// Random inputs drawn on the CPU with a caller's generator: the op table's cases
// (engine/ops/cases/op_cases.h) and the test suites (tests/common/test_util.h) draw with these.
#pragma once
#include <random>

#include "engine/tensor/tensor.h"

namespace loft::cases {

// F32 tensor on the CPU with entries uniform in [lo, hi).
Tensor random_tensor(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f);
// I32 tensor on the CPU with entries uniform in [0, n).
Tensor random_ids(const Shape& shape, int32_t n, std::mt19937& rng);
// Attention doc_start [rows·seq] I32 on the CPU: each row packed with documents of random lengths
// in [1, max_doc_len]; every token holds the row-local index of its document's first token.
Tensor random_doc_start(int64_t rows, int64_t seq, int64_t max_doc_len, std::mt19937& rng);

}  // namespace loft::cases
