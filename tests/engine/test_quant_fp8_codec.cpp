// The fp32 -> FP8 encoders: hand-computed codes (max, saturation, subnormals, ties to even), every
// code round-tripping, and a sweep over fp32 against the brute-force nearest code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/quant/fp8.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::f32_to_fp8_e4m3;
using quant::f32_to_fp8_e5m2;
using quant::LowpFormat;

TEST(QuantFp8Codec, E4M3HandComputed) {
  EXPECT_EQ(f32_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(f32_to_fp8_e4m3(-2.0f), 0xc0);
  EXPECT_EQ(f32_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-448.0f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(1e6f), 0x7e);  // saturates, never NaN
  EXPECT_EQ(f32_to_fp8_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7e);  // the tie beyond 448
  EXPECT_EQ(f32_to_fp8_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(7.0f, -9)), 0x07);  // largest subnormal
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  // Ties to even: 2^-10 between 0 and 2^-9 -> 0; 3·2^-10 between codes 1 and 2 -> 2;
  // 7.5·2^-9 between the largest subnormal and the smallest normal -> 0x08.
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(15.0f, -10)), 0x08);
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);  // between 1 and 1.125 -> mantissa 0
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);  // between 1.125 and 1.25 -> mantissa 2
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625001f), 0x39);  // just above a tie rounds up
  EXPECT_EQ(f32_to_fp8_e4m3(15.5f), 0x58);  // 15 (0x57) | 16: tie -> 16, exponent carry
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -40)), 0x00);  // underflow to zero
}

TEST(QuantFp8Codec, E5M2HandComputed) {
  EXPECT_EQ(f32_to_fp8_e5m2(1.0f), 0x3c);
  EXPECT_EQ(f32_to_fp8_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(f32_to_fp8_e5m2(-57344.0f), 0xfb);
  EXPECT_EQ(f32_to_fp8_e5m2(61440.0f), 0x7b);  // the tie beyond the max saturates
  EXPECT_EQ(f32_to_fp8_e5m2(1e6f), 0x7b);
  EXPECT_EQ(f32_to_fp8_e5m2(INFINITY), 0x7b);
  EXPECT_EQ(f32_to_fp8_e5m2(-INFINITY), 0xfb);
  EXPECT_EQ(f32_to_fp8_e5m2(NAN), 0x7f);
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(1.0f, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(1.0f, -17)), 0x00);  // tie -> 0
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(3.0f, -17)), 0x02);  // tie -> even code 2
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(1.0f, -14)), 0x04);  // smallest normal
  EXPECT_EQ(f32_to_fp8_e5m2(1.125f), 0x3c);                 // between 1 and 1.25 -> 1
  EXPECT_EQ(f32_to_fp8_e5m2(1.375f), 0x3e);                 // between 1.25 and 1.5 -> 1.5
}

void expect_round_trip(LowpFormat f, uint8_t (*enc)(float)) {
  for (int c = 0; c < 256; ++c) {
    const float v = test::decode_code(f, uint8_t(c));
    if (!std::isfinite(v)) continue;
    EXPECT_EQ(enc(v), c) << "code " << c << " value " << v;
  }
}

TEST(QuantFp8Codec, EveryFiniteCodeRoundTrips) {
  expect_round_trip(LowpFormat::E4M3, f32_to_fp8_e4m3);
  expect_round_trip(LowpFormat::E5M2, f32_to_fp8_e5m2);
}

// Every code midpoint (the rounding boundaries) and its fp32 neighbours, plus a stride through all
// fp32 bit patterns, against the brute-force nearest code.
void expect_matches_reference(LowpFormat f, uint8_t (*enc)(float)) {
  std::vector<float> xs;
  for (int c = 0; c < 127; ++c) {
    const float lo = test::decode_code(f, uint8_t(c)), hi = test::decode_code(f, uint8_t(c + 1));
    if (!std::isfinite(hi)) break;
    const float mid = float((double(lo) + double(hi)) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
      xs.insert(xs.end(), {x, -x});
  }
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521) {
    float x;
    const uint32_t b = uint32_t(u);
    std::memcpy(&x, &b, 4);
    xs.push_back(x);
  }
  int bad = 0;
  for (float x : xs) {
    const uint8_t want = test::nearest_code(f, x), got = enc(x);
    if (got != want && ++bad <= 5) ADD_FAILURE() << "x=" << x << " got " << int(got) << " want " << int(want);
  }
  EXPECT_EQ(bad, 0) << "of " << xs.size();
}

TEST(QuantFp8Codec, E4M3MatchesNearestCode) { expect_matches_reference(LowpFormat::E4M3, f32_to_fp8_e4m3); }
TEST(QuantFp8Codec, E5M2MatchesNearestCode) { expect_matches_reference(LowpFormat::E5M2, f32_to_fp8_e5m2); }

}  // namespace
}  // namespace loft
