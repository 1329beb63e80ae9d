// NF4-DQ decoded straight into FP8/INT8 codes (HALO's NF4 backbone), CPU reference: the exact
// max |deq|, and codes (and transposed codes) equal to quantize(deq_nf4(q)) with that scale, or to
// the encoder applied to deq/scale for any other scale.
#include <gtest/gtest.h>

#include "engine/quant/nf4_lowp.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"
#include "tests/engine/test_quant_nf4_util.h"

namespace loft::test {
namespace {

using quant::LowpFormat;

const Shape kShapes[] = {{1, 1}, {3, 5}, {7, 13}, {64, 172}, {172, 64}, {300, 64}};

TEST(Nf4Lowp, MaxAbsIsTheDecodedMaximum) {
  uint32_t seed = 1;
  for (const Shape& shape : kShapes) {
    const Nf4Tensor q = quantize_nf4(nf4_test_weight(shape, seed++));
    float want = 0.0f;
    for (float v : dequantize_nf4(q).to_float_vector()) want = std::max(want, std::abs(v));
    EXPECT_EQ(quant::nf4_max_abs(q), want) << shape_str(shape);
  }
  // An all-zero weight decodes to zeros: amax 0, scale 1 (quantize's guard).
  const Nf4Tensor z = quantize_nf4(Tensor::zeros({4, 64}, DType::F32));
  EXPECT_EQ(quant::nf4_max_abs(z), 0.0f);
  EXPECT_EQ(quant::nf4_lowp_scale(z, LowpFormat::E4M3), 1.0f);
}

TEST(Nf4Lowp, CodesEqualQuantizeOfTheDecodedWeight) {
  uint32_t seed = 20;
  for (const Shape& shape : kShapes)
    for (LowpFormat f : {LowpFormat::E4M3, LowpFormat::INT8}) {
      const Nf4Tensor q = quantize_nf4(nf4_test_weight(shape, seed++));
      const quant::QuantizedTensor ref = quant::quantize(dequantize_nf4(q), f, true);
      const float s = quant::nf4_lowp_scale(q, f);
      EXPECT_EQ(s, ref.scale.ptr<float>()[0]) << shape_str(shape);
      Tensor codes = Tensor::empty(shape, quant::code_dtype(f));
      Tensor codes_t = Tensor::empty({shape[1], shape[0]}, quant::code_dtype(f));
      quant::nf4_to_lowp(q, s, false, codes);
      quant::nf4_to_lowp(q, s, true, codes_t);
      EXPECT_TRUE(code_bytes(codes) == code_bytes(ref.codes)) << shape_str(shape);
      EXPECT_TRUE(code_bytes(codes_t) == code_bytes(ref.codes_t)) << shape_str(shape);
    }
}

TEST(Nf4Lowp, AnyGivenScaleEncodesDeqOverScale) {
  const Nf4Tensor q = quantize_nf4(nf4_test_weight({33, 70}, 7));
  const Tensor deq = dequantize_nf4(q);
  const float s = 3.0f * quant::nf4_lowp_scale(q, LowpFormat::E4M3);
  std::vector<uint8_t> want(size_t(deq.numel()));
  quant::encode_cpu(LowpFormat::E4M3, deq.ptr<float>(), deq.numel(), s, want.data());
  Tensor codes = Tensor::empty({33, 70}, DType::F8_E4M3);
  quant::nf4_to_lowp(q, s, false, codes);
  EXPECT_TRUE(code_bytes(codes) == want);
}

TEST(Nf4Lowp, RefusesBadOperands) {
  const Nf4Tensor q = quantize_nf4(nf4_test_weight({8, 16}, 2));
  Tensor wrong = Tensor::empty({8, 16}, DType::F8_E4M3), f32 = Tensor::empty({8, 16}, DType::F32);
  EXPECT_THROW(quant::nf4_to_lowp(q, 1.0f, true, wrong), Error);  // transposed needs [16, 8]
  EXPECT_THROW(quant::nf4_to_lowp(q, 1.0f, false, f32), Error);   // not a code dtype
  EXPECT_THROW(quant::nf4_to_lowp(q, 0.0f, false, wrong), Error);  // scale
  const Nf4Tensor flat = quantize_nf4(nf4_test_weight({128}, 3));
  Tensor c = Tensor::empty({128}, DType::I8);
  EXPECT_THROW(quant::nf4_to_lowp(flat, 1.0f, false, c), Error);  // not 2-D
}

}  // namespace
}  // namespace loft::test
