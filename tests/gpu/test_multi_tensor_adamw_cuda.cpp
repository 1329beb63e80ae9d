// The multi-tensor CUDA optimizer step (engine/ops/cuda/multi_tensor_optim.cu: the global grad norm,
// the device-side clip factor, AdamW over every tensor with the grads zeroed) against the CPU
// reference, which runs the per-tensor ops in sequence (ops::cpu::sum_squares, scale, adamw).
// Many tensors of awkward sizes (1, 3, 4097, chunk edges, misaligned views), with and without
// clipping, over several steps. Params, moments and zeroed grads must match bit for bit (the same
// fp32 operations in the same order); the norm is summed in another order, so it matches to
// ~1e-14 relative (1e-11 allowed) and is bit-identical from run to run. The last test runs the step
// at llama-7b r=64's 448 adapter tensors.
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/ops/adamw_math.h"
#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

const Device kGpu = Device::cuda(0);

// Sizes around the chunk (65536) and float4 edges, plus a few misaligned views.
const std::vector<int64_t> kSizes = {1, 3, 4, 5, 7, 64, 127, 4097, 65535, 65536, 65537, 131075, 200003};
constexpr int kMisaligned = 3;  // the first kMisaligned tensors also appear as views at offset 1

// `n` floats on `device`; misaligned: a view one float into a larger buffer (not 16-byte aligned).
Tensor alloc(int64_t n, Device device, bool misaligned) {
  if (!misaligned) return Tensor::zeros({n}, DType::F32, device);
  return Tensor::zeros({n + 1}, DType::F32, device).slice(1, n);
}

struct Mirror {
  ops::AdamWTensors cpu, gpu;
};

Mirror make_mirror(std::mt19937& rng) {
  Mirror t;
  std::vector<std::pair<int64_t, bool>> shapes;
  for (int64_t n : kSizes) shapes.emplace_back(n, false);
  for (int i = 0; i < kMisaligned; ++i) shapes.emplace_back(kSizes[size_t(6 + i)], true);
  for (auto [n, mis] : shapes) {
    const Tensor p = test::random_tensor({n}, rng);
    t.cpu.params.push_back(p.clone());
    for (auto* list : {&t.cpu.grads, &t.cpu.m, &t.cpu.v}) list->push_back(Tensor::zeros({n}, DType::F32));
    for (auto* list : {&t.gpu.params, &t.gpu.grads, &t.gpu.m, &t.gpu.v}) list->push_back(alloc(n, kGpu, mis));
    t.gpu.params.back().copy_from(p);
  }
  return t;
}

// New random grads, the same on both sides; the scale of each tensor differs so the norm is not
// dominated by one of them.
void fill_grads(Mirror& t, std::mt19937& rng, float magnitude) {
  for (size_t i = 0; i < t.cpu.grads.size(); ++i) {
    const float a = magnitude * float(1 + i % 5);
    const Tensor g = test::random_tensor(t.cpu.grads[i].shape(), rng, -a, a);
    t.cpu.grads[i].copy_from(g);
    t.gpu.grads[i].copy_from(g);
  }
}

