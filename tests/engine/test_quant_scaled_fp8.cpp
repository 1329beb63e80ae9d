// Block-scaled FP8 weights (engine/quant/scaled_fp8.h) and how a WeightSource hands them to the
// methods (engine/peft/weight_source.h): a hand-computed partial-block case, the shared scale that
// makes codes usable as they are, the checks, and FP8 values reaching FALQON in fp32 even when the
// model computes in bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/methods/falqon/falqon_linear.h"
#include "engine/peft/weight_source.h"
#include "engine/quant/fp8.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using quant::ScaledFp8;

ScaledFp8 make(const std::vector<uint8_t>& codes, Shape shape, std::vector<float> scales,
               int64_t rows, int64_t cols) {
  const Shape grid = quant::scale_grid(shape[0], shape[1], rows, cols);
  return {Tensor::from_host(codes.data(), std::move(shape), DType::F8_E4M3),
          Tensor::from_vector(scales, grid), rows, cols};
}

TEST(ScaledFp8, PartialBlocksByHand) {
  // [3, 5] in 2 x 2 blocks: a [2, 3] grid, the last block row one row high, the last column one
  // column wide. Codes: 0x38 = 1, 0x40 = 2, 0xb8 = -1, 0x3c = 1.5, 0x80 = -0.
  const ScaledFp8 w = make({0x38, 0x40, 0xb8, 0x3c, 0x38,  //
                            0x40, 0x38, 0x3c, 0x80, 0xb8,  //
                            0x3c, 0xb8, 0x38, 0x40, 0x40},
                           {3, 5}, {0.5f, 0.25f, 8.0f, 3.0f, 0.125f, 1e-3f}, 2, 2);
  EXPECT_EQ(w.scales.shape(), (Shape{2, 3}));
  const std::vector<float> want{0.5f, 1.0f, -0.25f, 0.375f, 8.0f,   //
                                1.0f, 0.5f, 0.375f, -0.0f, -8.0f,   //
                                4.5f, -3.0f, 0.125f, 0.25f, 2e-3f};
  Tensor f32 = Tensor::empty({3, 5}, DType::F32);
  quant::dequantize(w, f32);
  EXPECT_EQ(f32.to_float_vector(), want);
  EXPECT_TRUE(std::signbit(f32.ptr<float>()[8])) << "-0 stays -0";
  Tensor bf16 = Tensor::empty({3, 5}, DType::BF16);
  quant::dequantize(w, bf16);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(bf16.ptr<uint16_t>()[i], f32_to_bf16(want[i]));
  EXPECT_FALSE(quant::common_scale(w).has_value());
}

TEST(ScaledFp8, CommonScale) {
  const std::vector<uint8_t> codes(12, 0x38);
  EXPECT_EQ(quant::common_scale(make(codes, {3, 4}, {0.5f}, 3, 4)), 0.5f) << "per tensor";
  EXPECT_EQ(quant::common_scale(make(codes, {3, 4}, {0.5f, 0.5f, 0.5f}, 1, 4)), 0.5f)
      << "per channel, all equal";
  EXPECT_FALSE(quant::common_scale(make(codes, {3, 4}, {0.5f, 0.5f, 0.25f}, 1, 4)).has_value());
  EXPECT_FALSE(quant::common_scale(make(codes, {3, 4}, {0.0f}, 3, 4)).has_value()) << "zero scale";
}

TEST(ScaledFp8, ChecksNameWhatIsWrong) {
  const std::vector<uint8_t> codes(12, 0x38);
  ScaledFp8 w = make(codes, {3, 4}, {1.0f, 1.0f}, 2, 4);
  EXPECT_NO_THROW(quant::check_scaled_fp8(w, "w"));
  w.scales = Tensor::from_vector(std::vector<float>{1.0f, 1.0f}, {1, 2});
  EXPECT_THROW(quant::check_scaled_fp8(w, "w"), Error);
  for (const float bad : {NAN, INFINITY, -1.0f}) {
    w.scales = Tensor::from_vector(std::vector<float>{1.0f, bad}, {2, 1});
    try {
      quant::check_scaled_fp8(w, "proj");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(test::contains(e.what(), "proj: FP8 scale 1 is"));
    }
  }
}

