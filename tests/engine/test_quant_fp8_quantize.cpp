// The per-tensor quantizer on the CPU (all three formats): scale = amax/qmax, every code the
// nearest code of x/s (brute force), the transposed copy, BF16 input, zero and NaN handling,
// dequantize, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/ops/ops.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::LowpFormat;

class QuantFp8Quantize : public ::testing::TestWithParam<LowpFormat> {};

TEST_P(QuantFp8Quantize, CodesAreNearestCodesOfXOverScale) {
  const LowpFormat f = GetParam();
  std::mt19937 rng(11);
  for (const Shape& shape : {Shape{1}, Shape{7}, Shape{172}, Shape{33, 172}, Shape{2, 3, 5}}) {
    Tensor x = test::random_tensor(shape, rng, -3.0f, 3.0f);
    x.ptr<float>()[0] = 1e-7f;  // a subnormal-range value for the formats
    const auto q = quant::quantize(x, f);
    ASSERT_EQ(q.codes.dtype(), quant::code_dtype(f));
    ASSERT_EQ(q.codes.shape(), shape);
    const std::vector<float> xv = x.to_float_vector();
    float amax = 0.0f;
    for (float v : xv) amax = std::max(amax, std::fabs(v));
    const float s = amax / quant::qmax(f);
    ASSERT_EQ(*q.scale.ptr<float>(), s) << shape_str(shape);
    const auto codes = test::code_bytes(q.codes);
    int bad = 0;
    for (size_t i = 0; i < xv.size(); ++i)
      if (codes[i] != test::nearest_code(f, xv[i] / s) && ++bad < 4)
        ADD_FAILURE() << shape_str(shape) << " element " << i << " x=" << xv[i];
    // The largest-magnitude element maps to ±qmax.
    size_t imax = 0;
    for (size_t i = 0; i < xv.size(); ++i)
      if (std::fabs(xv[i]) == amax) imax = i;
    EXPECT_EQ(std::fabs(test::decode_code(f, codes[imax])), quant::qmax(f));
  }
}

TEST_P(QuantFp8Quantize, TransposedCopyIsTheTranspose) {
  std::mt19937 rng(12);
  for (const Shape& shape : {Shape{1, 1}, Shape{7, 5}, Shape{172, 33}, Shape{64, 96}}) {
    const Tensor x = test::random_tensor(shape, rng);
    const auto q = quant::quantize(x, GetParam(), true);
    ASSERT_EQ(q.codes_t.shape(), Shape({shape[1], shape[0]}));
    const auto c = test::code_bytes(q.codes), t = test::code_bytes(q.codes_t);
    for (int64_t r = 0; r < shape[0]; ++r)
      for (int64_t k = 0; k < shape[1]; ++k)
        ASSERT_EQ(t[k * shape[0] + r], c[r * shape[1] + k]) << shape_str(shape) << " " << r << "," << k;
  }
}

TEST_P(QuantFp8Quantize, Bf16InputMatchesItsF32Values) {
  std::mt19937 rng(13);
  const Tensor x = test::random_tensor({37, 19}, rng, -50.0f, 50.0f);
  Tensor xb = Tensor::empty(x.shape(), DType::BF16);
  ops::convert(x, xb);
  Tensor xr = Tensor::from_vector(xb.to_float_vector(), x.shape());
  const auto qb = quant::quantize(xb, GetParam()), qr = quant::quantize(xr, GetParam());
  EXPECT_EQ(test::code_bytes(qb.codes), test::code_bytes(qr.codes));
  EXPECT_EQ(*qb.scale.ptr<float>(), *qr.scale.ptr<float>());
}

TEST_P(QuantFp8Quantize, ZeroTensorHasUnitScale) {
  const auto q = quant::quantize(Tensor::zeros({4, 9}, DType::F32), GetParam());
  EXPECT_EQ(*q.scale.ptr<float>(), 1.0f);
  for (uint8_t c : test::code_bytes(q.codes)) EXPECT_EQ(c, 0);
}

TEST_P(QuantFp8Quantize, NaNIsIgnoredByTheScale) {
  Tensor x = Tensor::from_vector(std::vector<float>{1.0f, NAN, -2.0f, 0.5f}, Shape{4});
  const auto q = quant::quantize(x, GetParam());
  EXPECT_EQ(*q.scale.ptr<float>(), 2.0f / quant::qmax(GetParam()));
  const auto c = test::code_bytes(q.codes);
  EXPECT_EQ(c[1], GetParam() == LowpFormat::INT8 ? 0 : 0x7f);
  EXPECT_EQ(test::decode_code(GetParam(), c[2]), -quant::qmax(GetParam()));
}

TEST_P(QuantFp8Quantize, DequantizeIsDecodeTimesScale) {
  std::mt19937 rng(14);
  const Tensor x = test::random_tensor({29, 31}, rng, -4.0f, 4.0f);
  const auto q = quant::quantize(x, GetParam());
  const Tensor d = quant::dequantize(q);
  const Tensor db = quant::dequantize(q, DType::BF16);
  const auto c = test::code_bytes(q.codes);
  const float s = *q.scale.ptr<float>();
  const std::vector<float> dv = d.to_float_vector(), dbv = db.to_float_vector();
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_EQ(dv[i], test::decode_code(GetParam(), c[i]) * s);
    ASSERT_EQ(dbv[i], bf16_to_f32(f32_to_bf16(dv[i])));
  }
  // Quantization error: 3 (E4M3), 2 (E5M2) mantissa bits, or 1/254 of the range (INT8).
  const double bound = GetParam() == LowpFormat::E4M3 ? 0.04 : GetParam() == LowpFormat::E5M2 ? 0.08 : 0.01;
  EXPECT_LT(test::rel_error(d, x), bound);
  EXPECT_GT(test::rel_error(d, x), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantFp8Quantize,
                         ::testing::Values(LowpFormat::E4M3, LowpFormat::E5M2, LowpFormat::INT8),
                         [](const auto& info) { return std::string(quant::format_name(info.param)); });

TEST(QuantFp8QuantizeErrors, BadInputsNameTheProblem) {
  try {
    quant::quantize(Tensor::zeros({4}, DType::I32), LowpFormat::E4M3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "input must be F32 or BF16"));
  }
  try {
    quant::quantize(Tensor::zeros({2, 3, 4}, DType::F32), LowpFormat::E4M3, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "transposed copy needs a 2-D input"));
  }
  Tensor out = Tensor::empty({3}, DType::F32);
  try {
    quant::dequantize(Tensor::zeros({3}, DType::F32), nullptr, out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "not a quantized code type"));
  }
}

}  // namespace
}  // namespace loft
