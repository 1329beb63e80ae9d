// The CUDA quantizer against the CPU reference: codes, transposed codes and scales bit-identical
// for F32 and BF16 inputs at awkward and large-ish shapes (and unaligned views); dequantize
// bit-identical too. Also the shared scalar encoders against cuda_fp8.h's own SATFINITE
// conversion (host side, no GPU needed).
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/ops/ops.h"
#include "engine/quant/fp8.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::LowpFormat;

float scale_of(const quant::QuantizedTensor& q) { return q.scale.to(Device::cpu()).ptr<float>()[0]; }

TEST(QuantCudaCodec, EncodersMatchCudaFp8Satfinite) {
  int bad = 0;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 251) {
    float x;
    const uint32_t b = uint32_t(u);
    std::memcpy(&x, &b, 4);
    if (std::isnan(x)) continue;  // both give a NaN code; its sign bit is not specified
    const uint8_t e4 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    const uint8_t e5 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    if ((quant::f32_to_fp8_e4m3(x) != e4 || quant::f32_to_fp8_e5m2(x) != e5) && ++bad <= 5)
      ADD_FAILURE() << "x=" << x << " e4m3 " << int(quant::f32_to_fp8_e4m3(x)) << " vs " << int(e4)
                    << ", e5m2 " << int(quant::f32_to_fp8_e5m2(x)) << " vs " << int(e5);
  }
  EXPECT_EQ(bad, 0);
}

// The device encoders (the hardware conversion on sm_89+) against the CPU's on a dense sweep of
// fp32 patterns in [-1792, 1792], rounding ties, subnormal codes and the top of the range
// included: amax 1792 makes the scale a power of two (E4M3 4, E5M2 1/32), so x / s is exact and
// the codes compare the encoders themselves.
TEST(QuantCudaCodec, DeviceEncodersMatchCpuOnASweep) {
  LOFT_REQUIRE_GPU();
  std::vector<float> v;
  for (uint32_t u = 0; u <= 0x44e00000u; u += 997) {
    float x;
    std::memcpy(&x, &u, 4);
    v.push_back(x);
    v.push_back(-x);
  }
  v.push_back(1792.0f);
  const Tensor x = Tensor::from_vector(v, {int64_t(v.size())});
  for (LowpFormat f : {LowpFormat::E4M3, LowpFormat::E5M2}) {
    const quant::QuantizedTensor cpu = quant::quantize(x, f), gpu = quant::quantize(x.to(Device::cuda(0)), f);
    EXPECT_EQ(scale_of(gpu), scale_of(cpu));
    const std::vector<uint8_t> a = test::code_bytes(cpu.codes), b = test::code_bytes(gpu.codes);
    int64_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i] && ++bad <= 5)
        ADD_FAILURE() << quant::format_name(f) << " x=" << v[i] << " cpu " << int(a[i]) << " gpu " << int(b[i]);
    EXPECT_EQ(bad, 0) << quant::format_name(f);
  }
}

struct Case {
  LowpFormat format;
  DType dtype;
};

class QuantCuda : public ::testing::TestWithParam<Case> {};

Tensor input(const Shape& shape, DType dt, std::mt19937& rng) {
  const Tensor x = test::random_tensor(shape, rng, -3.0f, 3.0f);
  if (dt == DType::F32) return x;
  Tensor b = Tensor::empty(shape, dt);
  ops::convert(x, b);
  return b;
}

void expect_same(const quant::QuantizedTensor& gpu, const quant::QuantizedTensor& cpu,
                 const std::string& what) {
  EXPECT_EQ(gpu.codes.device(), Device::cuda(0));
  EXPECT_EQ(scale_of(gpu), scale_of(cpu)) << what;
  EXPECT_TRUE(test::code_bytes(gpu.codes) == test::code_bytes(cpu.codes)) << what << ": codes differ";
  if (cpu.codes_t.defined()) {
    EXPECT_TRUE(test::code_bytes(gpu.codes_t) == test::code_bytes(cpu.codes_t))
        << what << ": transposed codes differ";
  }
}

TEST_P(QuantCuda, CodesAndScaleBitIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  const auto [f, dt] = GetParam();
  std::mt19937 rng(31);
  for (const Shape& shape : {Shape{1}, Shape{7}, Shape{172}, Shape{3, 5, 172}, Shape{512, 2752}}) {
    const Tensor x = input(shape, dt, rng);
    expect_same(quant::quantize(x.to(Device::cuda(0)), f), quant::quantize(x, f), shape_str(shape));
  }
}

TEST_P(QuantCuda, TransposedCopyBitIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  const auto [f, dt] = GetParam();
  std::mt19937 rng(32);
  // Multiples of 8 take the vectorised 64×64-tile kernel (200 x 96: partial tiles), others the general one.
  for (const Shape& shape : {Shape{1, 1}, Shape{7, 1}, Shape{172, 7}, Shape{33, 172}, Shape{512, 2752},
                             Shape{200, 96}, Shape{8, 8}}) {
    const Tensor x = input(shape, dt, rng);
    expect_same(quant::quantize(x.to(Device::cuda(0)), f, true), quant::quantize(x, f, true),
                shape_str(shape));
  }
}

TEST_P(QuantCuda, UnalignedViewAndZeros) {
  LOFT_REQUIRE_GPU();
  const auto [f, dt] = GetParam();
  std::mt19937 rng(33);
  const Tensor x = input({101, 7}, dt, rng);
  const Tensor view = x.to(Device::cuda(0)).slice(1, 99);  // starts 7 elements in: not 16-byte aligned
  expect_same(quant::quantize(view, f, true), quant::quantize(x.slice(1, 99), f, true), "view");
  const Tensor z = Tensor::zeros({9, 17}, dt, Device::cuda(0));
  const auto q = quant::quantize(z, f);
  EXPECT_EQ(scale_of(q), 1.0f);
  for (uint8_t c : test::code_bytes(q.codes)) ASSERT_EQ(c, 0);
}

TEST_P(QuantCuda, DequantizeBitIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  const auto [f, dt] = GetParam();
  std::mt19937 rng(34);
  const auto cpu = quant::quantize(input({67, 172}, dt, rng), f);
  quant::QuantizedTensor gpu = cpu;
  gpu.codes = cpu.codes.to(Device::cuda(0));
  gpu.scale = cpu.scale.to(Device::cuda(0));
  for (DType out : {DType::F32, DType::BF16}) {
    const auto want = quant::dequantize(cpu, out).to_float_vector();
    const auto got = quant::dequantize(gpu, out).to_float_vector();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << dtype_name(out);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantCuda,
                         ::testing::Values(Case{LowpFormat::E4M3, DType::F32},
                                           Case{LowpFormat::E4M3, DType::BF16},
                                           Case{LowpFormat::E5M2, DType::F32},
                                           Case{LowpFormat::E5M2, DType::BF16},
                                           Case{LowpFormat::INT8, DType::F32},
                                           Case{LowpFormat::INT8, DType::BF16}),
                         [](const auto& info) {
                           return cat(quant::format_name(info.param.format), "_",
                                      dtype_name(info.param.dtype));
                         });

}  // namespace
}  // namespace loft
