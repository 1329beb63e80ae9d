// The fp32 -> INT8 encoder: ties to even, saturation at ±127, NaN, and a sweep against the
// brute-force nearest code.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/quant/int8.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::f32_to_int8;

TEST(QuantInt8Codec, HandComputed) {
  EXPECT_EQ(f32_to_int8(0.0f), 0);
  EXPECT_EQ(f32_to_int8(0.5f), 0);  // ties to even
  EXPECT_EQ(f32_to_int8(1.5f), 2);
  EXPECT_EQ(f32_to_int8(2.5f), 2);
  EXPECT_EQ(f32_to_int8(-2.5f), -2);
  EXPECT_EQ(f32_to_int8(-0.5f), 0);
  EXPECT_EQ(f32_to_int8(126.5f), 126);
  EXPECT_EQ(f32_to_int8(2.4999998f), 2);
  EXPECT_EQ(f32_to_int8(127.49f), 127);
  EXPECT_EQ(f32_to_int8(127.5f), 127);  // saturates (would round to 128)
  EXPECT_EQ(f32_to_int8(200.0f), 127);
  EXPECT_EQ(f32_to_int8(-1e9f), -127);  // never -128
  EXPECT_EQ(f32_to_int8(INFINITY), 127);
  EXPECT_EQ(f32_to_int8(-INFINITY), -127);
  EXPECT_EQ(f32_to_int8(NAN), 0);
}

TEST(QuantInt8Codec, MatchesNearestCode) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-140.0f, 140.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = i < 600 ? (i - 300) * 0.5f : u(rng);  // every half-integer tie in range
    ASSERT_EQ(uint8_t(f32_to_int8(x)), test::nearest_code(quant::LowpFormat::INT8, x)) << x;
  }
}

}  // namespace
}  // namespace loft
