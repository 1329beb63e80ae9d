#include "models/llama/memory_fit.h"

#include <functional>

namespace loft::llama {

namespace {

// The estimate as a run within `budget` plans it: attention tensors restored from host memory
// only where the budget has room for them.
bool fits(const LlamaConfig& cfg, MemoryEstimateOptions opt, const MethodOptions& method, int64_t budget) {
  opt.device_budget = budget;
  const MethodMemory e = estimate_method_memory(cfg, opt, method);
  return e.total() <= budget && pinned_fits_host(e.host_pinned(), opt.host_bytes);
}

// The largest n in [0, hi] with fits(n) (fits(0) holds, fits is monotone: true then false).
int64_t largest(int64_t hi, const std::function<bool(int64_t)>& fits) {
  int64_t lo = 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace

int64_t longest_seq_that_fits(const LlamaConfig& cfg, MemoryEstimateOptions opt,
                              const MethodOptions& method, int64_t budget, int64_t max_seq,
                              int64_t step) {
  const int64_t units = largest(max_seq / step, [&](int64_t n) {
    opt.seq = n * step;
    return fits(cfg, opt, method, budget);
  });
  return units * step;
}

int64_t largest_batch_that_fits(const LlamaConfig& cfg, MemoryEstimateOptions opt,
                                const MethodOptions& method, int64_t budget, int64_t max_batch) {
  return largest(max_batch, [&](int64_t n) {
    opt.batch = n;
    return fits(cfg, opt, method, budget);
  });
}

}  // namespace loft::llama
