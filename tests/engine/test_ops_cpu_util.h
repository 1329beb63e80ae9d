// Helpers for the CPU op tests: double-precision views of tensors and central finite differences.
#pragma once
#include <functional>
#include <vector>

#include "tests/common/test_util.h"

namespace loft::test {

inline std::vector<double> to_double(const Tensor& t) {
  const std::vector<float> f = t.to_float_vector();
  return {f.begin(), f.end()};
}

// rel_error of a fp32 result against a double reference (the reference rounded to fp32 adds at
// most 6e-8 relative, far below the tolerances used).
inline double rel_error_ref(const Tensor& got, const std::vector<double>& ref) {
  return rel_error(got.to_float_vector(), std::vector<float>(ref.begin(), ref.end()));
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Gradient of a scalar function at x by central differences, (L(x+eps·e_i) − L(x−eps·e_i))/2eps.
// Used on double references, so eps ~1e-5 leaves truncation (~eps²) and round-off (~1e-16/eps)
// errors near 1e-10, far below the 1e-5 tolerances the fp32 backward passes are held to.
inline std::vector<double> fd_gradient(std::vector<double> x,
                                       const std::function<double(const std::vector<double>&)>& loss,
                                       double eps = 1e-5) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double up = loss(x);
    x[i] = x0 - eps;
    const double down = loss(x);
    x[i] = x0;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

}  // namespace loft::test