::testing::AssertionResult same_bits(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = got.to_float_vector(), b = want.to_float_vector();
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "[" << i << "] of " << a.size() << ": " << a[i]
                                           << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

TEST(MultiTensorAdamWCuda, MatchesPerTensorCpuReferenceBitForBit) {
  LOFT_REQUIRE_GPU();
  for (double wd : {0.0, 0.1})
    for (double max_norm : {0.0, 0.5, 1e9}) {  // off; clipping every step; on but never reached
      SCOPED_TRACE(cat("weight_decay=", wd, " max_norm=", max_norm));
      std::mt19937 rng(7);
      Mirror t = make_mirror(rng);
      Tensor scale_cpu = Tensor::empty({1}, DType::F32), scale_gpu = Tensor::empty({1}, DType::F32, kGpu);
      for (int64_t step = 1; step <= 4; ++step) {
        SCOPED_TRACE(cat("step ", step));
        fill_grads(t, rng, 1e-2f);
        const double norm_cpu = ops::grad_norm_clip(t.cpu, max_norm, scale_cpu);
        const double norm_gpu = ops::grad_norm_clip(t.gpu, max_norm, scale_gpu);
        EXPECT_NEAR(norm_gpu, norm_cpu, 1e-11 * norm_cpu);
        const float f_cpu = scale_cpu.to_float_vector()[0], f_gpu = scale_gpu.to_float_vector()[0];
        // The device computes the factor as the host does from the same norm.
        EXPECT_EQ(f_gpu, ops::clip_factor(norm_gpu, max_norm));
        EXPECT_NEAR(f_gpu, f_cpu, 1e-6 * f_cpu);
        if (max_norm == 0.5) EXPECT_LT(f_gpu, 1.0f) << "the test means to clip";
        else EXPECT_EQ(f_gpu, 1.0f);
        // The update from the same factor: bit-identical params and moments, grads zeroed.
        scale_cpu.copy_from(scale_gpu);
        const ops::AdamWStep s{.lr = 1e-2, .weight_decay = wd, .step = step};
        ops::adamw_all(t.cpu, max_norm > 0 ? &scale_cpu : nullptr, s);
        ops::adamw_all(t.gpu, max_norm > 0 ? &scale_gpu : nullptr, s);
        for (size_t i = 0; i < t.cpu.params.size(); ++i) {
          SCOPED_TRACE(cat("tensor ", i, " numel ", t.cpu.params[i].numel()));
          ASSERT_TRUE(same_bits(t.gpu.params[i], t.cpu.params[i])) << "param";
          ASSERT_TRUE(same_bits(t.gpu.m[i], t.cpu.m[i])) << "m";
          ASSERT_TRUE(same_bits(t.gpu.v[i], t.cpu.v[i])) << "v";
          ASSERT_TRUE(same_bits(t.gpu.grads[i], Tensor::zeros(t.cpu.grads[i].shape(), DType::F32)))
              << "grad not zeroed";
          ASSERT_TRUE(same_bits(t.cpu.grads[i], Tensor::zeros(t.cpu.grads[i].shape(), DType::F32)))
              << "CPU grad not zeroed";
        }
      }
    }
}

// The copies written with the update (AdamWTensors::copies): BF16 and F16 views, aligned and
// not (a view one element in takes the per-element path), equal convert of the updated params bit
// for bit; params without a copy and the rest of the step are unchanged by having them.
TEST(MultiTensorAdamWCuda, CopiesEqualConvertOfTheUpdatedParams) {
  LOFT_REQUIRE_GPU();
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::mt19937 rng(17);
    Mirror t = make_mirror(rng);
    for (size_t i = 0; i < t.gpu.params.size(); ++i) {
      const int64_t n = t.gpu.params[i].numel();
      const int kind = int(i % 3);  // 0: none, 1: aligned, 2: a view one element in
      t.gpu.copies.push_back(kind == 0   ? Tensor{}
                             : kind == 1 ? Tensor::zeros({n}, dt, kGpu)
                                         : Tensor::zeros({n + 1}, dt, kGpu).slice(1, n));
    }
    Tensor scale = Tensor::from_vector(std::vector<float>{0.5f}, {1}).to(kGpu);
    Tensor scale_cpu = scale.to(Device::cpu());
    for (int64_t step = 1; step <= 2; ++step) {
      fill_grads(t, rng, 1e-2f);
      const ops::AdamWStep s{.lr = 1e-2, .weight_decay = 0.01, .step = step};
      ops::adamw_all(t.cpu, &scale_cpu, s);
      ops::adamw_all(t.gpu, &scale, s);
      for (size_t i = 0; i < t.gpu.params.size(); ++i) {
        SCOPED_TRACE(cat("step ", step, " tensor ", i, " numel ", t.cpu.params[i].numel()));
        ASSERT_TRUE(same_bits(t.gpu.params[i], t.cpu.params[i])) << "param";
        if (!t.gpu.copies[i].defined()) continue;
        Tensor want = Tensor::empty(t.cpu.params[i].shape(), dt);
        ops::convert(t.cpu.params[i], want);
        ASSERT_TRUE(same_bits(t.gpu.copies[i], want)) << "copy";
      }
    }
  }
}

