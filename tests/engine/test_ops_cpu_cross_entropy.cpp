// CPU softmax cross-entropy: losses against a double reference, dlogits against finite
// differences of L = s·Σ losses on the double reference (dlogits is the gradient of the summed
// loss scaled by grad_scale = s, so r is the constant s), uniform logits, ignored rows, in-place
// dlogits, and the bad-target error.
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

std::vector<double> ce_ref(const std::vector<double>& logits, const std::vector<int32_t>& tgt,
                           int64_t v) {
  std::vector<double> loss(tgt.size(), 0.0);
  for (size_t r = 0; r < tgt.size(); ++r) {
    if (tgt[r] == ops::kIgnoreIndex) continue;
    const double* x = logits.data() + r * size_t(v);
    double mx = x[0], sum = 0;
    for (int64_t j = 1; j < v; ++j) mx = std::max(mx, x[j]);
    for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
    loss[r] = mx + std::log(sum) - x[tgt[r]];
  }
  return loss;
}

// Random targets in [0, v), every third row ignored.
std::vector<int32_t> targets_for(int64_t t, int64_t v, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, int32_t(v) - 1);
  std::vector<int32_t> out;
  for (int64_t r = 0; r < t; ++r) out.push_back(r % 3 == 2 ? ops::kIgnoreIndex : dist(rng));
  return out;
}

struct TV {
  int64_t t, v;
};
const TV kShapes[] = {{1, 1}, {3, 7}, {5, 172}, {4, 1000}, {2, 33}};

TEST(OpsCpuCrossEntropy, LossesMatchDoubleReference) {
  std::mt19937 rng(61);
  for (const TV& s : kShapes) {
    Tensor logits = test::random_tensor({s.t, s.v}, rng, -20.0f, 20.0f);
    const auto tgt = targets_for(s.t, s.v, rng);
    Tensor losses = Tensor::empty({s.t}, DType::F32);
    ops::cross_entropy(logits, Tensor::from_vector(tgt, {s.t}), losses);
    const auto ref = ce_ref(test::to_double(logits), tgt, s.v);
    EXPECT_LT(test::rel_error_ref(losses, ref), 1e-5) << s.t << "x" << s.v;
  }
}

TEST(OpsCpuCrossEntropy, DlogitsMatchFiniteDifferences) {
  std::mt19937 rng(62);
  const float s_scale = 0.37f;
  for (const TV& s : kShapes) {
    Tensor logits = test::random_tensor({s.t, s.v}, rng, -5.0f, 5.0f);
    const auto tgt = targets_for(s.t, s.v, rng);
    Tensor losses = Tensor::empty({s.t}, DType::F32), dlogits = Tensor::empty({s.t, s.v}, DType::F32);
    ops::cross_entropy(logits, Tensor::from_vector(tgt, {s.t}), losses, &dlogits, s_scale);
    const auto fd = test::fd_gradient(test::to_double(logits), [&](const auto& x) {
      double l = 0;
      for (double v : ce_ref(x, tgt, s.v)) l += double(s_scale) * v;
      return l;
    });
    if (s.v == 1) {  // one class: loss 0, gradient exactly 0
      EXPECT_EQ(ops::sum(dlogits), 0.0);
      EXPECT_EQ(ops::sum(losses), 0.0);
      continue;
    }
    EXPECT_LT(test::rel_error_ref(dlogits, fd), 1e-5) << s.t << "x" << s.v;
  }
}

TEST(OpsCpuCrossEntropy, UniformLogitsGiveLogV) {
  const int64_t v = 1000;
  Tensor logits = Tensor::from_vector(std::vector<float>(2 * v, 2.5f), {2, v});
  Tensor losses = Tensor::empty({2}, DType::F32), dlogits = Tensor::empty({2, v}, DType::F32);
  ops::cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, 999}, {2}), losses,
                     &dlogits);
  for (float l : losses.to_float_vector()) EXPECT_NEAR(l, std::log(1000.0), 1e-6);
  const auto g = dlogits.to_float_vector();
  EXPECT_NEAR(g[0], 1.0 / v - 1.0, 1e-7);
  EXPECT_NEAR(g[1], 1.0 / v, 1e-9);
  EXPECT_NEAR(g[size_t(2 * v - 1)], 1.0 / v - 1.0, 1e-7);
}

TEST(OpsCpuCrossEntropy, LargeLogitsStayFinite) {
  // Without the max subtraction exp(1e4) overflows. loss = log(1 + e^−10), grad = softmax − onehot.
  Tensor logits = Tensor::from_vector(std::vector<float>{1e4f, 1e4f - 10.0f}, {1, 2});
  Tensor losses = Tensor::empty({1}, DType::F32), dlogits = Tensor::empty({1, 2}, DType::F32);
  ops::cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0}, {1}), losses, &dlogits);
  const double p1 = 1.0 / (1.0 + std::exp(10.0));
  EXPECT_NEAR(losses.to_float_vector()[0], std::log1p(std::exp(-10.0)), 1e-9);
  EXPECT_NEAR(dlogits.to_float_vector()[0], -p1, 1e-9);
  EXPECT_NEAR(dlogits.to_float_vector()[1], p1, 1e-9);
}

