// The NF4 level table, the signed dynamic map, and the nearest-level searches at their exact
// decision boundaries (midpoints go to the lower code; the next fp32 above goes up).
#include <algorithm>
#include <cmath>

#include "engine/quant/nf4.h"
#include "tests/engine/test_quant_nf4_util.h"

namespace loft::test {
namespace {

TEST(Nf4Tables, LevelsAscendFromMinusOneToOne) {
  EXPECT_EQ(kNf4Levels.front(), -1.0f);
  EXPECT_EQ(kNf4Levels[kNf4ZeroCode], 0.0f);
  EXPECT_EQ(kNf4Levels.back(), 1.0f);
  for (size_t k = 0; k + 1 < kNf4Levels.size(); ++k) EXPECT_LT(kNf4Levels[k], kNf4Levels[k + 1]);
}

TEST(Nf4Tables, DynamicMapHas256SortedEntriesWithZeroAndOneButNotMinusOne) {
  const auto& map = dynamic_map();
  ASSERT_EQ(map.size(), 256u);
  for (size_t k = 0; k + 1 < map.size(); ++k) EXPECT_LT(map[k], map[k + 1]) << "entry " << k;
  EXPECT_EQ(map[127], 0.0f);  // 127 negatives below it
  EXPECT_EQ(map[255], 1.0f);
  EXPECT_EQ(std::count(map.begin(), map.end(), -1.0f), 0);
  // Symmetric apart from 0 and +1: entry 127-j is minus entry 127+j for j = 1..127.
  for (int j = 1; j <= 127; ++j) EXPECT_EQ(map[127 - j], -map[127 + j]) << "j " << j;
  // Ends of the construction: decade 10^-6 has one midpoint (0.1+1)/2; decade 1 has 64, the
  // largest 1 - 0.9/128.
  EXPECT_EQ(map[128], float(0.55e-6));
  EXPECT_EQ(map[254], 0.99296875f);
  EXPECT_EQ(map[0], -0.99296875f);
  // Decade i holds 2^i positive entries in [10^(i-6)·0.1, 10^(i-6)].
  for (int i = 0; i <= 6; ++i) {
    const double lo = std::pow(10.0, i - 6) * 0.1, hi = std::pow(10.0, i - 6);
    const auto n = std::count_if(map.begin() + 128, map.begin() + 255,
                                 [&](float v) { return v > lo && v < hi; });
    EXPECT_EQ(n, 1 << i) << "decade " << i;
  }
}

// Checks `code_of` at every boundary of `table`: the exact midpoint (when fp32 holds it) or the
// fp32 just below it takes the lower code, the next fp32 up takes the upper one, and each entry
// maps to itself.
template <size_t N, typename F>
void check_boundaries(const std::array<float, N>& table, F code_of) {
  int exact = 0;
  for (size_t k = 0; k + 1 < N; ++k) {
    const double mid = (double(table[k]) + double(table[k + 1])) / 2.0;
    float below = float(mid);
    if (double(below) > mid) below = std::nextafter(below, -INFINITY);
    exact += double(below) == mid;
    const float above = std::nextafter(below, INFINITY);
    EXPECT_EQ(code_of(below), k) << "boundary " << k << " at " << below;
    EXPECT_EQ(code_of(above), k + 1) << "boundary " << k << " at " << above;
    EXPECT_EQ(code_of(table[k]), k);
  }
  EXPECT_EQ(code_of(table[N - 1]), N - 1);
  EXPECT_GT(exact, 0) << "no boundary is an exact fp32 midpoint: the tie rule went untested";
}

TEST(Nf4Tables, Nf4CodeTiesGoToTheLowerCode) {
  check_boundaries(kNf4Levels, [](float v) { return size_t(nf4_code(v)); });
  EXPECT_EQ(nf4_code(-1.0f), 0);
  EXPECT_EQ(nf4_code(1.0f), 15);
  EXPECT_EQ(nf4_code(0.0f), kNf4ZeroCode);
  EXPECT_EQ(nf4_code(-0.0f), kNf4ZeroCode);
}

TEST(Nf4Tables, DynamicMapCodeTiesGoToTheLowerCode) {
  check_boundaries(dynamic_map(), [](float v) { return size_t(dynamic_map_code(v)); });
  EXPECT_EQ(dynamic_map_code(-1.0f), 0);  // no -1 entry: the nearest is the smallest
  EXPECT_EQ(dynamic_map_code(0.0f), 127);
}

// The same boundaries reached through quantize_nf4: block [1, v] has absmax 1, so v is the
// normalized value itself, coded in the low nibble of byte 0.
TEST(Nf4Tables, QuantizeCodesMidpointsToTheLowerLevel) {
  for (size_t k = 0; k + 1 < kNf4Levels.size(); ++k) {
    const double mid = (double(kNf4Levels[k]) + double(kNf4Levels[k + 1])) / 2.0;
    float below = float(mid);
    if (double(below) > mid) below = std::nextafter(below, -INFINITY);
    for (auto [v, want] : {std::pair{below, k}, std::pair{std::nextafter(below, INFINITY), k + 1}}) {
      const Nf4Tensor q = quantize_nf4(Tensor::from_vector(std::vector<float>{1.0f, v}, {2}));
      EXPECT_EQ(host_values<uint8_t>(q.codes)[0], uint8_t(0xF0 | want)) << "v " << v;
    }
  }
}

}  // namespace
}  // namespace loft::test
