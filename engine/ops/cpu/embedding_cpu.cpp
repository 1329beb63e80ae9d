// Embedding lookup and its scatter-add backward on the CPU. Ids are checked before anything is
// written, so a bad id leaves the output untouched and names the token position.
#include <cstring>

#include "engine/ops/cpu/cpu_ops.h"

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
  const int64_t vocab = table.size(0), d = table.size(1);
  check_ids("embedding", ids, vocab);
  const int32_t* id = ids.ptr<int32_t>();
  const float* tp = table.ptr<float>();
  float* op = out.ptr<float>();
  for (int64_t t = 0, n = ids.numel(); t < n; ++t)
    std::memcpy(op + t * d, tp + int64_t(id[t]) * d, size_t(d) * sizeof(float));
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
