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
  const float decay = float(1.0 - s.lr * s.weight_decay);
  const float b1 = float(s.beta1), omb1 = float(1.0 - s.beta1);
  const float b2 = float(s.beta2), omb2 = float(1.0 - s.beta2), eps = float(s.eps);
  for (int64_t i = 0, n = param.numel(); i < n; ++i) {
    p[i] *= decay;
    mm[i] = b1 * mm[i] + omb1 * g[i];
    vv[i] = b2 * vv[i] + omb2 * g[i] * g[i];
    const float denom = std::sqrt(vv[i]) / bc2_sqrt + eps;
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