// A per-channel weight with f32 scales whose products need more than bf16's 8 bits.
ScaledFp8 per_channel(int64_t out, int64_t in, std::mt19937& g) {
  std::vector<uint8_t> codes(size_t(out * in));
  for (uint8_t& c : codes) c = uint8_t(g() % 0x7e) | uint8_t(g() % 2 ? 0x80 : 0);
  std::vector<float> s(static_cast<size_t>(out), 0.0f);
  std::uniform_real_distribution<float> d(1e-3f, 2e-3f);
  for (float& v : s) v = d(g);
  return make(codes, {out, in}, s, 1, in);
}

TEST(WeightSource, DenseValuesAndCodes) {
  std::mt19937 g(1);
  const ScaledFp8 w = per_channel(6, 10, g);
  Tensor exact = Tensor::empty({6, 10}, DType::F32);
  quant::dequantize(w, exact);
  const WeightSource src(w, DType::BF16, Device::cpu());
  EXPECT_TRUE(src.is_fp8());
  EXPECT_EQ(src.out_features(), 6);
  EXPECT_EQ(src.in_features(), 10);
  const Tensor dense = src.dense(), values = src.values();
  ASSERT_EQ(dense.dtype(), DType::BF16);
  ASSERT_EQ(values.dtype(), DType::F32);
  EXPECT_EQ(values.to_float_vector(), exact.to_float_vector());
  for (int64_t i = 0; i < 60; ++i)
    EXPECT_EQ(dense.ptr<uint16_t>()[i], f32_to_bf16(exact.ptr<float>()[i]));
  EXPECT_FALSE(src.e4m3_codes().has_value()) << "six different channel scales";

  const ScaledFp8 one = make(std::vector<uint8_t>(w.codes.ptr<uint8_t>(), w.codes.ptr<uint8_t>() + 60),
                             {6, 10}, {0.375f}, 6, 10);
  const auto q = WeightSource(one, DType::F32, Device::cpu()).e4m3_codes();
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(std::memcmp(q->codes.data(), w.codes.data(), 60), 0);
  EXPECT_EQ(q->scale.to_float_vector(), std::vector<float>{0.375f});
  EXPECT_FALSE(q->codes_t.defined()) << "no transposed copy: the dX GEMM transposes into scratch";

  const WeightSource plain(exact);
  EXPECT_FALSE(plain.is_fp8());
  EXPECT_FALSE(plain.e4m3_codes().has_value());
  EXPECT_EQ(plain.values().data(), exact.data()) << "a dense weight is handed on as loaded";
}

TEST(WeightSource, FalqonRequantizesFromFp32NotFromTheBf16Weight) {
  // The model computes in bf16; FALQON's per-tensor codes must still come from the exact values.
  std::mt19937 g(2);
  const ScaledFp8 w = per_channel(48, 40, g);
  const WeightSource src(w, DType::BF16, Device::cpu());
  const FalqonLinear l("m", src, 4, {});
  const auto from_f32 = quant::quantize(src.values(), quant::LowpFormat::E4M3);
  const auto from_bf16 = quant::quantize(src.dense(), quant::LowpFormat::E4M3);
  const Tensor melded = l.melded_codes();
  EXPECT_EQ(std::memcmp(melded.data(), from_f32.codes.data(), 48 * 40), 0);
  EXPECT_NE(std::memcmp(from_bf16.codes.data(), from_f32.codes.data(), 48 * 40), 0)
      << "the bf16 detour would round some codes differently (else this test proves nothing)";
  EXPECT_EQ(l.weight_scale(), from_f32.scale.to_float_vector()[0]);
}

}  // namespace
}  // namespace loft
