// gemm_lowp on the GPU against the CPU reference (decode + F32 GEMM) on identical codes: the
// cuBLASLt FP8/INT8 fast path (asserted taken at 256×512×384, and with N of 8, 24, 12 and 4), the
// portable decode + bf16 path (172: M and K not multiples of 16), F32 and BF16 outputs, and the dX = dY·W case through W's
// transposed codes.
#include <gtest/gtest.h>

#include <random>

#include "engine/ops/ops.h"
#include "engine/quant/cuda/quantize_cuda.h"
#include "engine/quant/lowp_gemm.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using quant::LowpFormat;

quant::QuantizedTensor to_gpu(const quant::QuantizedTensor& q) {
  quant::QuantizedTensor g = q;
  g.codes = q.codes.to(Device::cuda(0));
  g.scale = q.scale.to(Device::cuda(0));
  if (q.codes_t.defined()) g.codes_t = q.codes_t.to(Device::cuda(0));
  return g;
}

Tensor cpu_reference(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb, float alpha) {
  Tensor c = Tensor::empty({a.size(0), b.size(0)}, DType::F32);
  quant::gemm_lowp(a, sa, b, sb, c, {.alpha = alpha});
  return c;
}

Tensor bf16_rounded(const Tensor& x) {
  Tensor b = Tensor::empty(x.shape(), DType::BF16);
  ops::convert(x, b);
  return b;
}

struct Pair {
  LowpFormat a, b;
};

class LowpGemmCuda : public ::testing::TestWithParam<Pair> {};

struct Dims {
  int64_t m, n, k;
  bool fast;  // whether the fast path must take it on an FP8-capable GPU
};

TEST_P(LowpGemmCuda, MatchesCpuReference) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(41);
  // N of 8, 24, 12 and 4 (LoRA ranks: FALQON's O_A and dB products) take the fast path: as they
  // are where C's rows stay 16-byte aligned and cuBLASLt has an algorithm, else padded (4 always,
  // 12 for BF16 C).
  for (const Dims& d : {Dims{256, 512, 384, true}, Dims{172, 172, 172, false},
                        Dims{16, 48, 32, true}, Dims{7, 5, 3, false}, Dims{256, 8, 384, true},
                        Dims{64, 24, 128, true}, Dims{64, 12, 128, true}, Dims{64, 4, 128, true}}) {
    const std::string what = cat(d.m, "x", d.n, "x", d.k);
    const auto a = quant::quantize(test::random_tensor({d.m, d.k}, rng, -2.0f, 2.0f), GetParam().a);
    const auto b = quant::quantize(test::random_tensor({d.n, d.k}, rng, -0.1f, 0.1f), GetParam().b);
    const Tensor ref = cpu_reference(a.codes, a.scale, b.codes, b.scale, 0.75f);
    const auto ga = to_gpu(a), gb = to_gpu(b);
    Tensor c = Tensor::empty({d.m, d.n}, DType::F32, Device::cuda(0));
    if (d.fast) {  // the cuBLASLt path itself, called directly so a silent fallback cannot pass
      ASSERT_TRUE(quant::cuda::gemm_lowp_fast(ga.codes, ga.scale, gb.codes, gb.scale, c, 0.75f))
          << what << ": fast path refused";
      EXPECT_LT(test::rel_error(c, ref), 1e-3) << what << " fast F32";
    }
    quant::gemm_lowp(ga.codes, ga.scale, gb.codes, gb.scale, c, {.alpha = 0.75f});
    EXPECT_LT(test::rel_error(c, ref), 1e-3) << what << " F32";
    quant::gemm_lowp(ga.codes, ga.scale, gb.codes, gb.scale, c, {.alpha = 0.75f, .allow_fast = false});
    EXPECT_LT(test::rel_error(c, ref), 1e-3) << what << " fallback F32";
    Tensor cb = Tensor::empty({d.m, d.n}, DType::BF16, Device::cuda(0));
    quant::gemm_lowp(ga.codes, ga.scale, gb.codes, gb.scale, cb, {.alpha = 0.75f});
    EXPECT_LT(test::rel_error(cb, bf16_rounded(ref)), 1e-3) << what << " BF16";
  }
}

