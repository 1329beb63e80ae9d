// CPU RMSNorm: forward against a double reference, backward (dx, accumulated dweight) against
// central finite differences of L = Σ r⊙y evaluated on the double reference.
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

constexpr float kEps = 1e-5f;

// y = w·x/sqrt(mean(x²)+eps) per row of length d, in double.
std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                int64_t d, std::vector<double>* rstd = nullptr) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * size_t(d) < x.size(); ++r) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += x[r * d + j] * x[r * d + j];
    const double rs = 1.0 / std::sqrt(ss / double(d) + double(kEps));
    if (rstd) rstd->push_back(rs);
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = w[size_t(j)] * x[r * d + j] * rs;
  }
  return y;
}

const Shape kShapes[] = {{1, 1}, {3, 7}, {5, 64}, {4, 172}, {2, 3, 173}};

TEST(OpsCpuRmsnorm, ForwardMatchesDoubleReference) {
  std::mt19937 rng(21);
  for (const Shape& s : kShapes) {
    const int64_t d = s.back(), rows = shape_numel(s) / d;
    Tensor x = test::random_tensor(s, rng, -2.0f, 2.0f), w = test::random_tensor({d}, rng, 0.5f, 1.5f);
    Tensor y = Tensor::empty(s, DType::F32), rstd = Tensor::empty({rows}, DType::F32);
    ops::rmsnorm(x, w, kEps, y, &rstd);
    std::vector<double> rstd_ref;
    const auto ref = rmsnorm_ref(test::to_double(x), test::to_double(w), d, &rstd_ref);
    EXPECT_LT(test::rel_error_ref(y, ref), 1e-5) << shape_str(s);
    EXPECT_LT(test::rel_error_ref(rstd, rstd_ref), 1e-5) << shape_str(s);
  }
}

TEST(OpsCpuRmsnorm, ConstantRowNormalisesToWeight) {
  // x = c everywhere: mean(x²) = c², so y = w·c/sqrt(c²+eps) ≈ w·sign(c).
  Tensor x = Tensor::from_vector(std::vector<float>(6, -3.0f), {1, 6});
  Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {6});
  Tensor y = Tensor::empty({1, 6}, DType::F32);
  ops::rmsnorm(x, w, 0.0f, y);
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
}

TEST(OpsCpuRmsnorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(22);
  // Not D = 1: there dx = w·dy·eps/(x²+eps)^1.5 is ~1e-5 of the two O(1) terms that cancel in
  // the formula, so fp32 cannot hold it to a relative tolerance (the absolute error stays ~1e-7).
  const Shape shapes[] = {{1, 2}, {3, 7}, {5, 64}, {4, 172}, {2, 3, 173}};
  for (const Shape& s : shapes) {
    const int64_t d = s.back(), rows = shape_numel(s) / d;
    Tensor x = test::random_tensor(s, rng, -2.0f, 2.0f), w = test::random_tensor({d}, rng, 0.5f, 1.5f);
    Tensor r = test::random_tensor(s, rng);  // L = Σ r⊙y, so dL/dy = r
    Tensor y = Tensor::empty(s, DType::F32), rstd = Tensor::empty({rows}, DType::F32);
    ops::rmsnorm(x, w, kEps, y, &rstd);
    Tensor dx = Tensor::empty(s, DType::F32);
    Tensor dw0 = test::random_tensor({d}, rng), dw = dw0.clone();  // dweight accumulates
    ops::rmsnorm_backward(r, x, w, rstd, dx, &dw);

    const auto xd = test::to_double(x), wd = test::to_double(w), rd = test::to_double(r);
    const auto fd_x = test::fd_gradient(xd, [&](const auto& v) { return test::dot(rd, rmsnorm_ref(v, wd, d)); });
    const auto fd_w = test::fd_gradient(wd, [&](const auto& v) { return test::dot(rd, rmsnorm_ref(xd, v, d)); });
    std::vector<double> dw_got = test::to_double(dw), dw_start = test::to_double(dw0);
    for (size_t j = 0; j < dw_got.size(); ++j) dw_got[j] -= dw_start[j];
    EXPECT_LT(test::rel_error_ref(dx, fd_x), 1e-5) << shape_str(s);
    EXPECT_LT(test::rel_error(std::vector<float>(dw_got.begin(), dw_got.end()),
                              std::vector<float>(fd_w.begin(), fd_w.end())),
              1e-5)
        << shape_str(s);
  }
}

TEST(OpsCpuRmsnorm, BackwardWithoutDweightAndInPlaceOverDy) {
  std::mt19937 rng(23);
  Tensor x = test::random_tensor({3, 37}, rng), w = test::random_tensor({37}, rng);
  Tensor dy = test::random_tensor({3, 37}, rng);
  Tensor y = Tensor::empty({3, 37}, DType::F32), rstd = Tensor::empty({3}, DType::F32);
  ops::rmsnorm(x, w, kEps, y, &rstd);
  Tensor dx = Tensor::empty({3, 37}, DType::F32);
  ops::rmsnorm_backward(dy, x, w, rstd, dx);
  Tensor inplace = dy.clone();
  ops::rmsnorm_backward(inplace, x, w, rstd, inplace);
  EXPECT_EQ(test::rel_error(inplace, dx), 0.0);
}

}  // namespace
}  // namespace loft
