#include "engine/ops/cpu/optim_cpu.h"

#include <cmath>

namespace loft::ops::cpu {

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s) {
  float* p = param.ptr<float>();
  const float* g = grad.ptr<float>();
  float *mm = m.ptr<float>(), *vv = v.ptr<float>();
  // torch.optim.AdamW (single-tensor path): decay first, then the bias-corrected Adam update.
  const double bc1 = 1.0 - std::pow(double(s.beta1), double(s.step));
  const double bc2 = 1.0 - std::pow(double(s.beta2), double(s.step));
  const float step_size = float(s.lr / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));
  for (int64_t i = 0, n = param.numel(); i < n; ++i) {
    p[i] *= 1.0f - s.lr * s.weight_decay;
    mm[i] = s.beta1 * mm[i] + (1.0f - s.beta1) * g[i];
    vv[i] = s.beta2 * vv[i] + (1.0f - s.beta2) * g[i] * g[i];
    const float denom = std::sqrt(vv[i]) / bc2_sqrt + s.eps;
    p[i] -= step_size * mm[i] / denom;
  }
}

double sum_squares(const Tensor& x) {
  const float* p = x.ptr<float>();
  double s = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) s += double(p[i]) * p[i];
  return s;
}

}  // namespace loft::ops::cpu
