#include "models/llama/sliding_window.h"

#include <algorithm>

#include "engine/core/error.h"

namespace loft::llama {

void apply_sliding_window(std::vector<int32_t>& doc_start, int64_t seq, int64_t window) {
  if (window <= 0 || seq <= window) return;
  LOFT_CHECK(int64_t(doc_start.size()) % seq == 0, "sliding window: ", doc_start.size(),
             " tokens are not rows of ", seq);
  for (size_t t = 0; t < doc_start.size(); ++t) {
    const int64_t i = int64_t(t) % seq;  // row-local position
    doc_start[t] = int32_t(std::max<int64_t>(doc_start[t], i - window + 1));
  }
}

Tensor apply_sliding_window(const Tensor& doc_start, int64_t seq, int64_t window) {
  if (window <= 0 || seq <= window || !doc_start.defined()) return doc_start;
  std::vector<int32_t> host;
  for (int64_t v : doc_start.to(Device::cpu()).to_int_vector()) host.push_back(int32_t(v));
  apply_sliding_window(host, seq, window);
  return Tensor::from_vector(host, doc_start.shape(), doc_start.device());
}

}  // namespace loft::llama
