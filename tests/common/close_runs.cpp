#include "tests/common/close_runs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loft::test {

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
