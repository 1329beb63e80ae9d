// fill_random on the CPU: moments and range of the uniform distribution, the exact value lattice,
// determinism per (seed, index), independence across seeds and neighbours, and argument checks.
#include <cmath>

#include "engine/ops/counter_rng.h"
#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

std::vector<float> filled(int64_t n, uint64_t seed, float std) {
  Tensor t = Tensor::empty({n}, DType::F32);
  ops::fill_random(t, seed, std);
  return t.to_float_vector();
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / double(v.size());
}

double correlation(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i],
                                         bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

TEST(FillRandomCpu, MeanVarianceAndRangeOfUniform) {
  const int64_t n = 1 << 20;
  for (float std : {0.02f, 1.0f, 3.5f}) {
    const std::vector<float> v = filled(n, 7, std);
    const double bound = std::sqrt(3.0) * std;
    double var = 0;
    for (float x : v) {
      ASSERT_GE(x, -bound);
      ASSERT_LT(x, bound);
      var += double(x) * x;
    }
    var /= double(n);
    // Standard errors: std/√n for the mean, √0.8·std²/√n for the variance (uniform kurtosis 1.8).
    EXPECT_NEAR(mean_of(v), 0.0, 5 * std / std::sqrt(double(n))) << "std " << std;
    EXPECT_NEAR(var / (double(std) * std), 1.0, 5 * std::sqrt(0.8 / double(n))) << "std " << std;
  }
}

TEST(FillRandomCpu, TenEqualBinsAreEquallyFilled) {
  const int64_t n = 1 << 20;
  const std::vector<float> v = filled(n, 11, 1.0f);
  const double bound = std::sqrt(3.0);
  std::vector<int64_t> bins(10);
  for (float x : v) ++bins[size_t(std::min(9.0, (x + bound) / (2 * bound) * 10))];
  const double want = double(n) / 10, sd = std::sqrt(want * 0.9);
  for (size_t b = 0; b < bins.size(); ++b) EXPECT_NEAR(double(bins[b]), want, 5 * sd) << "bin " << b;
}

// Each value is (2k + 1)·scale for an integer k in [−2^23, 2^23), rounded once to fp32: the
// product in double is exact (24-bit by 24-bit), so rounding it to float must give the value.
TEST(FillRandomCpu, ValuesAreRoundedOddMultiplesOfTheCellHalfWidth) {
  const float std = 0.02f;
  const double scale = ops::counter_rng::uniform_scale(std);
  for (float x : filled(4099, 3, std)) {
    const double odd = 2 * std::round((double(x) / scale - 1) / 2) + 1;
    ASSERT_LT(std::abs(odd), double(1 << 24));
    ASSERT_EQ(float(odd * scale), x);
  }
}

TEST(FillRandomCpu, DeterministicPerSeedAndIndex) {
  EXPECT_EQ(filled(172, 5, 0.02f), filled(172, 5, 0.02f));
  EXPECT_NE(filled(172, 5, 0.02f), filled(172, 6, 0.02f));
  // Element i depends on i alone: a longer fill starts with the shorter one, and a row view is
  // filled as a fresh tensor of its size would be.
  const std::vector<float> longer = filled(4099, 5, 0.02f);
  const std::vector<float> shorter = filled(172, 5, 0.02f);
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), longer.begin()));
  Tensor m = Tensor::zeros({3, 57}, DType::F32);
  Tensor row = m.slice(1, 1);
  ops::fill_random(row, 5, 0.02f);
  const std::vector<float> all = m.to_float_vector();
  const std::vector<float> fresh = filled(57, 5, 0.02f);
  EXPECT_TRUE(std::equal(fresh.begin(), fresh.end(), all.begin() + 57));
  for (int64_t i : {int64_t(0), int64_t(56), int64_t(114), int64_t(170)})
    EXPECT_EQ(all[size_t(i)], 0.0f) << "outside the view, index " << i;
}

TEST(FillRandomCpu, SeedsAndNeighboursAreUncorrelated) {
  const int64_t n = 1 << 18;
  const double lim = 5 / std::sqrt(double(n));
  const std::vector<float> a = filled(n, 0, 1.0f), b = filled(n, 1, 1.0f);
  EXPECT_LT(std::abs(correlation(a, b)), lim);
  const std::vector<float> head(a.begin(), a.end() - 1), tail(a.begin() + 1, a.end());
  EXPECT_LT(std::abs(correlation(head, tail)), lim);
}

TEST(FillRandomCpu, ZeroStdGivesZeros) {
  for (float x : filled(100, 9, 0.0f)) EXPECT_EQ(x, 0.0f);
}

TEST(FillRandomCpu, RejectsBadArguments) {
  Tensor f = Tensor::empty({4}, DType::F32);
  EXPECT_THROW(ops::fill_random(f, 0, -1.0f), Error);
  EXPECT_THROW(ops::fill_random(f, 0, std::nanf("")), Error);
  EXPECT_THROW(ops::fill_random(f, 0, INFINITY), Error);
  Tensor ids = Tensor::empty({4}, DType::I32);
  try {
    ops::fill_random(ids, 0, 1.0f);
    FAIL() << "I32 accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "fill_random: x has dtype I32"));
  }
  Tensor h = Tensor::empty({4}, DType::BF16);
  EXPECT_THROW(ops::fill_random(h, 0, 1.0f), Error);  // the CPU backend computes in F32 only
}

}  // namespace
}  // namespace loft::test
