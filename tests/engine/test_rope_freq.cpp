// rope_inv_freq: default frequencies against the formula, llama3 scaling against values worked
// out by hand from transformers' _compute_llama3_parameters, linear scaling, unknown type.
#include <cmath>

#include "engine/ops/rope_freq.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(RopeFreq, DefaultMatchesFormula) {
  for (auto [dim, theta] : {std::pair{128, 500000.0}, {64, 10000.0}, {6, 10000.0}, {2, 1e6}}) {
    const auto f = rope_inv_freq(dim, theta, {});
    ASSERT_EQ(f.size(), size_t(dim / 2));
    EXPECT_EQ(f[0], 1.0f);
    for (int i = 0; i < dim / 2; ++i)
      EXPECT_NEAR(f[size_t(i)], std::pow(theta, -2.0 * i / dim), 2e-7 * std::pow(theta, -2.0 * i / dim))
          << "dim " << dim << " i " << i;
  }
  // theta 10000, dim 4: (1, 10000^-1/2 = 0.01).
  const auto f = rope_inv_freq(4, 10000.0, {});
  EXPECT_FLOAT_EQ(f[1], 0.01f);
}

// Llama 3.1 settings: factor 8, low 1, high 4, original 8192, head_dim 128, theta 500000. Then
// low_wavelen = 8192, high_wavelen = 2048 and wavelen_i = 2π·500000^(i/64):
//   i = 28: wavelen ≈ 1956.5 < 2048       → high frequency, unchanged;
//   i = 35: wavelen ≈ 8218.7 > 8192       → low frequency, divided by 8;
//   i = 30: wavelen ≈ 2948.3, medium: smooth = (8192/2948.3 − 1)/3 ≈ 0.592849,
//           inv = (1 − smooth)·f/8 + smooth·f with f ≈ 0.0021311196 → ≈ 0.00137189368.
TEST(RopeFreq, Llama3ScalingByHand) {
  const RopeScaling s{.type = "llama3", .factor = 8.0, .low_freq_factor = 1.0,
                      .high_freq_factor = 4.0, .original_max_position_embeddings = 8192};
  const auto base = rope_inv_freq(128, 500000.0, {});
  const auto f = rope_inv_freq(128, 500000.0, s);
  ASSERT_EQ(f.size(), 64u);
  for (int i = 0; i <= 28; ++i) EXPECT_EQ(f[size_t(i)], base[size_t(i)]) << i;
  for (int i = 35; i < 64; ++i) EXPECT_FLOAT_EQ(f[size_t(i)], base[size_t(i)] / 8.0f) << i;
  EXPECT_NEAR(base[30], 0.0021311196, 1e-6 * 0.0021311196);
  EXPECT_NEAR(f[30], 0.00137189368, 1e-5 * 0.00137189368);
  EXPECT_NEAR(f[29], 0.00216657063, 1e-5 * 0.00216657063);  // smooth ≈ 0.803621
  EXPECT_NEAR(f[34], 0.00017850782, 1e-5 * 0.00017850782);  // smooth ≈ 0.074527
  for (int i = 29; i <= 34; ++i) {  // smoothing lies strictly between the two regimes
    EXPECT_LT(f[size_t(i)], base[size_t(i)]) << i;
    EXPECT_GT(f[size_t(i)], base[size_t(i)] / 8.0f) << i;
  }
}

TEST(RopeFreq, LinearDividesEveryFrequency) {
  const auto base = rope_inv_freq(64, 10000.0, {});
  const auto f = rope_inv_freq(64, 10000.0, {.type = "linear", .factor = 4.0});
  for (size_t i = 0; i < f.size(); ++i) EXPECT_FLOAT_EQ(f[i], base[i] / 4.0f) << i;
}

TEST(RopeFreq, RejectsUnknownTypeAndOddDim) {
  try {
    rope_inv_freq(64, 10000.0, {.type = "yarn"});
    ADD_FAILURE() << "no error for rope_scaling type yarn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'yarn'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rope_inv_freq(7, 10000.0, {}), Error);
}

}  // namespace
}  // namespace loft
