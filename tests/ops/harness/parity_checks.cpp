#include "tests/ops/harness/parity_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loft::test::parity {
namespace {

// Equal bits, or both NaN.
::testing::AssertionResult same_values(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << got.str() << " vs " << want.str();
  const std::vector<float> g = got.to_float_vector(), w = want.to_float_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "entry " << i << ": " << g[i] << " vs " << w[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

double parity_error(const OpCase& c, size_t o, const Tensor& got, const Tensor& want) {
  const double rel = rel_error(got, want), floor = o < c.scale_floor_of.size() ? c.scale_floor_of[o] : 0.0;
  if (!std::isfinite(rel) || floor <= 0) return rel;
  const std::vector<float> w = want.to_float_vector();
  double norm = 0;
  for (float x : w) norm += double(x) * double(x);
  norm = std::sqrt(norm);
  return norm == 0 ? rel / floor : rel * norm / std::max(norm, floor);  // rel_error is absolute when want is 0
}

double fd_error(const OpCase& c, const Tensors& in, int input, const Tensor& grad, float eps) {
  const std::vector<float> g = grad.to_float_vector();
  std::vector<float> want, got;
  const int64_t n = in[size_t(input)].numel(), step = std::max<int64_t>(n / 23, 1);
  for (int64_t i = 0; i < n; i += step) {
    Tensors plus = in, minus = in;
    plus[size_t(input)] = in[size_t(input)].clone();
    minus[size_t(input)] = in[size_t(input)].clone();
    plus[size_t(input)].ptr<float>()[i] += eps;
    minus[size_t(input)].ptr<float>()[i] -= eps;
    want.push_back(float((c.loss(plus, Device::cpu()) - c.loss(minus, Device::cpu())) / (2.0 * double(eps))));
    got.push_back(g[size_t(i)]);
  }
  return rel_error(got, want);
}

int expect_backward_matches_differences(Device device, uint32_t seed) {
  int checked = 0;
  for (const OpCase& c : op_cases()) {
    if (c.backward_of.empty()) continue;
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      std::mt19937 rng(seed + uint32_t(i));
      const Tensors in = c.make(c.sizes[i], rng);
      if (!fd_size(c, in)) continue;
      const Tensors out = run_once(c, in, device, DType::F32);
      for (size_t o = 0; o < c.grad_of.size(); ++o) {
        if (c.grad_of[o] < 0 || out[o].numel() == 0) continue;
        EXPECT_LT(fd_error(c, in, c.grad_of[o], out[o]), c.tol_fd)
            << c.op << " on " << device.str() << ", " << label(c, c.sizes[i]) << ": d/d input " << c.grad_of[o];
        ++checked;
      }
    }
  }
  return checked;
}

bool fd_size(const OpCase& c, const Tensors& in) {
  for (const Tensor& t : in)
    if (t.numel() > c.fd_max_elements) return false;
  return true;
}

int expect_exact_cases(Device device) {
  int checked = 0;
  for (const OpCase& c : op_cases())
    for (size_t e = 0; e < c.exact.size(); ++e) {
      const Exact& x = c.exact[e];
      const Tensors got = run_once(c, x.in, device, x.dt);
      EXPECT_EQ(got.size(), x.out.size()) << c.op;
      for (size_t o = 0; o < got.size() && o < x.out.size(); ++o) {
        EXPECT_TRUE(same_values(got[o], x.out[o]))
            << c.op << " on " << device.str() << ", exact case " << e << ", output " << o;
        ++checked;
      }
    }
  return checked;
}

}  // namespace loft::test::parity
