// Embedding lookup and its scatter-add backward on the CPU. Ids are checked before anything is
// written, so a bad id leaves the output untouched and names the token position.
#include <algorithm>
#include <cstring>

#include "engine/core/parallel.h"
#include "engine/ops/ops.h"

namespace loft::ops::cpu {
namespace {

void check_ids(const char* op, const Tensor& ids, int64_t vocab) {
  const int32_t* id = ids.ptr<int32_t>();
  for (int64_t t = 0, n = ids.numel(); t < n; ++t)
    if (id[t] < 0 || id[t] >= vocab)
      throw Error(cat(op, ": token ", t, " has id ", id[t], ", outside the vocabulary [0, ", vocab,
                      ")"));
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int64_t vocab = table.size(0), n = ids.numel();
  check_ids("embedding", ids, vocab);
  const int32_t* id = ids.ptr<int32_t>();
  // Rows are copied as bytes (F32 or BF16: exact either way), in blocks of rows over host threads
  // when there is enough to copy (a GPU model's batch gathered from its host-side table).
  const size_t row = size_t(table.size(1)) * dtype_size(table.dtype());
  const auto* tp = static_cast<const char*>(table.data());
  auto* op = static_cast<char*>(out.data());
  constexpr int64_t kRowsPerBlock = 256;
  const int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  const int threads = size_t(n) * row >= (size_t(8) << 20) ? 0 : 1;  // 8 MiB: worth the threads
  parallel_for(blocks, [&](int64_t b) {
    for (int64_t t = b * kRowsPerBlock, end = std::min(n, t + kRowsPerBlock); t < end; ++t)
      std::memcpy(op + size_t(t) * row, tp + size_t(id[t]) * row, row);
  }, threads);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const int64_t vocab = dtable.size(0), d = dtable.size(1);
  check_ids("embedding_backward", ids, vocab);
  const int32_t* id = ids.ptr<int32_t>();
  const float* gp = dout.ptr<float>();
  float* tp = dtable.ptr<float>();
  for (int64_t t = 0, n = ids.numel(); t < n; ++t) {
    float* row = tp + int64_t(id[t]) * d;
    const float* g = gp + t * d;
    for (int64_t j = 0; j < d; ++j) row[j] += g[j];
  }
}

}  // namespace loft::ops::cpu