// beta = 1 adds the product onto C in the GEMM (FALQON's dX summed over q/k/v and gate/up, its dB
// accumulated): the fast path must take it (a refusal would send a training step down the
// decode path) and every path must match the CPU reference, BF16 C included.
TEST_P(LowpGemmCuda, BetaAddsOntoCOnEveryPath) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(44);
  for (const Dims& d : {Dims{256, 512, 384, true}, Dims{172, 172, 172, false},
                        Dims{256, 8, 384, true}}) {
    const std::string what = cat(d.m, "x", d.n, "x", d.k);
    const auto a = quant::quantize(test::random_tensor({d.m, d.k}, rng, -2.0f, 2.0f), GetParam().a);
    const auto b = quant::quantize(test::random_tensor({d.n, d.k}, rng, -0.1f, 0.1f), GetParam().b);
    const Tensor prior = test::random_tensor({d.m, d.n}, rng, -3.0f, 3.0f);
    Tensor ref = prior.clone();
    quant::gemm_lowp(a.codes, a.scale, b.codes, b.scale, ref, {.alpha = 0.75f, .beta = 1.0f});
    const auto ga = to_gpu(a), gb = to_gpu(b);
    if (d.fast) {
      Tensor c = prior.to(Device::cuda(0));
      ASSERT_TRUE(quant::cuda::gemm_lowp_fast(ga.codes, ga.scale, gb.codes, gb.scale, c, 0.75f, 1.0f))
          << what << ": fast path refused beta = 1";
      EXPECT_LT(test::rel_error(c, ref), 1e-3) << what << " fast F32";
    }
    for (bool fast : {true, false}) {
      Tensor c = prior.to(Device::cuda(0));
      quant::gemm_lowp(ga.codes, ga.scale, gb.codes, gb.scale, c,
                       {.alpha = 0.75f, .beta = 1.0f, .allow_fast = fast});
      EXPECT_LT(test::rel_error(c, ref), 1e-3) << what << (fast ? " F32" : " fallback F32");
      Tensor cb = bf16_rounded(prior).to(Device::cuda(0));
      quant::gemm_lowp(ga.codes, ga.scale, gb.codes, gb.scale, cb,
                       {.alpha = 0.75f, .beta = 1.0f, .allow_fast = fast});
      EXPECT_LT(test::rel_error(cb, bf16_rounded(ref)), 1e-2) << what << (fast ? " BF16" : " fallback BF16");
    }
  }
}

TEST_P(LowpGemmCuda, NonMultipleOf16IsRefusedByTheFastPath) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(42);
  const auto a = to_gpu(quant::quantize(test::random_tensor({172, 64}, rng), GetParam().a));
  const auto b = to_gpu(quant::quantize(test::random_tensor({32, 64}, rng), GetParam().b));
  Tensor c = Tensor::empty({172, 32}, DType::F32, Device::cuda(0));
  EXPECT_FALSE(quant::cuda::gemm_lowp_fast(a.codes, a.scale, b.codes, b.scale, c, 1.0f));
}

INSTANTIATE_TEST_SUITE_P(Pairs, LowpGemmCuda,
                         ::testing::Values(Pair{LowpFormat::E4M3, LowpFormat::E4M3},
                                           Pair{LowpFormat::E5M2, LowpFormat::E4M3},
                                           Pair{LowpFormat::INT8, LowpFormat::INT8}),
                         [](const auto& info) {
                           return cat(quant::format_name(info.param.a), "_",
                                      quant::format_name(info.param.b));
                         });

// dX = dY·W with dY [T×out] in E5M2 and W [out×in] in E4M3: B is W's transposed codes [in×out],
// produced on the GPU by the quantizer.
TEST(LowpGemmCudaBackward, GradientThroughTransposedWeightCodes) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(43);
  for (const Dims& d : {Dims{256, 384, 512, true}, Dims{172, 172, 172, false}}) {
    const Tensor w = test::random_tensor({d.k, d.n}, rng, -0.05f, 0.05f);  // [out=k, in=n]
    const Tensor dy = test::random_tensor({d.m, d.k}, rng, -1e-3f, 1e-3f);
    const auto wq = quant::quantize(w.to(Device::cuda(0)), LowpFormat::E4M3, true);
    const auto dyq = quant::quantize(dy.to(Device::cuda(0)), LowpFormat::E5M2);
    Tensor dx = Tensor::empty({d.m, d.n}, DType::F32, Device::cuda(0));
    quant::gemm_lowp(dyq.codes, dyq.scale, wq.codes_t, wq.scale, dx);
    const Tensor ref = cpu_reference(dyq.codes.to(Device::cpu()), dyq.scale.to(Device::cpu()),
                                     wq.codes_t.to(Device::cpu()), wq.scale.to(Device::cpu()), 1.0f);
    EXPECT_LT(test::rel_error(dx, ref), 1e-3) << d.m << "x" << d.n << "x" << d.k;
    // And the quantized product is close to the exact one (FP8 noise, not a layout error).
    Tensor exact = Tensor::empty({d.m, d.n}, DType::F32);
    ops::gemm(dy, w, exact, {});
    EXPECT_LT(test::rel_error(dx, exact), 0.15);
  }
}

}  // namespace
}  // namespace loft
