// NF4 on CUDA against the CPU reference: quantize gives the same bytes (F32 and BF16 inputs),
// dequantize gives the CPU's F32 bit for bit and BF16 equal to those values rounded, including
// into an unaligned view (the scalar path) and for shapes with partial blocks and groups.
#include <cmath>
#include <cstring>

#include "engine/quant/nf4.h"
#include "tests/engine/test_quant_nf4_util.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

const Shape kShapes[] = {{1},         {3},        {7, 13},       {172, 64},
                         {64, 172},   {300, 64},  {257 * 64 + 3}, {4096, 4096}};

TEST(Nf4Cuda, QuantizeCodesIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const Shape& shape : kShapes)
    for (DType dt : kActivationDtypes) {
      const Tensor w = nf4_test_weight(shape, seed++);
      const Tensor g = to_gpu(w, dt);
      const Nf4Tensor q = quantize_nf4(g);
      ASSERT_TRUE(q.device().is_cuda());
      EXPECT_TRUE(same_nf4(q, quantize_nf4(cpu_f32(g)))) << shape_str(shape) << " " << name(dt);
    }
}

TEST(Nf4Cuda, QuantizeZeroTensorAndLargeOutliersMatchCpu) {
  LOFT_REQUIRE_GPU();
  const Tensor z = Tensor::zeros({5, 77}, DType::F32);
  EXPECT_TRUE(same_nf4(quantize_nf4(z.to(kGpu)), quantize_nf4(z)));
  std::vector<float> x = nf4_test_values(600 * 64, 9);
  for (int b = 0; b < 600; b += 37) x[size_t(b) * 64 + 3] = 1e4f * float(b + 1);
  const Tensor w = Tensor::from_vector(x, {600, 64});
  EXPECT_TRUE(same_nf4(quantize_nf4(w.to(kGpu)), quantize_nf4(w)));
}

TEST(Nf4Cuda, DequantizeF32BitIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  uint32_t seed = 50;
  for (const Shape& shape : kShapes) {
    const Nf4Tensor q = quantize_nf4(nf4_test_weight(shape, seed++));
    const std::vector<uint32_t> want = host_values<uint32_t>(dequantize_nf4(q, DType::F32));
    const Tensor got = dequantize_nf4(q.to(kGpu), DType::F32);
    ASSERT_TRUE(got.device().is_cuda());
    ASSERT_EQ(host_values<uint32_t>(got), want) << shape_str(shape);
  }
}

TEST(Nf4Cuda, DequantizeBf16IsTheRoundedCpuValues) {
  LOFT_REQUIRE_GPU();
  uint32_t seed = 80;
  for (const Shape& shape : kShapes) {
    const Nf4Tensor q = quantize_nf4(nf4_test_weight(shape, seed++));
    const std::vector<float> f = dequantize_nf4(q, DType::F32).to_float_vector();
    std::vector<uint16_t> want(f.size());
    for (size_t i = 0; i < f.size(); ++i) want[i] = f32_to_bf16(f[i]);
    ASSERT_EQ(host_values<uint16_t>(dequantize_nf4(q.to(kGpu), DType::BF16)), want)
        << shape_str(shape);
  }
}

TEST(Nf4Cuda, DequantizeIntoAnUnalignedRowViewMatchesCpu) {
  LOFT_REQUIRE_GPU();
  const Nf4Tensor q = quantize_nf4(nf4_test_weight({9, 173}, 4));
  const Nf4Tensor g = q.to(kGpu);
  for (DType dt : kActivationDtypes) {
    Tensor host = Tensor::empty({9, 173}, dt);
    dequantize_nf4_into(q, host);
    Tensor big = Tensor::zeros({10, 173}, dt, kGpu);
    Tensor rows = big.slice(1, 9);  // 173 elements in: not 16-byte aligned
    dequantize_nf4_into(g, rows);
    EXPECT_EQ(rows.to_float_vector(), host.to_float_vector()) << name(dt);
    const std::vector<float> first = big.slice(0, 1).to_float_vector();
    for (float v : first) ASSERT_EQ(v, 0.0f) << "wrote outside the view";
  }
}

TEST(Nf4Cuda, GpuRoundTripMatchesCpuRoundTrip) {
  LOFT_REQUIRE_GPU();
  const Tensor w = nf4_test_weight({4096, 4096}, 12);
  const Tensor got = dequantize_nf4(quantize_nf4(w.to(kGpu)), DType::BF16);
  const Tensor want = dequantize_nf4(quantize_nf4(w), DType::BF16);
  ASSERT_EQ(host_values<uint16_t>(got), host_values<uint16_t>(want));
  EXPECT_NEAR(quantize_nf4(w.to(kGpu)).bits_per_param(), 4.127, 0.0005);
}

TEST(Nf4Cuda, NanInputThrowsNamingTheBlock) {
  LOFT_REQUIRE_GPU();
  std::vector<float> x = nf4_test_values(300, 2);
  x[200] = NAN;
  try {
    quantize_nf4(Tensor::from_vector(x, {3, 100}).to(kGpu));
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "block 3 (elements 192..255)"));
  }
  x[200] = -INFINITY;
  EXPECT_THROW(quantize_nf4(Tensor::from_vector(x, {3, 100}).to(kGpu)), Error);
}

}  // namespace
}  // namespace loft::test
