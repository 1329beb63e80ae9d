#include "engine/ops/ops.h"

#include <cmath>

#include "engine/ops/adamw_math.h"

namespace loft::ops::cpu {

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s) {
  float* p = param.ptr<float>();
  const float* g = grad.ptr<float>();
  float *mm = m.ptr<float>(), *vv = v.ptr<float>();
  // torch.optim.AdamW (single-tensor path): decay first, then the bias-corrected Adam update.
  const AdamWConsts c = adamw_consts(s);
  for (int64_t i = 0, n = param.numel(); i < n; ++i) {
    p[i] *= c.decay;
    mm[i] = c.beta1 * mm[i] + c.one_minus_beta1 * g[i];
    vv[i] = c.beta2 * vv[i] + c.one_minus_beta2 * g[i] * g[i];
    const float denom = std::sqrt(vv[i]) / c.bc2_sqrt + c.eps;
    p[i] -= c.step_size * mm[i] / denom;
  }
}

double sum_squares(const Tensor& x) {
  const float* p = x.ptr<float>();
  double s = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) s += double(p[i]) * p[i];
  return s;
}

// The per-tensor ops in sequence: this is what the multi-tensor CUDA kernels are tested against.
double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) {
  double s = 0;
  for (const Tensor& g : t.grads) s += cpu::sum_squares(g);
  const double norm = std::sqrt(s);
  grad_scale.ptr<float>()[0] = clip_factor(norm, max_norm);
  return norm;
}

void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) {
  const float factor = grad_scale ? grad_scale->ptr<float>()[0] : 1.0f;
  for (size_t i = 0; i < t.params.size(); ++i) {
    if (factor != 1.0f) cpu::scale(t.grads[i], factor);
    cpu::adamw(t.params[i], t.grads[i], t.m[i], t.v[i], s);
    t.grads[i].zero_();
    if (i < t.copies.size() && t.copies[i].defined()) cpu::convert(t.params[i], t.copies[i]);
  }
}

}  // namespace loft::ops::cpu
