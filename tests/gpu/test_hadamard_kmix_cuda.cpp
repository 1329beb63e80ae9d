// The fp32 K-mix row kernel (engine/quant/cuda/hadamard_kmix.cuh) bit for bit against the CPU
// reference: the Llama widths with a K-mix below kTensorCoreMixOrder (5120 = 20·256, 5632 =
// 44·128, 14336 = 28·512) and odd orders chosen so that every branch runs: packed segments (96,
// 160, 768), the k % 8 == 4 half tiles (12, 20, 28, 44, 108), FWHT stages in shared memory
// (2^m >= 512: 24576, 28672), two mix rounds per block (24576, 28672), H' staged in chunks
// (k = 252: 2016 = 252·8), and more rows than one wave of resident blocks (blocks loop over
// segments). Orders >= kTensorCoreMixOrder come here only with 2^m = 8 (864, 2016), which the
// tensor-core mix does not take; its widths are test_hadamard_kmix_mma_cuda.cpp's. Forward and
// inverse, F32 and BF16 (the CPU's F32 result rounded to BF16), plus rotate_quantize against the
// CPU, and the inverse at llama-3-8b shapes (`loft bench kernels` times these kernels).
#include <cuda_runtime.h>

#include <cstdio>

#include "engine/device/memory.h"
#include "engine/quant/fp8.h"
#include "engine/quant/hadamard.h"
#include "engine/quant/rotate_quantize.h"
#include "tests/engine/test_quant_fp8_reference.h"
#include "tests/gpu/test_hadamard_util.h"

namespace loft::test {
namespace {

struct Width {
  int64_t n;
  int k;  // the plan's order (asserted: the case must reach the K-mix it is meant for)
  std::vector<int64_t> rows;
};

const Width kWidths[] = {
    {96, 12, {1, 7, 300}},     {160, 20, {1, 33}},         {768, 12, {7, 6000}},
    {864, 108, {3, 33}},       {5120, 20, {1, 7, 33}},     {5632, 44, {1, 7, 33}},
    {14336, 28, {1, 7, 300}},  {24576, 12, {1, 5}},        {28672, 28, {1, 3}},
    {2016, 252, {1, 6, 300}},
};

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = quant::float_bits(v[i]);
  return b;
}

// The CPU's F32 values as a tensor of dtype dt would hold them (BF16: rounded to nearest even).
std::vector<uint32_t> as_dtype_bits(const Tensor& cpu, DType dt) {
  std::vector<float> v = cpu.to_float_vector();
  if (dt == DType::BF16)
    for (float& f : v) f = bf16_to_f32(f32_to_bf16(f));
  return bits(v);
}

// Index of the first differing element, for the failure message.
size_t first_diff(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

TEST(HadamardKmixCuda, BitIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(51);
  int optin = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  for (const Width& w : kWidths) {
    const quant::HadamardPlan plan = quant::plan_for(w.n);
    ASSERT_EQ(plan.k, w.k) << plan.describe();
    ASSERT_FALSE(plan.block_diagonal()) << plan.describe();
    if (w.n * 4 + 1024 + w.k * 4 > optin) {  // 28672 on a 99 KiB device: no CUDA transform at all
      std::printf("skipping n=%lld: %d bytes of shared memory per block\n", (long long)w.n, optin);
      continue;
    }
    for (int64_t rows : w.rows)
      for (DType dt : kActivationDtypes)
        for (bool inverse : {false, true}) {
          const RotatedPair r = rotate_on_both(plan, to_gpu(random_tensor({rows, w.n}, rng, -3.0f, 3.0f), dt), inverse);
          const std::vector<uint32_t> got = bits(r.gpu.to_float_vector()), want = as_dtype_bits(r.cpu, dt);
          ASSERT_EQ(got.size(), want.size());
          EXPECT_TRUE(got == want) << name(dt) << " rows " << rows << (inverse ? " inverse " : " forward ")
                                   << plan.describe() << ": first difference at element "
                                   << first_diff(got, want);
        }
  }
}

TEST(HadamardKmixCuda, InPlaceEqualsOutOfPlace) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(52);
  for (int64_t n : {int64_t(96), int64_t(14336), int64_t(28672)})
    for (bool inverse : {false, true}) {
      const Tensor x = to_gpu(random_tensor({300, n}, rng), DType::BF16);
      Tensor y = Tensor::empty(x.shape(), DType::BF16, kGpu);
      quant::hadamard_transform(x, y, inverse);
      Tensor inplace = x.clone();
      quant::hadamard_transform(inplace, inplace, inverse);
      EXPECT_TRUE(bits(inplace.to_float_vector()) == bits(y.to_float_vector())) << "n=" << n;
    }
}

// rotate_quantize of F32 rows on the GPU gives the CPU's codes and scale (the CPU rotates, then
// quantizes) on the fused two-pass path.
TEST(HadamardKmixCuda, RotateQuantizeIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(53);
  for (int64_t n : {int64_t(160), int64_t(5120), int64_t(5632), int64_t(14336)})
    for (int64_t rows : {int64_t(1), int64_t(33)})
      for (quant::LowpFormat f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
        const quant::HadamardPlan plan = quant::plan_for(n);
        const Tensor cx = random_tensor({rows, n}, rng, -4.0f, 4.0f);
        const quant::QuantizedTensor g = quant::rotate_quantize(plan, to_gpu(cx, DType::F32), f);
        const quant::QuantizedTensor c = quant::rotate_quantize(plan, cx, f);
        const std::string what = cat("rows ", rows, " ", plan.describe(), " ", quant::format_name(f));
        EXPECT_EQ(quant::float_bits(g.scale.to_float_vector()[0]), quant::float_bits(c.scale.to_float_vector()[0]))
            << what;
        EXPECT_TRUE(code_bytes(g.codes) == code_bytes(c.codes)) << what;
      }
}

// The inverse at [4096, 14336] (llama-3-8b, 2×2048 tokens) and [4096, 5120] in BF16: the first
// rows against the CPU.
TEST(HadamardKmixCuda, InverseAtLlamaShapesMatchesTheCpu) {
  LOFT_REQUIRE_GPU();
  for (auto [t, n] : std::vector<std::pair<int64_t, int64_t>>{{4096, 14336}, {4096, 5120}}) {
    const quant::HadamardPlan plan = quant::plan_for(n);
    const ModelInverse g = model_inverse_on_gpu(plan, t, n);
    const Tensor want = inverse_rows_on_cpu(plan, g.x, 0, 4);
    EXPECT_TRUE(bits(g.y.slice(0, 4).to_float_vector()) == as_dtype_bits(want, DType::BF16)) << n;
  }
}

}  // namespace
}  // namespace loft::test
