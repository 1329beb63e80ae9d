// FP8 tensors: the scalar decodes against an independent bit-level construction of every code,
// and F8 tensors surviving a safetensors round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

// Builds the fp32 bit pattern of a normal FP8 value directly (exponent rebias + mantissa shift).
float normal_from_bits(uint32_t sign, uint32_t exp, uint32_t man, int bias, int man_bits) {
  const uint32_t u =
      (sign << 31) | (uint32_t(int(exp) - bias + 127) << 23) | (man << (23 - man_bits));
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Fp8Decode, E4M3EveryCode) {
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
    const float got = fp8_e4m3_to_f32(uint8_t(b));
    if (exp == 15 && man == 7) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else if (exp == 0) {
      EXPECT_EQ(got, (sign ? -1.0f : 1.0f) * float(man) / 512.0f) << b;
    } else {
      EXPECT_EQ(got, normal_from_bits(sign, exp, man, 7, 3)) << b;
    }
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8Decode, E5M2EveryCode) {
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t sign = b >> 7, exp = (b >> 2) & 31, man = b & 3;
    const float got = fp8_e5m2_to_f32(uint8_t(b));
    if (exp == 31) {
      if (man)
        EXPECT_TRUE(std::isnan(got)) << b;
      else
        EXPECT_EQ(got, sign ? -INFINITY : INFINITY) << b;
    } else if (exp == 0) {
      EXPECT_EQ(got, (sign ? -1.0f : 1.0f) * float(man) / 65536.0f) << b;
    } else {
      EXPECT_EQ(got, normal_from_bits(sign, exp, man, 15, 2)) << b;
    }
  }
  EXPECT_EQ(fp8_e5m2_to_f32(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
}

TEST(Fp8Decode, F8TensorsRoundTripThroughSafetensors) {
  test::TempDir dir;
  std::vector<uint8_t> codes(173);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i * 37 + 11);
  write_safetensors(dir / "f8.safetensors",
                    {{"w", Tensor::from_host(codes.data(), {173}, DType::F8_E4M3)},
                     {"g", Tensor::from_host(codes.data(), {1, 173}, DType::F8_E5M2)}});
  const auto r = SafetensorsReader::open(dir / "f8.safetensors");
  EXPECT_EQ(r.info("w").dtype, DType::F8_E4M3);
  EXPECT_EQ(r.info("g").dtype, DType::F8_E5M2);
  EXPECT_EQ(r.info("g").shape, (Shape{1, 173}));
  const Tensor w = r.tensor("w");
  EXPECT_EQ(std::memcmp(w.data(), codes.data(), codes.size()), 0);
  EXPECT_EQ(fp8_e4m3_to_f32(w.ptr<uint8_t>()[1]), fp8_e4m3_to_f32(uint8_t(48)));
}

}  // namespace
}  // namespace loft
