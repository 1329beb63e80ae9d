// The tensor-core K-mix (engine/quant/cuda/hadamard_kmix_mma.cuh) against the CPU reference: the
// orders from kTensorCoreMixOrder on, at every 2^m it takes (32..512; 1088 = 68·16 stays on the fp32
// kernel and must agree as well) and the model widths that
// need it (13824 = 108·128 Llama-13B, 18944 = 148·128 Qwen2.5-7B, 25600 = 200·128 Qwen3-32B,
// 27648 = 108·256 Qwen2.5-32B), padded orders (68 → 80, 76, 108, 148 → 160, 200 → 208, 252 → 256)
// and more rows than the device holds blocks. It sums in another order than the CPU, so results
// are compared to fp32 accuracy (a broken bf16 split would be off by 2^-9); rows are independent
// of their neighbours and of the launch, bit for bit; rotate_quantize casts exactly the values
// the transform gives.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/quant/fp8.h"
#include "engine/quant/hadamard.h"
#include "engine/quant/quantize.h"
#include "engine/quant/rotate_quantize.h"
#include "tests/engine/test_quant_fp8_reference.h"
#include "tests/gpu/test_hadamard_util.h"

namespace loft::test {
namespace {

struct Width {
  int64_t n;
  int k, pow2;  // the plan (asserted: the case must reach the order it is meant for)
};

const Width kWidths[] = {{1088, 68, 16},    {2432, 76, 32},    {9472, 148, 64},   {13824, 108, 128},
                         {18944, 148, 128}, {16128, 252, 64},  {25600, 200, 128}, {27648, 108, 256}};

// False (and a note) when no CUDA row transform of width n fits this device's shared memory.
bool fits(int64_t n) {
  int optin = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  if (n * 4 + 1024 <= optin) return true;
  std::printf("skipping n=%lld: %d bytes of shared memory per block\n", (long long)n, optin);
  return false;
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float f : v) m = std::max(m, std::fabs(f));
  return m;
}

// Every element of got within its accuracy of want (the CPU's F32 result). F32: 4e-6 of the
// largest |want| (the sums' rounding is ~1e-7 of it; a bf16-only split would be ~1e-3). BF16
// (two pieces, 2^-18 each): a BF16 step of want plus 4e-5 of the largest |want|. Returns the
// index of the first element out of bounds, or -1.
int64_t first_out_of_bounds(const std::vector<float>& got, const std::vector<float>& want, DType dt) {
  const double abs_tol = (dt == DType::BF16 ? 4e-5 : 4e-6) * double(max_abs(want));
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = abs_tol + (dt == DType::BF16 ? std::ldexp(std::fabs(double(want[i])), -8) : 0.0);
    if (!(std::fabs(double(got[i]) - double(want[i])) <= bound)) return int64_t(i);
  }
  return -1;
}

TEST(HadamardKmixMmaCuda, MatchesCpuToFp32Accuracy) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(61);
  for (const Width& w : kWidths) {
    const quant::HadamardPlan plan = quant::plan_for(w.n);
    ASSERT_EQ(plan.k, w.k) << plan.describe();
    ASSERT_EQ(plan.pow2, w.pow2) << plan.describe();
    ASSERT_GE(plan.k, quant::kTensorCoreMixOrder);
    if (!fits(w.n)) continue;
    for (int64_t rows : {int64_t(1), int64_t(7), int64_t(300)})
      for (DType dt : kActivationDtypes)
        for (bool inverse : {false, true}) {
          const RotatedPair r = rotate_on_both(plan, to_gpu(random_tensor({rows, w.n}, rng, -3.0f, 3.0f), dt), inverse);
          const std::vector<float> got = r.gpu.to_float_vector(), want = r.cpu.to_float_vector();
          const int64_t bad = first_out_of_bounds(got, want, dt);
          EXPECT_EQ(bad, -1) << name(dt) << " rows " << rows << (inverse ? " inverse " : " forward ")
                             << plan.describe() << ": element " << bad << " is "
                             << (bad >= 0 ? got[size_t(bad)] : 0.0f) << ", the CPU's "
                             << (bad >= 0 ? want[size_t(bad)] : 0.0f);
        }
  }
}

