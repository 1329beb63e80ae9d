// The CPU AdamW step against torch.optim.AdamW's formula written out in double, and sum_squares.
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

// torch.optim.AdamW, single-tensor path, in double: decoupled decay first, then the
// bias-corrected update with eps added after the bias-corrected square root.
struct AdamState {
  std::vector<double> p, m, v;
};

void torch_adamw_step(AdamState& s, const std::vector<double>& g, const ops::AdamWStep& h) {
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const double bc1 = 1 - std::pow(b1, double(h.step)), bc2 = 1 - std::pow(b2, double(h.step));
  const double step_size = lr / bc1;
  for (size_t i = 0; i < s.p.size(); ++i) {
    s.p[i] -= lr * wd * s.p[i];
    s.m[i] = b1 * s.m[i] + (1 - b1) * g[i];
    s.v[i] = b2 * s.v[i] + (1 - b2) * g[i] * g[i];
    const double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + eps;
    s.p[i] -= step_size * s.m[i] / denom;
  }
}

// |got − want| ≤ tol·max(1, |want|) for every entry.
void expect_close(const Tensor& got, const std::vector<double>& want, double tol,
                  const char* what) {
  const std::vector<float> g = got.to_float_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - want[i]), tol * std::max(1.0, std::abs(want[i])))
        << what << "[" << i << "]: " << g[i] << " vs " << want[i];
}

std::vector<double> to_double(const Tensor& t) {
  const std::vector<float> f = t.to_float_vector();
  return {f.begin(), f.end()};
}

TEST(AdamWCpu, ThreeStepsMatchTorchFormula) {
  std::mt19937 rng(17);
  for (float wd : {0.0f, 0.1f})
    for (int64_t n : {1, 7, 172}) {
      SCOPED_TRACE(cat("weight_decay=", wd, " n=", n));
      Tensor p = test::random_tensor({n}, rng);
      Tensor m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
      AdamState ref{to_double(p), std::vector<double>(size_t(n)), std::vector<double>(size_t(n))};
      ops::AdamWStep h;
      h.lr = 1e-2f;
      h.weight_decay = wd;
      for (int64_t step = 1; step <= 3; ++step) {
        h.step = step;
        // Gradients of mixed magnitude, so eps and the bias corrections both matter.
        const Tensor g = test::random_tensor({n}, rng, -1e-3f, 1e-3f);
        ops::cpu::adamw(p, g, m, v, h);
        torch_adamw_step(ref, to_double(g), h);
        expect_close(p, ref.p, 1e-6, "param");
        expect_close(m, ref.m, 1e-6, "m");
        expect_close(v, ref.v, 1e-6, "v");
      }
    }
}

TEST(AdamWCpu, FirstStepByHand) {
  // Step 1 from zero moments: m̂ = g and √v̂ = |g|, so p ← p·(1 − lr·wd) − lr·g/(|g| + eps).
  // p = 1, g = ±0.5, lr = 0.1, wd = 0.01: 0.999 ∓ 0.1·0.5/(0.5 + 1e-8).
  for (float g : {0.5f, -0.5f}) {
    Tensor p = Tensor::from_vector(std::vector<float>{1.0f}, {1});
    Tensor m = Tensor::zeros({1}, DType::F32), v = Tensor::zeros({1}, DType::F32);
    ops::AdamWStep h;
    h.lr = 0.1f;
    h.weight_decay = 0.01f;
    ops::cpu::adamw(p, Tensor::from_vector(std::vector<float>{g}, {1}), m, v, h);
    EXPECT_NEAR(p.to_float_vector()[0], g > 0 ? 0.899 : 1.099, 1e-6);
    // 1 − β is formed in double and then rounded to float, as PyTorch does with its Python floats.
    EXPECT_NEAR(m.to_float_vector()[0], double(float(1 - 0.9)) * g, 1e-9);
    EXPECT_NEAR(v.to_float_vector()[0], double(float(1 - 0.999)) * 0.25, 1e-11);
  }
}

TEST(SumSquaresCpu, MatchesDoubleSum) {
  EXPECT_EQ(ops::cpu::sum_squares(Tensor::from_vector(std::vector<float>{1, -2, 3}, {3})), 14.0);
  EXPECT_EQ(ops::cpu::sum_squares(Tensor::zeros({0}, DType::F32)), 0.0);
  std::mt19937 rng(23);
  for (int64_t n : {7, 172, 100003}) {
    const Tensor x = test::random_tensor({n}, rng, -3, 3);
    double want = 0;
    for (float f : x.to_float_vector()) want += double(f) * f;
    EXPECT_NEAR(ops::cpu::sum_squares(x), want, 1e-12 * want) << "n=" << n;
  }
}

}  // namespace
}  // namespace loft
