#include "tests/common/close_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace loft::test {

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    n += double(b[i]) * double(b[i]);
  }
  return a.size() != b.size() ? INFINITY : d == 0 ? 0.0 : std::sqrt(d / std::max(n, 1e-300));
}

void expect_close_runs(const std::vector<double>& got_losses,
                       const std::vector<std::vector<float>>& got_params,
                       const std::vector<double>& want_losses,
                       const std::vector<std::vector<float>>& want_params, const std::string& what) {
  ASSERT_EQ(got_losses.size(), want_losses.size()) << what;
  for (size_t s = 0; s < want_losses.size(); ++s)
    EXPECT_NEAR(got_losses[s], want_losses[s], 1e-5 * std::abs(want_losses[s])) << what << ", step " << s + 1;
  ASSERT_EQ(got_params.size(), want_params.size()) << what;
  for (size_t p = 0; p < want_params.size(); ++p) {
    ASSERT_EQ(got_params[p].size(), want_params[p].size()) << what << ", param " << p;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want_params[p].size(); ++i) {
      const double d = double(got_params[p][i]) - double(want_params[p][i]);
      diff += d * d;
      norm += double(want_params[p][i]) * double(want_params[p][i]);
    }
    ASSERT_LE(std::sqrt(diff), 1e-2 * std::sqrt(norm)) << what << ", param " << p;
  }
}

}  // namespace loft::test
