// HotWeight (engine/methods/hot/hot_weight.h) on the CPU: the forward is the backbone's, the dX is
// the HOT pipeline with the SR counter advancing per call, LQS calibration, option parsing, and
// LoRA around it keeps exact A/B gradients (finite differences) while its dX is an unbiased
// estimate of the exact one.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/methods/hot/hot_numerics.h"
#include "engine/methods/hot/hot_weight.h"
#include "engine/ops/ops.h"
#include "engine/peft/lora_linear.h"
#include "tests/common/test_util.h"
#include "tests/methods/hot/test_hot_util.h"

namespace loft {
namespace {

Tensor weight(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  return test::random_tensor({out, in}, rng, -0.1f, 0.1f);
}

// Sets the SR counter as a resume does (per-token scale, the default without LQS).
void rewind(HotWeight& hw, int32_t micro_step) {
  hw.load_method_state({{"hot_micro_step", Tensor::from_vector(std::vector<int32_t>{micro_step}, {1})},
                        {"hot_scale", Tensor::from_vector(std::vector<int32_t>{0}, {1})}});
}

TEST(HotWeight, ForwardIsTheBackbonesAndDxIsTheHotPipeline) {
  const Tensor w = weight(64, 32, 1);
  std::mt19937 rng(2);
  const Tensor x = test::random_tensor({5, 32}, rng), dy = test::random_tensor({5, 64}, rng);
  HotOptions opt;
  opt.seed = 9;
  HotWeight hw(WeightSource(w), opt, {3, 4});
  Tensor y = Tensor::empty({5, 64}, DType::F32), y_ref = Tensor::empty({5, 64}, DType::F32);
  hw.forward(x, y, nullptr);
  ops::gemm(x, w, y_ref, {.trans_b = true});
  EXPECT_EQ(y.to_float_vector(), y_ref.to_float_vector());

  for (uint32_t step = 0; step < 3; ++step) {
    Tensor dx = Tensor::empty({5, 32}, DType::F32);
    hw.backward_input(dy, dx, false);
    quant::HotQuantOptions q;
    q.seed = 9, q.step = step, q.site = quant::hot_site(3, 4, quant::hot::kStreamGx);
    const quant::HotCodes a = quant::hot_quantize_dy(dy, q), b = quant::hot_weight_codes(w, 4);
    Tensor ref = Tensor::empty({5, 32}, DType::F32);
    quant::hot_epilogue(quant::hot_igemm(a, b), a, b, nullptr, ref, false);
    EXPECT_EQ(dx.to_float_vector(), ref.to_float_vector()) << "micro-step " << step;
  }
  EXPECT_EQ(hw.micro_step(), 3u);
  // A GPU path asked for on the CPU is the CPU loop: same bits.
  HotOptions s4 = opt;
  s4.gemm = quant::HotGemmPath::S4;
  HotWeight hw_s4(WeightSource(w), s4, {3, 4});
  Tensor a = Tensor::empty({5, 32}, DType::F32), b = Tensor::empty({5, 32}, DType::F32);
  rewind(hw, 0);
  hw.backward_input(dy, a, false);
  hw_s4.backward_input(dy, b, false);
  EXPECT_EQ(a.to_float_vector(), b.to_float_vector());
  // accumulate adds to dx
  Tensor dx = Tensor::zeros({5, 32}, DType::F32), once = Tensor::empty({5, 32}, DType::F32);
  rewind(hw, 7);
  hw.backward_input(dy, once, false);
  rewind(hw, 7);
  hw.backward_input(dy, dx, true);
  EXPECT_EQ(dx.to_float_vector(), once.to_float_vector());
}

TEST(HotWeight, Nf4AndFp8BackbonesForwardAsTheirBaseAndQuantizeWhatTheForwardSees) {
  const Tensor w = weight(64, 64, 3);
  for (HotBackbone bb : {HotBackbone::Nf4, HotBackbone::Fp8}) {
    HotOptions opt;
    opt.backbone = bb;
    HotWeight hw(WeightSource(w), opt, {0, 0});
    const Tensor wf = hw.materialize();
    EXPECT_LT(test::rel_error(wf, w), 0.15) << hot_backbone_name(bb);
    std::mt19937 rng(4);
    const Tensor dy = test::random_tensor({3, 64}, rng);
    Tensor dx = Tensor::empty({3, 64}, DType::F32);
    hw.backward_input(dy, dx, false);
    quant::HotQuantOptions q;
    q.site = quant::hot_site(0, 0, 0);
    const quant::HotCodes a = quant::hot_quantize_dy(dy, q), b = quant::hot_weight_codes(wf, 4);
    Tensor ref = Tensor::empty({3, 64}, DType::F32);
    quant::hot_epilogue(quant::hot_igemm(a, b), a, b, nullptr, ref, false);
    EXPECT_EQ(dx.to_float_vector(), ref.to_float_vector()) << hot_backbone_name(bb);
  }
}

TEST(HotWeight, CalibrationIsExactAndPicksAScalePerLayer) {
  const Tensor w = weight(64, 32, 5);
  HotWeight hw(WeightSource(w), {}, {0, 6});
  std::mt19937 rng(6);
  // One token 4× louder than 15 others: a per-tensor step is ~4× too coarse for most tokens, so per
  // token wins by more than the rule's factor 4 in squared error. (A far louder token would make
  // its own error dominate both sums: then per tensor, as in the reference code.)
  Tensor dy = test::random_tensor({16, 64}, rng);
  for (int64_t c = 0; c < 64; ++c) dy.ptr<float>()[c] *= 4.0f;
  hw.begin_calibration();
  Tensor dx = Tensor::empty({16, 32}, DType::F32), ref = Tensor::empty({16, 32}, DType::F32);
  hw.backward_input(dy, dx, false);
  ops::gemm(dy, w, ref);
  EXPECT_EQ(dx.to_float_vector(), ref.to_float_vector());
  EXPECT_EQ(hw.micro_step(), 0u) << "calibration does not advance the training counter";
  EXPECT_EQ(hw.end_calibration(), quant::HotScale::PerToken);
  // Uniform tokens: the two errors are close, so per tensor.
  const Tensor flat = test::random_tensor({16, 64}, rng);
  hw.begin_calibration();
  hw.backward_input(flat, dx, false);
  EXPECT_EQ(hw.end_calibration(), quant::HotScale::PerTensor);
  EXPECT_EQ(hw.lqs_errors().batches, 1);
}

TEST(HotWeight, OptionsAndSites) {
  EXPECT_EQ(parse_hot_backbone("nf4"), HotBackbone::Nf4);
  EXPECT_THROW(parse_hot_backbone("int4"), UsageError);
  EXPECT_EQ(parse_hot_round("rne"), quant::HotRound::Nearest);
  EXPECT_THROW(parse_hot_round("up"), UsageError);
  EXPECT_THROW(check_hot_gx_bits(2), UsageError);
  const HotSite s = hot_site_of("model.layers.12.mlp.down_proj");
  EXPECT_EQ(s.layer, 12u);
  EXPECT_EQ(s.proj, 6u);
  EXPECT_EQ(hot_site_of("model.layers.0.self_attn.k_proj").proj, 1u);
  EXPECT_THROW(hot_site_of("lm_head"), Error);
  HotOptions bad;
  bad.gx_bits = 3;
  EXPECT_THROW(HotWeight(WeightSource(weight(16, 16, 1)), bad, {}), UsageError);
}

// W = H·C·diag(s)/16 with integer codes C (|C| ≤ 7, row 0 all 7s)
// and power-of-two steps s: its HOT codes are C exactly, so W's quantization adds no bias and the
// only randomness left in dX is dY's stochastic rounding.
Tensor exactly_quantizable(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(-7, 7);
  std::vector<int> c(size_t(out * in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) c[size_t(o * in + i)] = o == 0 ? 7 : code(rng);
  Tensor w = Tensor::empty({out, in}, DType::F32);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      int s = 0;
      for (int j = 0; j < 16; ++j) {
        const int64_t r = o / 16 * 16 + j;
        s += ((__builtin_popcount(unsigned((o % 16) & j)) & 1) ? -1 : 1) * c[size_t(r * in + i)];
      }
      w.ptr<float>()[o * in + i] = std::ldexp(float(s), -(5 + int(i % 3)) - 4);
    }
  return w;
}

// loss = Σ y ∘ G for a LoRA layer on a HotWeight: dA, dB exact, dX unbiased.
TEST(HotWeight, LoraAroundItHasExactAdapterGradientsAndAnUnbiasedDx) {
  const int64_t t = 4, in = 32, out = 48;
  const Tensor w = exactly_quantizable(out, in, 7);
  std::mt19937 rng(8);
  const Tensor x = test::random_tensor({t, in}, rng), g = test::random_tensor({t, out}, rng);
  std::mt19937_64 init(9);
  LoraOptions lo;
  lo.rank = 4;
  lo.alpha = 8;
  HotOptions opt;
  LoraLinear lin("model.layers.0.mlp.up_proj",
                 hot_weight(WeightSource(w), opt, hot_site_of("model.layers.0.mlp.up_proj")), lo,
                 init);
  {  // a non-zero B so that every gradient is non-trivial
    std::mt19937 r2(10);
    lin.set_adapter(lin.lora_a().value.clone(), test::random_tensor({out, 4}, r2, -0.1f, 0.1f));
  }
  auto loss = [&](const Tensor& xx) {
    Tensor y = Tensor::empty({t, out}, DType::F32);
    lin.forward(xx, y, nullptr);
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += double(y.ptr<float>()[i]) * g.ptr<float>()[i];
    return s;
  };
  LinearSaved saved;
  Tensor y = Tensor::empty({t, out}, DType::F32);
  lin.forward(x, y, &saved);
  Tensor dx = Tensor::empty({t, in}, DType::F32);
  lin.backward(g, saved, dx, false);
  // Finite differences on A and B (central, fp32 forward: step 1e-2 on a linear loss is exact up
  // to rounding).
  for (Param* p : lin.params()) {
    for (int64_t i = 0; i < p->value.numel(); i += 7) {
      float& v = p->value.ptr<float>()[i];
      const float keep = v;
      v = keep + 1e-2f;
      lin.set_adapter(lin.lora_a().value.clone(), lin.lora_b().value.clone());
      const double up = loss(x);
      v = keep - 1e-2f;
      lin.set_adapter(lin.lora_a().value.clone(), lin.lora_b().value.clone());
      const double down = loss(x);
      v = keep;
      lin.set_adapter(lin.lora_a().value.clone(), lin.lora_b().value.clone());
      EXPECT_NEAR(p->grad.ptr<float>()[i], (up - down) / 2e-2, 2e-3) << p->name << "[" << i << "]";
    }
  }
  // dX: its mean over micro-steps (fresh SR draws) is the exact dX = G·(W + s·B·A).
  const Tensor merged = lin.merged_weight();
  Tensor exact = Tensor::empty({t, in}, DType::F32);
  ops::gemm(g, merged, exact);
  test::Draws draws(size_t(t * in));
  for (int k = 0; k < 1000; ++k) {
    lin.forward(x, y, &saved);
    lin.backward(g, saved, dx, false);
    draws.add(dx.to_float_vector());
  }
  const std::vector<float> ef = exact.to_float_vector();
  EXPECT_TRUE(draws.unbiased_against(std::vector<double>(ef.begin(), ef.end())));
}

}  // namespace
}  // namespace loft
