#include "models/llama/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/core/error.h"
#include "engine/ops/counter_rng.h"
#include "engine/ops/cpu/kv_cache_cpu.h"

namespace loft::llama {

void validate(const SamplingOptions& opt) {
  LOFT_CHECK(std::isfinite(opt.temperature) && opt.temperature >= 0.0,
             "sampling: temperature must be >= 0 (0 = greedy), got ", opt.temperature);
  LOFT_CHECK(opt.top_k >= 0, "sampling: top_k must be >= 0 (0 = off), got ", opt.top_k);
  LOFT_CHECK(opt.top_p > 0.0 && opt.top_p <= 1.0, "sampling: top_p must be in (0, 1], got ",
             opt.top_p);
}

double sampling_uniform(uint64_t seed, uint64_t sequence, uint64_t step) {
  using ops::counter_rng::mix64;
  const uint64_t h = mix64(mix64(mix64(seed) + (sequence + 1) * 0x9E3779B97F4A7C15ull) +
                           (step + 1) * 0xD1B54A32D192ED03ull);
  return double(h >> 11) * 0x1p-53;  // 53 random bits
}

int32_t argmax(const float* logits, int64_t vocab) { return ops::cpu::argmax(logits, vocab); }

namespace {

// Candidates needed before the top-p mass can be judged without sorting the whole vocabulary.
constexpr int64_t kFirstCut = 1024;

}  // namespace

int32_t sample_token(const float* logits, int64_t vocab, const SamplingOptions& opt, double u) {
  LOFT_CHECK(vocab > 0, "sample_token: empty vocabulary");
  if (opt.greedy() || opt.top_k == 1) return argmax(logits, vocab);
  // Order: higher logit first, lower id among equals.
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  int64_t kept = opt.top_k > 0 ? std::min(opt.top_k, vocab) : vocab;
  if (kept < vocab) std::nth_element(order.begin(), order.begin() + kept, order.end(), before);
  // Sort only what can matter: top-p's head (a first cut it usually stays in), else top-k's
  // tokens; plain temperature sampling walks the ids in order.
  int64_t sorted = opt.top_p < 1.0 ? std::min(kept, kFirstCut) : kept < vocab ? kept : 0;
  if (sorted > 0) std::partial_sort(order.begin(), order.begin() + sorted, order.begin() + kept, before);

  // softmax over the kept tokens, in double, max-subtracted.
  const double inv_t = 1.0 / opt.temperature, top = double(logits[argmax(logits, vocab)]);
  std::vector<double> p(static_cast<size_t>(kept));
  double total = 0;
  for (int64_t i = 0; i < kept; ++i) total += p[size_t(i)] = std::exp((logits[order[size_t(i)]] - top) * inv_t);
  if (opt.top_p < 1.0) {
    // Keep token i while the mass before it is below top_p.
    double before_mass = 0;
    int64_t n = 0;
    while (n < kept && before_mass < opt.top_p * total) {
      if (n == sorted) {  // past the sorted head: sort the rest (the head's order stays)
        std::sort(order.begin() + sorted, order.begin() + kept, before);
        for (int64_t i = sorted; i < kept; ++i)
          p[size_t(i)] = std::exp((logits[order[size_t(i)]] - top) * inv_t);
        sorted = kept;
      }
      before_mass += p[size_t(n++)];
    }
    kept = n;
    total = before_mass;
  }
  const double target = u * total;
  double cum = 0;
  for (int64_t i = 0; i < kept; ++i)
    if ((cum += p[size_t(i)]) > target) return order[size_t(i)];
  return order[size_t(kept - 1)];
}

}  // namespace loft::llama