// Same grads, same bits: the reduction has no atomics. Also the per-tensor ops::sum_squares.
TEST(MultiTensorAdamWCuda, NormIsDeterministic) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(11);
  Mirror t = make_mirror(rng);
  fill_grads(t, rng, 3.0f);
  Tensor scale = Tensor::empty({1}, DType::F32, kGpu);
  const double first = ops::grad_norm_clip(t.gpu, 1.0, scale);
  const double sq = ops::sum_squares(t.gpu.grads.back());
  for (int i = 0; i < 5; ++i) {
    const double again = ops::grad_norm_clip(t.gpu, 1.0, scale);
    EXPECT_EQ(std::memcmp(&again, &first, sizeof first), 0) << again << " vs " << first;
    const double sq_again = ops::sum_squares(t.gpu.grads.back());
    EXPECT_EQ(std::memcmp(&sq_again, &sq, sizeof sq), 0) << sq_again << " vs " << sq;
  }
  const double want = ops::sum_squares(t.cpu.grads.back());
  EXPECT_NEAR(sq, want, 1e-11 * want);
}

// A NaN or Inf anywhere makes the norm non-finite (the trainer then stops) and the factor 1.
TEST(MultiTensorAdamWCuda, NonFiniteGradGivesNonFiniteNorm) {
  LOFT_REQUIRE_GPU();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::mt19937 rng(13);
    Mirror t = make_mirror(rng);
    fill_grads(t, rng, 1.0f);
    Tensor g = t.gpu.grads[9];  // 65537 elements: the bad value sits in its second chunk's tail
    std::vector<float> host = g.to_float_vector();
    host.back() = bad;
    g.copy_from(Tensor::from_vector(host, g.shape()));
    Tensor scale = Tensor::empty({1}, DType::F32, kGpu);
    EXPECT_FALSE(std::isfinite(ops::grad_norm_clip(t.gpu, 1.0, scale))) << bad;
    EXPECT_EQ(scale.to_float_vector()[0], 1.0f);
  }
}

// llama-7b at r=64: A [64, in] and B [out, 64] of the 7 projections of 32 layers (448 tensors,
// ~160M params). The fused norm against the per-tensor sums, its clip, and the fused step (norm +
// clip factor + AdamW with zeroing) leaving every grad zero. `loft bench kernels` times the step.
TEST(MultiTensorAdamWCuda, Llama7bRank64NormClipAndStep) {
  LOFT_REQUIRE_GPU();
  const int64_t r = 64, d = 4096, f = 11008, layers = 32;
  ops::AdamWTensors t;
  int64_t params = 0;
  for (int64_t l = 0; l < layers; ++l)
    for (auto [out, in] : {std::pair{d, d}, std::pair{d, d}, std::pair{d, d}, std::pair{d, d},
                           std::pair{f, d}, std::pair{f, d}, std::pair{d, f}})
      for (const Shape& s : {Shape{r, in}, Shape{out, r}}) {
        Tensor p = Tensor::empty(s, DType::F32, kGpu), g = Tensor::empty(s, DType::F32, kGpu);
        ops::fill_random(p, uint64_t(params + 1), 0.02f);
        t.params.push_back(p);
        t.grads.push_back(g);
        t.m.push_back(Tensor::zeros(s, DType::F32, kGpu));
        t.v.push_back(Tensor::zeros(s, DType::F32, kGpu));
        params += p.numel();
      }
  ASSERT_EQ(t.params.size(), 448u);
  for (size_t i = 0; i < t.grads.size(); ++i) ops::fill_random(t.grads[i], 1000 + i, 1e-3f);
  Tensor scale = Tensor::empty({1}, DType::F32, kGpu);
  double per_tensor_sq = 0;
  for (const Tensor& g : t.grads) per_tensor_sq += ops::sum_squares(g);
  const double norm = ops::grad_norm_clip(t, 0.3, scale);
  EXPECT_NEAR(norm, std::sqrt(per_tensor_sq), 1e-11 * norm);
  EXPECT_LT(scale.to_float_vector()[0], 1.0f) << "grads of std 1e-3 over 160M params clip at 0.3";
  ops::adamw_all(t, &scale, {.lr = 2e-4, .weight_decay = 0.01, .step = 1});
  for (const Tensor& g : t.grads)
    ASSERT_EQ(ops::sum_squares(g), 0.0) << "every grad is zero after a step";
}

}  // namespace
}  // namespace loft
