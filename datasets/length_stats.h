// Token-length statistics over a stream of examples (`loft data inspect`). Lengths are kept as a
// histogram (length -> count), so memory grows with the number of distinct lengths, never with
// the number of examples, and percentiles are still exact.
#pragma once
#include <cstdint>
#include <map>

namespace loft::data {

class LengthStats {
 public:
  void add(int64_t length);

  int64_t count() const { return count_; }
  int64_t total() const { return total_; }
  // min/max/mean/percentile of an empty set are 0.
  int64_t min() const { return hist_.empty() ? 0 : hist_.begin()->first; }
  int64_t max() const { return hist_.empty() ? 0 : hist_.rbegin()->first; }
  double mean() const { return count_ ? double(total_) / double(count_) : 0.0; }
  // Nearest-rank percentile, p in (0, 100]: the smallest length L such that at least p% of the
  // lengths are <= L (p50 of {1, 2, 3, 4} is 2, p100 is the max).
  int64_t percentile(double p) const;
  // How many lengths are > limit (examples that --seq would truncate).
  int64_t count_above(int64_t limit) const;
  // length -> how many examples have it.
  const std::map<int64_t, int64_t>& histogram() const { return hist_; }

 private:
  std::map<int64_t, int64_t> hist_;
  int64_t count_ = 0, total_ = 0;
};

}  // namespace loft::data
