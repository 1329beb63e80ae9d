// CPU convert / axpy / scale.
#include <cmath>
#include <cstring>

#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

TEST(OpsCpuElementwise, ConvertRoundsToNearestEvenBothWays) {
  // 1 + 2^-8 ties to 1.0 in bf16; 2049 ties to 2048 in fp16; NaN stays NaN.
  const std::vector<float> v = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 2049.0f, NAN, 1e-3f};
  Tensor src = Tensor::from_vector(v, {7});
  Tensor bf = Tensor::empty({7}, DType::BF16), hf = Tensor::empty({7}, DType::F16);
  ops::convert(src, bf);
  ops::convert(src, hf);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(bf.ptr<uint16_t>()[i], f32_to_bf16(v[i])) << i;
    EXPECT_EQ(hf.ptr<uint16_t>()[i], f32_to_f16(v[i])) << i;
  }
  EXPECT_EQ(bf.ptr<uint16_t>()[1], 0x3f80);
  EXPECT_EQ(bf.ptr<uint16_t>()[2], 0x3f82);
  Tensor back = Tensor::empty({7}, DType::F32), f16_from_bf = Tensor::empty({7}, DType::F16);
  ops::convert(bf, back);
  ops::convert(bf, f16_from_bf);  // bf16 → fp16 goes through fp32, rounding once
  const auto b = back.to_float_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(b[i]));
      continue;
    }
    EXPECT_EQ(b[i], bf16_to_f32(f32_to_bf16(v[i]))) << i;
    EXPECT_EQ(f16_from_bf.ptr<uint16_t>()[i], f32_to_f16(b[i])) << i;
  }
  Tensor copy = Tensor::empty({7}, DType::F32);
  ops::convert(back, copy);
  EXPECT_EQ(std::memcmp(copy.data(), back.data(), back.nbytes()), 0);
}

TEST(OpsCpuElementwise, AxpyAndScale) {
  std::mt19937 rng(71);
  Tensor x = test::random_tensor({3, 173}, rng), y = test::random_tensor({3, 173}, rng);
  const auto xd = test::to_double(x), yd = test::to_double(y);
  ops::axpy(-0.75f, x, y);
  std::vector<double> ref(yd.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = yd[i] - 0.75 * xd[i];
  EXPECT_LT(test::rel_error_ref(y, ref), 1e-6);
  ops::scale(y, 3.0f);
  for (double& r : ref) r *= 3.0;
  EXPECT_LT(test::rel_error_ref(y, ref), 1e-6);
}

}  // namespace
}  // namespace loft
