#include "datasets/length_stats.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace loft::data {

void LengthStats::add(int64_t length) {
  LOFT_CHECK(length >= 0, "length statistics: negative length ", length);
  ++hist_[length];
  ++count_;
  total_ += length;
}

int64_t LengthStats::percentile(double p) const {
  LOFT_CHECK(p > 0 && p <= 100, "length statistics: percentile ", p, " is outside (0, 100]");
  if (count_ == 0) return 0;
  // Rank computed in integers where possible so p50 of 4 values is exactly rank 2.
  const auto rank = std::max<int64_t>(1, int64_t(std::ceil(p / 100.0 * double(count_) - 1e-9)));
  int64_t seen = 0;
  for (const auto& [length, n] : hist_) {
    seen += n;
    if (seen >= rank) return length;
  }
  return max();
}

int64_t LengthStats::count_above(int64_t limit) const {
  int64_t n = 0;
  for (auto it = hist_.upper_bound(limit); it != hist_.end(); ++it) n += it->second;
  return n;
}

}  // namespace loft::data
