// CPU SwiGLU: forward against a double reference, backward against finite differences of
// L = Σ r⊙swiglu(gate, up) evaluated on the double reference, saturation, and in-place grads.
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

std::vector<double> swiglu_ref(const std::vector<double>& g, const std::vector<double>& u) {
  std::vector<double> y(g.size());
  for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return y;
}

const Shape kShapes[] = {{1, 1}, {3, 7}, {4, 64}, {2, 172}, {2, 5, 33}};

TEST(OpsCpuSwiglu, ForwardMatchesDoubleReference) {
  std::mt19937 rng(41);
  for (const Shape& s : kShapes) {
    Tensor g = test::random_tensor(s, rng, -6.0f, 6.0f), u = test::random_tensor(s, rng);
    Tensor out = Tensor::empty(s, DType::F32);
    ops::swiglu(g, u, out);
    EXPECT_LT(test::rel_error_ref(out, swiglu_ref(test::to_double(g), test::to_double(u))), 1e-5)
        << shape_str(s);
  }
}

TEST(OpsCpuSwiglu, SaturatesWithoutNan) {
  // silu(g) → g for g ≫ 0 and → 0 for g ≪ 0 (e^−g overflows to inf there).
  Tensor g = Tensor::from_vector(std::vector<float>{-200, -100, 100, 200}, {1, 4});
  Tensor u = Tensor::from_vector(std::vector<float>{1, 1, 2, 1}, {1, 4});
  Tensor out = Tensor::empty({1, 4}, DType::F32), dg = out.clone(), du = out.clone();
  ops::swiglu(g, u, out);
  EXPECT_EQ(out.to_float_vector(), (std::vector<float>{0, 0, 200, 200}));
  ops::swiglu_backward(u, g, u, dg, du);
  EXPECT_EQ(dg.to_float_vector(), (std::vector<float>{0, 0, 4, 1}));
  EXPECT_EQ(du.to_float_vector(), (std::vector<float>{0, 0, 200, 200}));
}

TEST(OpsCpuSwiglu, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(42);
  for (const Shape& s : kShapes) {
    Tensor g = test::random_tensor(s, rng, -6.0f, 6.0f), u = test::random_tensor(s, rng);
    Tensor r = test::random_tensor(s, rng);  // L = Σ r⊙out
    Tensor dg = Tensor::empty(s, DType::F32), du = Tensor::empty(s, DType::F32);
    ops::swiglu_backward(r, g, u, dg, du);
    const auto gd = test::to_double(g), ud = test::to_double(u), rd = test::to_double(r);
    const auto fd_g = test::fd_gradient(gd, [&](const auto& v) { return test::dot(rd, swiglu_ref(v, ud)); });
    const auto fd_u = test::fd_gradient(ud, [&](const auto& v) { return test::dot(rd, swiglu_ref(gd, v)); });
    EXPECT_LT(test::rel_error_ref(dg, fd_g), 1e-5) << shape_str(s);
    EXPECT_LT(test::rel_error_ref(du, fd_u), 1e-5) << shape_str(s);
  }
}

TEST(OpsCpuSwiglu, BackwardMayOverwriteGateAndUp) {
  std::mt19937 rng(43);
  Tensor g = test::random_tensor({3, 29}, rng, -4.0f, 4.0f), u = test::random_tensor({3, 29}, rng);
  Tensor dout = test::random_tensor({3, 29}, rng);
  Tensor dg = Tensor::empty({3, 29}, DType::F32), du = dg.clone();
  ops::swiglu_backward(dout, g, u, dg, du);
  Tensor g2 = g.clone(), u2 = u.clone();
  ops::swiglu_backward(dout, g2, u2, g2, u2);
  EXPECT_EQ(test::rel_error(g2, dg), 0.0);
  EXPECT_EQ(test::rel_error(u2, du), 0.0);
}

}  // namespace
}  // namespace loft