// A row's result depends on that row alone: the last of 300 rows equals the row transformed by
// itself, and in place equals out of place, bit for bit.
TEST(HadamardKmixMmaCuda, RowsIndependentOfLaunchAndInPlace) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(62);
  for (int64_t n : {int64_t(1088), int64_t(18944), int64_t(27648)}) {
    if (!fits(n)) continue;
    for (bool inverse : {false, true}) {
      const Tensor x = to_gpu(random_tensor({300, n}, rng), DType::BF16);
      Tensor y = Tensor::empty(x.shape(), DType::BF16, kGpu);
      quant::hadamard_transform(x, y, inverse);
      const Tensor last = x.slice(299, 1).clone();
      Tensor y_last = Tensor::empty(last.shape(), DType::BF16, kGpu);
      quant::hadamard_transform(last, y_last, inverse);
      EXPECT_TRUE(y.slice(299, 1).to_float_vector() == y_last.to_float_vector()) << "n=" << n;
      Tensor inplace = x.clone();
      quant::hadamard_transform(inplace, inplace, inverse);
      EXPECT_TRUE(inplace.to_float_vector() == y.to_float_vector()) << "n=" << n;
    }
  }
}

// forward then inverse gives x back to fp32 accuracy (the inverse takes Hᵀ, not H).
TEST(HadamardKmixMmaCuda, RoundTripIsIdentity) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(63);
  for (const Width& w : kWidths) {
    if (!fits(w.n)) continue;
    const Tensor cx = random_tensor({5, w.n}, rng);
    const Tensor x = to_gpu(cx, DType::F32);
    Tensor y = Tensor::empty(x.shape(), DType::F32, kGpu), back = Tensor::empty(x.shape(), DType::F32, kGpu);
    quant::hadamard_transform(x, y, false);
    quant::hadamard_transform(y, back, true);
    EXPECT_EQ(first_out_of_bounds(back.to_float_vector(), cx.to_float_vector(), DType::F32), -1) << w.n;
  }
}

// rotate_quantize's codes and scale are quantize's of the GPU's own rotation (the fused passes
// cast exactly those values), and its scale is the CPU's to the accuracy of x's dtype (a BF16
// rotation is rounded to BF16 before its amax).
TEST(HadamardKmixMmaCuda, RotateQuantizeCastsTheRotation) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(64);
  for (int64_t n : {int64_t(2432), int64_t(13824), int64_t(18944)}) {
    if (!fits(n)) continue;
    const quant::HadamardPlan plan = quant::plan_for(n);
    for (int64_t rows : {int64_t(1), int64_t(33)})
      for (DType dt : kActivationDtypes)
        for (quant::LowpFormat f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
          const Tensor cx = random_tensor({rows, n}, rng, -4.0f, 4.0f);
          const Tensor x = to_gpu(cx, dt);
          const quant::QuantizedTensor g = quant::rotate_quantize(plan, x, f);
          Tensor y = Tensor::empty(x.shape(), dt, kGpu);
          quant::hadamard_transform(plan, x, y, false);
          const quant::QuantizedTensor q = quant::quantize(y, f);
          const std::string what = cat(name(dt), " rows ", rows, " ", plan.describe(), " ", quant::format_name(f));
          const float gs = g.scale.to_float_vector()[0];
          EXPECT_EQ(quant::float_bits(gs), quant::float_bits(q.scale.to_float_vector()[0])) << what;
          EXPECT_TRUE(code_bytes(g.codes) == code_bytes(q.codes)) << what;
          const quant::QuantizedTensor c = quant::rotate_quantize(plan, cpu_f32(x), f);
          EXPECT_NEAR(gs, c.scale.to_float_vector()[0], (dt == DType::BF16 ? 4e-3 : 1e-5) * std::fabs(gs)) << what;
        }
  }
}

// The inverse at bench shapes, [8192, 13824] (llama-13b, 4×2048 tokens) and [4096, 18944]
// (qwen2.5-7b, 2×2048) in BF16: the first and last rows against the CPU.
TEST(HadamardKmixMmaCuda, InverseAtModelShapesMatchesTheCpu) {
  LOFT_REQUIRE_GPU();
  for (auto [t, n] : std::vector<std::pair<int64_t, int64_t>>{{8192, 13824}, {4096, 18944}}) {
    const quant::HadamardPlan plan = quant::plan_for(n);
    const ModelInverse g = model_inverse_on_gpu(plan, t, n);
    for (int64_t r0 : {int64_t(0), t - 4}) {
      const Tensor want = inverse_rows_on_cpu(plan, g.x, r0, 4);
      EXPECT_EQ(first_out_of_bounds(g.y.slice(r0, 4).to_float_vector(), want.to_float_vector(), DType::BF16), -1)
          << n << " rows " << r0;
    }
  }
}

}  // namespace
}  // namespace loft::test
