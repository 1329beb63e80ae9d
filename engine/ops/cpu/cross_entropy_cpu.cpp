// Softmax cross-entropy on the CPU: per row a max-subtracted log-sum-exp (exp in fp32, the sum
// in double), loss = lse − logit[target]. dlogits may be the logits tensor itself: each row is
// fully read (max, sum, target logit) before any of it is overwritten.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/ops.h"

namespace loft::ops::cpu {

namespace {
// Row r of a BF16 [rows, vocab] tensor = the fp32 values rounded to nearest even.
void store_rounded(const std::vector<float>& values, Tensor& out, int64_t r) {
  uint16_t* dst = out.ptr<uint16_t>() + r * int64_t(values.size());
  for (size_t j = 0; j < values.size(); ++j) dst[j] = f32_to_bf16(values[j]);
}
}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses, Tensor* dlogits,
                   float grad_scale) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const int32_t* tgt = targets.ptr<int32_t>();
  // Check every target first so that a bad one leaves losses and dlogits untouched.
  for (int64_t r = 0; r < rows; ++r)
    if (tgt[r] != kIgnoreIndex && (tgt[r] < 0 || tgt[r] >= vocab))
      throw Error(cat("cross_entropy: target ", tgt[r], " at position ", r,
                      " is outside the vocabulary [0, ", vocab, ") and is not the ignore index ",
                      kIgnoreIndex));
  const float* lp = logits.ptr<float>();
  float* loss = losses.ptr<float>();
  // A BF16 gradient (F32 logits) is computed in fp32 per row, then rounded.
  const bool rounded = dlogits && dlogits->dtype() == DType::BF16;
  float* gp = dlogits && !rounded ? dlogits->ptr<float>() : nullptr;
  std::vector<float> row(rounded ? size_t(vocab) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = lp + r * vocab;
    float* g = rounded ? row.data() : gp ? gp + r * vocab : nullptr;
    if (tgt[r] == kIgnoreIndex) {
      loss[r] = 0.0f;
      if (g)
        for (int64_t j = 0; j < vocab; ++j) g[j] = 0.0f;
      if (rounded) store_rounded(row, *dlogits, r);
      continue;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) mx = std::max(mx, x[j]);
    double sum = 0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(x[j] - mx);
    const float shifted_target = x[tgt[r]] - mx;
    loss[r] = float(std::log(sum) - double(shifted_target));
    if (!g) continue;
    const double inv = double(grad_scale) / sum;
    for (int64_t j = 0; j < vocab; ++j) g[j] = float(inv * std::exp(x[j] - mx));
    // Subtract the one-hot in double: p·s − s in fp32 would cancel badly when p → 1.
    g[tgt[r]] = float(inv * std::exp(shifted_target) - double(grad_scale));
    if (rounded) store_rounded(row, *dlogits, r);
  }
}

}  // namespace loft::ops::cpu