TEST(OpsCpuCrossEntropy, IgnoredRowsGiveZeroLossAndGradient) {
  std::mt19937 rng(63);
  Tensor logits = test::random_tensor({3, 9}, rng);
  Tensor losses = Tensor::from_vector(std::vector<float>(3, NAN), {3});
  Tensor dlogits = Tensor::from_vector(std::vector<float>(27, NAN), {3, 9});
  const std::vector<int32_t> tgt = {ops::kIgnoreIndex, 4, ops::kIgnoreIndex};
  ops::cross_entropy(logits, Tensor::from_vector(tgt, {3}), losses, &dlogits);
  const auto l = losses.to_float_vector();
  EXPECT_EQ(l[0], 0.0f);
  EXPECT_EQ(l[2], 0.0f);
  EXPECT_GT(l[1], 0.0f);
  const auto g = dlogits.to_float_vector();
  for (size_t j = 0; j < 9; ++j) {
    EXPECT_EQ(g[j], 0.0f);
    EXPECT_EQ(g[18 + j], 0.0f);
  }
  EXPECT_NEAR(ops::sum(dlogits), 0.0, 1e-6);  // softmax − onehot sums to 0 on the kept row
}

TEST(OpsCpuCrossEntropy, DlogitsMayOverwriteLogits) {
  std::mt19937 rng(64);
  Tensor logits = test::random_tensor({6, 172}, rng, -8.0f, 8.0f);
  Tensor targets = Tensor::from_vector(targets_for(6, 172, rng), {6});
  Tensor losses = Tensor::empty({6}, DType::F32), dlogits = Tensor::empty({6, 172}, DType::F32);
  ops::cross_entropy(logits, targets, losses, &dlogits, 0.5f);
  Tensor inplace = logits.clone(), losses2 = Tensor::empty({6}, DType::F32);
  ops::cross_entropy(inplace, targets, losses2, &inplace, 0.5f);
  EXPECT_EQ(test::rel_error(inplace, dlogits), 0.0);
  EXPECT_EQ(test::rel_error(losses2, losses), 0.0);
}

// A BF16 gradient of F32 logits is the F32 gradient rounded to nearest even, ignored rows zero.
TEST(OpsCpuCrossEntropy, Bf16GradientIsTheF32OneRounded) {
  std::mt19937 rng(65);
  for (auto [t, v] : {std::pair<int64_t, int64_t>{1, 7}, {6, 172}, {9, 1001}}) {
    Tensor logits = test::random_tensor({t, v}, rng, -8.0f, 8.0f);
    std::vector<int32_t> tgt = targets_for(t, v, rng);
    tgt[0] = ops::kIgnoreIndex;
    Tensor targets = Tensor::from_vector(tgt, {t});
    Tensor l32 = Tensor::empty({t}, DType::F32), l16 = Tensor::empty({t}, DType::F32);
    Tensor g32 = Tensor::empty({t, v}, DType::F32), g16 = Tensor::empty({t, v}, DType::BF16);
    ops::cross_entropy(logits, targets, l32, &g32, 0.5f);
    ops::cross_entropy(logits, targets, l16, &g16, 0.5f);
    Tensor rounded = Tensor::empty({t, v}, DType::BF16);
    ops::convert(g32, rounded);
    EXPECT_EQ(test::rel_error(l16, l32), 0.0);
    EXPECT_EQ(g16.to_float_vector(), rounded.to_float_vector());
  }
  Tensor logits = Tensor::zeros({2, 5}, DType::F32), losses = Tensor::empty({2}, DType::F32);
  Tensor f16 = Tensor::empty({2, 5}, DType::F16);
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, 1}, {2}),
                                  losses, &f16),
               Error);
}

TEST(OpsCpuCrossEntropy, BadTargetNamesPosition) {
  Tensor logits = Tensor::zeros({4, 5}, DType::F32), losses = Tensor::zeros({4}, DType::F32);
  for (int32_t bad : {5, -1, -99}) {
    Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, ops::kIgnoreIndex, bad, 4}, {4});
    try {
      ops::cross_entropy(logits, targets, losses, &logits);
      ADD_FAILURE() << "no error for target " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("position 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find("target " + std::to_string(bad)), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(ops::sum(logits), 0.0);  // nothing written before the error
}

}  // namespace
}  // namespace loft
