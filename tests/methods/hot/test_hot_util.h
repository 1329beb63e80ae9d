// Shared by HOT's CPU tests: the per-element mean and spread of a stochastic estimate over many
// draws, and the check that the mean is unbiased (its z-scores against a reference look like
// standard normal ones: RMS near 1, none far out).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace loft::test {

class Draws {
 public:
  explicit Draws(size_t n) : sum_(n, 0.0), sq_(n, 0.0) {}
  void add(const std::vector<float>& x) {
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += x[i], sq_[i] += double(x[i]) * x[i];
    ++count_;
  }
  // z-scores of the mean against `ref`: RMS < 1.3 and max |z| < 5.5 (elements that never vary are
  // held to equality).
  ::testing::AssertionResult unbiased_against(const std::vector<double>& ref) const {
    double rms = 0, worst = 0;
    size_t counted = 0;
    for (size_t i = 0; i < sum_.size(); ++i) {
      const double mean = sum_[i] / count_;
      const double var = std::max(0.0, sq_[i] / count_ - mean * mean);
      const double se = std::sqrt(var / count_);
      if (se < 1e-12 * (std::fabs(ref[i]) + 1e-30)) {
        if (std::fabs(mean - ref[i]) > 1e-6 * (std::fabs(ref[i]) + 1e-6))
          return ::testing::AssertionFailure() << "element " << i << " never varies but is off";
        continue;
      }
      const double z = (mean - ref[i]) / se;
      rms += z * z;
      worst = std::max(worst, std::fabs(z));
      ++counted;
    }
    rms = std::sqrt(rms / double(std::max<size_t>(counted, 1)));
    if (rms < 1.3 && worst < 5.5) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "z-scores of the mean: RMS " << rms << ", max " << worst
                                         << " over " << counted << " elements";
  }

 private:
  std::vector<double> sum_, sq_;
  int count_ = 0;
};

}  // namespace loft::test
