#include <cmath>

#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2, DType::I8,
                  DType::U8, DType::I32, DType::I64}) {
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(dtype_from_name("F128").has_value());
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1.0078125 (odd mantissa) and 1.015625: goes up.
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16RoundTripAndEdges) {
  for (float v : {0.0f, 1.0f, -1.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f})
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  // 2049 lies halfway between 2048 and 2050 in fp16: ties to even gives 2048.
  EXPECT_EQ(f16_to_f32(f32_to_f16(2049.0f)), 2048.0f);
}

TEST(Tensor, ViewsShareStorage) {
  std::mt19937 rng(1);
  Tensor t = test::random_tensor({4, 3}, rng);
  Tensor rows = t.slice(1, 2);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.ptr<float>(), t.ptr<float>() + 3);
  Tensor flat = t.view({12});
  flat.ptr<float>()[5] = 42.0f;
  EXPECT_EQ(t.ptr<float>()[5], 42.0f);
  EXPECT_THROW(t.view({5}), Error);
  EXPECT_THROW(t.slice(3, 2), Error);
}

TEST(Tensor, CloneIsDeep) {
  std::mt19937 rng(2);
  Tensor t = test::random_tensor({5}, rng);
  Tensor c = t.clone();
  c.ptr<float>()[0] = 7.0f;
  EXPECT_NE(t.ptr<float>()[0], 7.0f);
  EXPECT_EQ(test::rel_error(t.slice(1, 4), c.slice(1, 4)), 0.0);
}

TEST(Device, ResolvesSpecs) {
  EXPECT_TRUE(resolve_device("cpu").is_cpu());
  EXPECT_THROW(resolve_device("tpu"), UsageError);
  EXPECT_THROW(resolve_device("cuda:x"), UsageError);
  EXPECT_THROW(resolve_device("cuda:"), UsageError);
  if (cuda_device_count() == 0) {
    EXPECT_THROW(resolve_device("cuda"), UsageError);
    std::ostringstream notice;
    EXPECT_TRUE(resolve_device("auto", &notice).is_cpu());
    EXPECT_NE(notice.str().find("CPU backend"), std::string::npos);
  }
}

}  // namespace
}  // namespace loft
