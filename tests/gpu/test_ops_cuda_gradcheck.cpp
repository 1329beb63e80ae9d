// The CUDA backward ops against central finite differences of their own forward ops (F32 on
// the GPU), independent of the CPU reference: L = Σ r·f(x) for a fixed random r.
#include <functional>

#include "engine/ops/rope_freq.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_float_vector(), y = b.to_float_vector();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += double(x[i]) * double(y[i]);
  return s;
}

// Compares grad (any device, F32) with central differences of loss(x) at a spread of entries
// of x (an F32 CPU tensor). Returns rel_error over the sampled entries; fp32 forward noise
// over 2·eps keeps it near 1e-4, a wrong formula gives O(1).
double fd_error(const Tensor& x, const Tensor& grad,
                const std::function<double(const Tensor&)>& loss, float eps = 1e-2f) {
  const std::vector<float> g = grad.to_float_vector();
  std::vector<float> want, got;
  const int64_t n = x.numel(), step = std::max<int64_t>(n / 23, 1);
  for (int64_t i = 0; i < n; i += step) {
    Tensor xp = x.clone(), xm = x.clone();
    xp.ptr<float>()[i] += eps;
    xm.ptr<float>()[i] -= eps;
    want.push_back(float((loss(xp) - loss(xm)) / (2.0 * double(eps))));
    got.push_back(g[size_t(i)]);
  }
  return rel_error(got, want);
}

TEST(GradcheckCuda, RmsnormBackward) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(91);
  const Shape s{3, 40};
  Tensor x = random_tensor(s, rng), w = random_tensor({40}, rng, 0.5f, 1.5f);
  Tensor r = random_tensor(s, rng).to(kGpu);
  auto loss = [&](const Tensor& xv, const Tensor& wv) {
    Tensor y = Tensor::empty(s, DType::F32, kGpu);
    ops::rmsnorm(xv.to(kGpu), wv.to(kGpu), 1e-5f, y);
    return dot(y, r);
  };
  Tensor y = Tensor::empty(s, DType::F32, kGpu), rstd = Tensor::empty({3}, DType::F32, kGpu);
  ops::rmsnorm(x.to(kGpu), w.to(kGpu), 1e-5f, y, &rstd);
  Tensor dx = Tensor::empty(s, DType::F32, kGpu), dw = Tensor::zeros({40}, DType::F32, kGpu);
  ops::rmsnorm_backward(r, x.to(kGpu), w.to(kGpu), rstd, dx, &dw);
  EXPECT_LT(fd_error(x, dx, [&](const Tensor& xv) { return loss(xv, w); }), 5e-3);
  EXPECT_LT(fd_error(w, dw, [&](const Tensor& wv) { return loss(x, wv); }), 5e-3);
}

TEST(GradcheckCuda, SwigluBackward) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(92);
  const Shape s{2, 50};
  Tensor g = random_tensor(s, rng, -4.0f, 4.0f), u = random_tensor(s, rng);
  Tensor r = random_tensor(s, rng).to(kGpu);
  auto loss = [&](const Tensor& gv, const Tensor& uv) {
    Tensor out = Tensor::empty(s, DType::F32, kGpu);
    ops::swiglu(gv.to(kGpu), uv.to(kGpu), out);
    return dot(out, r);
  };
  Tensor dg = Tensor::empty(s, DType::F32, kGpu), du = Tensor::empty(s, DType::F32, kGpu);
  ops::swiglu_backward(r, g.to(kGpu), u.to(kGpu), dg, du);
  EXPECT_LT(fd_error(g, dg, [&](const Tensor& gv) { return loss(gv, u); }), 5e-3);
  EXPECT_LT(fd_error(u, du, [&](const Tensor& uv) { return loss(g, uv); }), 5e-3);
}

TEST(GradcheckCuda, CrossEntropyGradient) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(93);
  const Shape s{4, 12};
  Tensor logits = random_tensor(s, rng, -3.0f, 3.0f);
  Tensor targets =
      Tensor::from_vector(std::vector<int32_t>{3, ops::kIgnoreIndex, 11, 0}, {4}).to(kGpu);
  const float grad_scale = 0.25f;
  auto loss = [&](const Tensor& lv) {
    Tensor losses = Tensor::empty({4}, DType::F32, kGpu);
    ops::cross_entropy(lv.to(kGpu), targets, losses);
    return grad_scale * ops::sum(losses);
  };
  Tensor losses = Tensor::empty({4}, DType::F32, kGpu), dl = Tensor::empty(s, DType::F32, kGpu);
  ops::cross_entropy(logits.to(kGpu), targets, losses, &dl, grad_scale);
  EXPECT_LT(fd_error(logits, dl, loss), 5e-3);
}

TEST(GradcheckCuda, RopeInverseIsBackward) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(94);
  const Shape s{3, 2, 16};
  Tensor x = random_tensor(s, rng), r = random_tensor(s, rng);
  Tensor pos = Tensor::from_vector(std::vector<int32_t>{0, 17, 2047}, {3}).to(kGpu);
  Tensor freq = Tensor::from_vector(rope_inv_freq(16, 10000.0, RopeScaling{}), {8}).to(kGpu);
  auto loss = [&](const Tensor& xv) {
    Tensor y = xv.to(kGpu);
    ops::rope(y, pos, freq);
    return dot(y, r);
  };
  Tensor dx = r.to(kGpu);
  ops::rope(dx, pos, freq, /*inverse=*/true);
  EXPECT_LT(fd_error(x, dx, loss), 5e-3);
}

}  // namespace
}  // namespace loft::test
